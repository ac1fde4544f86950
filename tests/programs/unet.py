"""A tiny U-Net segmenting synthetic 16x16 images (bright squares on noise): DoubleConv blocks,
MaxPool2d down, ConvTranspose2d up, skip connections joined with torch.cat,
BCEWithLogitsLoss, and the Dice score of the predicted masks."""
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)


def make_data(n, size=16):
    images = 0.5 * torch.randn(n, 1, size, size)
    masks = torch.zeros(n, 1, size, size)
    corners = torch.randint(0, size - 6, (n, 2))
    sides = torch.randint(3, 7, (n,))
    for i in range(n):
        r, c, s = corners[i, 0], corners[i, 1], sides[i]
        masks[i, 0, r:r + s, c:c + s] = 1.0
    return images + 1.5 * masks, masks


class DoubleConv(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout),
                                 nn.ReLU(inplace=True), nn.Conv2d(cout, cout, 3, padding=1),
                                 nn.BatchNorm2d(cout), nn.ReLU(inplace=True))

    def forward(self, x):
        return self.net(x)


class UNet(nn.Module):
    def __init__(self, c=8):
        super().__init__()
        self.inc = DoubleConv(1, c)
        self.down = nn.MaxPool2d(2)
        self.mid = DoubleConv(c, 2 * c)
        self.up = nn.ConvTranspose2d(2 * c, c, kernel_size=2, stride=2)
        self.dec = DoubleConv(2 * c, c)
        self.outc = nn.Conv2d(c, 1, kernel_size=1)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.mid(self.down(x1))
        x = self.dec(torch.cat([x1, self.up(x2)], dim=1))
        return self.outc(x)


def dice(logits, target):
    pred = (torch.sigmoid(logits) > 0.5).float()
    inter = (pred * target).sum()
    return (2 * inter / (pred.sum() + target.sum() + 1e-6)).item()


x_train, m_train = make_data(64)
x_test, m_test = make_data(32)
model = UNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = nn.BCEWithLogitsLoss()
losses = []
for epoch in range(10):
    model.train()
    for i in range(0, 64, 16):
        optimizer.zero_grad()
        loss = criterion(model(x_train[i:i + 16]), m_train[i:i + 16])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

model.eval()
with torch.no_grad():
    score = dice(model(x_test), m_test)
print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}, test dice {score:.3f}")
print(f"METRIC dice {score:.4f}")
sys.exit(0 if score > 0.8 and losses[-1] < losses[0] / 3 else 1)
