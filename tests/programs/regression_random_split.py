"""Linear regression on noisy synthetic data: random_split into train and validation sets with
a seeded torch.Generator, DataLoaders, SGD with momentum and a StepLR schedule, validation MSE
against the noise floor and the recovered coefficients against the true ones."""
import sys

import torchlean as torch
from torchlean import nn
from torchlean.utils.data import DataLoader, TensorDataset, random_split

torch.manual_seed(0)
true_w = torch.tensor([[2.0], [-3.0], [0.5]])
true_b = 1.0
X = torch.randn(400, 3)
y = X @ true_w + true_b + 0.1 * torch.randn(400, 1)

dataset = TensorDataset(X, y)
train_set, val_set = random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(0))
train_loader = DataLoader(train_set, batch_size=32, shuffle=True)
val_loader = DataLoader(val_set, batch_size=80)

model = nn.Linear(3, 1)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)


def validate():
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for xb, yb in val_loader:
            total += criterion(model(xb), yb).item() * len(xb)
            count += len(xb)
    return total / count


first = validate()
for epoch in range(20):
    model.train()
    for xb, yb in train_loader:
        optimizer.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
    scheduler.step()

val_mse = validate()
w_err = (model.weight.detach().t() - true_w).abs().max().item()
print(f"train {len(train_set)} val {len(val_set)}; val mse {first:.4f} -> {val_mse:.5f}; "
      f"max weight error {w_err:.4f}; bias {model.bias.item():.3f}")
print(f"METRIC val_mse {val_mse:.5f}")
sys.exit(0 if len(train_set) == 320 and val_mse < 0.03 and w_err < 0.05 else 1)
