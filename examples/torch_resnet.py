"""A small ResNet (BasicBlocks with identity and projection shortcuts, BatchNorm, global average
pooling) on scikit-learn's 8x8 digits, trained with AdamW under a cosine schedule, written as a
PyTorch program and run by torchlean after changing imports.

Only the three import lines below differ from the torch program (`import torch`, `import
torch.nn as nn`, `import torch.nn.functional as F`).
"""
import argparse

from sklearn.datasets import load_digits

import torchlean as torch                 # torch: import torch
import torchlean.nn as nn                 # torch: import torch.nn as nn
import torchlean.nn.functional as F       # torch: import torch.nn.functional as F


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, num_blocks=(1, 1, 1), widths=(16, 32, 64), num_classes=10):
        super().__init__()
        self.in_planes = widths[0]
        self.conv1 = nn.Conv2d(1, widths[0], kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        layers = []
        for i, (n, w) in enumerate(zip(num_blocks, widths)):
            layers.append(self._make_layer(w, n, stride=1 if i == 0 else 2))
        self.layers = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[-1], num_classes)

    def _make_layer(self, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        blocks = []
        for s in strides:
            blocks.append(BasicBlock(self.in_planes, planes, s))
            self.in_planes = planes
        return nn.Sequential(*blocks)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layers(out)
        out = self.avgpool(out)
        out = torch.flatten(out, 1)
        return self.fc(out)


def evaluate(model, loader, criterion):
    model.eval()
    loss_sum, correct, total = 0.0, 0, 0
    with torch.no_grad():
        for images, labels in loader:
            outputs = model(images)
            loss_sum += criterion(outputs, labels).item() * labels.size(0)
            correct += (outputs.argmax(dim=1) == labels).sum().item()
            total += labels.numel()
    model.train()
    return loss_sum / total, correct / total


def main():
    parser = argparse.ArgumentParser(description="ResNet with BasicBlocks on 8x8 digits")
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target)
    perm = torch.randperm(len(y))
    train_idx, test_idx = perm[:1400], perm[1400:]
    train_ds = torch.utils.data.TensorDataset(x[train_idx], y[train_idx])
    test_ds = torch.utils.data.TensorDataset(x[test_idx], y[test_idx])
    train_loader = torch.utils.data.DataLoader(train_ds, batch_size=args.batch_size,
                                               shuffle=True, drop_last=True)
    test_loader = torch.utils.data.DataLoader(test_ds, batch_size=256)

    model = ResNet().to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"ResNet with {n_params} parameters on {device}")
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=5e-4)
    total_steps = args.epochs * len(train_loader)
    if args.steps is not None:
        total_steps = min(total_steps, args.steps)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_steps)

    step = 0
    for epoch in range(args.epochs):
        running, seen = 0.0, 0
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            running += loss.item() * labels.size(0)
            seen += labels.size(0)
            step += 1
            if step >= total_steps:
                break
        test_loss, test_acc = evaluate(model, test_loader, criterion)
        print(f"epoch {epoch + 1}: train loss {running / seen:.4f}  test loss {test_loss:.4f}  "
              f"test accuracy {100 * test_acc:.1f}%  lr {scheduler.get_last_lr()[0]:.2e}")
        if step >= total_steps:
            break
    print(f"final test accuracy: {100 * test_acc:.1f}%")


if __name__ == "__main__":
    main()
