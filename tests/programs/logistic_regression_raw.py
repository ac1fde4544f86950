"""Logistic regression from raw tensors: weights with requires_grad, a hand-written loss,
w.grad read and zeroed by hand (the "what is torch.nn really" tutorial style)."""
import sys

import torchlean as torch

torch.manual_seed(0)
n, d = 256, 5
true_w = torch.randn(d, 1)
X = torch.randn(n, d)
y = (X @ true_w > 0).float()

w = torch.zeros(d, 1, requires_grad=True)
b = torch.zeros(1, requires_grad=True)
lr = 0.5


def model(xb):
    return torch.sigmoid(xb @ w + b)


def bce(p, target):
    return -(target * torch.log(p + 1e-7) + (1 - target) * torch.log(1 - p + 1e-7)).mean()


first = None
for epoch in range(100):
    loss = bce(model(X), y)
    if first is None:
        first = loss.item()
    loss.backward()
    with torch.no_grad():
        w -= w.grad * lr
        b -= b.grad * lr
        w.grad.zero_()
        b.grad.zero_()

with torch.no_grad():
    acc = ((model(X) > 0.5).float() == y).float().mean().item()
print(f"first loss {first:.4f} final loss {loss.item():.4f} accuracy {acc:.3f}")
print(f"METRIC accuracy {acc:.4f}")
sys.exit(0 if acc > 0.9 and loss.item() < first / 2 else 1)
