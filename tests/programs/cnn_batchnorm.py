"""A small CNN with BatchNorm2d classifying synthetic 8x8 images (a horizontal or a vertical
bar at a random place, plus noise), trained with SGD + momentum over mini-batches."""
import sys

import torchlean as torch
from torchlean import nn
import torchlean.nn.functional as F

torch.manual_seed(0)


def make_bars(n):
    images = 0.3 * torch.randn(n, 1, 8, 8)
    labels = torch.randint(0, 2, (n,))
    where = torch.randint(0, 8, (n,))
    for i in range(n):
        if labels[i] == 0:
            images[i, 0, where[i], :] += 2.0
        else:
            images[i, 0, :, where[i]] += 2.0
    return images, labels


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 2 * 2, 2)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        return self.fc(x)


x_train, y_train = make_bars(256)
x_test, y_test = make_bars(128)
model = Net()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
criterion = nn.CrossEntropyLoss()

losses = []
for epoch in range(4):
    model.train()
    perm = torch.randperm(len(x_train))
    for i in range(0, len(x_train), 32):
        idx = perm[i:i + 32]
        optimizer.zero_grad()
        loss = criterion(model(x_train[idx]), y_train[idx])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

model.eval()
correct = 0
with torch.no_grad():
    pred = model(x_test).argmax(1)
    correct += (pred == y_test).sum().item()
acc = correct / len(y_test)
print(f"first loss {losses[0]:.4f} last loss {losses[-1]:.4f} test accuracy {acc:.3f}")
print(f"METRIC accuracy {acc:.4f}")
sys.exit(0 if acc > 0.9 else 1)
