"""An MLP classifying two interleaved spirals (synthetic data), trained with Adam."""
import math
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)

n = 200
t = torch.rand(n) * 3 * math.pi
labels = torch.randint(0, 2, (n,))
r = t / (3 * math.pi) + 0.1
sign = labels.float() * 2 - 1
X = torch.stack([r * torch.cos(t) * sign, r * torch.sin(t) * sign], dim=1)
X = X + 0.02 * torch.randn(n, 2)
y = labels

model = nn.Sequential(
    nn.Linear(2, 32),
    nn.ReLU(),
    nn.Linear(32, 32),
    nn.ReLU(),
    nn.Linear(32, 2),
)
loss_fn = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

first_loss = None
for epoch in range(150):
    optimizer.zero_grad()
    logits = model(X)
    loss = loss_fn(logits, y)
    loss.backward()
    optimizer.step()
    if first_loss is None:
        first_loss = loss.item()

model.eval()
with torch.no_grad():
    acc = (model(X).argmax(dim=1) == y).float().mean().item()
print(f"first loss {first_loss:.4f} final loss {loss.item():.4f} accuracy {acc:.3f}")
print(f"METRIC accuracy {acc:.4f}")
sys.exit(0 if acc > 0.9 and loss.item() < first_loss / 3 else 1)
