"""Transfer learning (the fine-tuning tutorial's pattern): pretrain a small network on one task,
freeze its feature extractor with requires_grad = False, replace the head and train only the
parameters that still require gradients on a new task."""
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)
d = 8
X = torch.randn(512, d)
features_true = torch.tanh(X @ torch.randn(d, 4))
y_old = features_true.argmax(1)
y_new = (features_true[:, 0] - features_true[:, 1] > 0).long()

backbone = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
model = nn.Sequential(backbone, nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
for step in range(200):
    opt.zero_grad()
    loss_fn(model(X), y_old).backward()
    opt.step()

for param in backbone.parameters():
    param.requires_grad = False
model[1] = nn.Linear(32, 2)
frozen_before = [p.detach().clone() for p in backbone.parameters()]
trainable = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.SGD(trainable, lr=0.1, momentum=0.9)
with torch.no_grad():
    first = loss_fn(model(X), y_new).item()
for step in range(200):
    opt.zero_grad()
    loss = loss_fn(model(X), y_new)
    loss.backward()
    opt.step()

with torch.no_grad():
    acc = (model(X).argmax(1) == y_new).float().mean().item()
unchanged = all(torch.equal(a, b) for a, b in zip(frozen_before, backbone.parameters()))
print(f"trainable tensors {len(trainable)}; new-task loss {first:.4f} -> {loss.item():.4f}; "
      f"accuracy {acc:.3f}; backbone unchanged: {unchanged}")
print(f"METRIC accuracy {acc:.4f}")
sys.exit(0 if acc > 0.85 and unchanged and len(trainable) == 2 else 1)
