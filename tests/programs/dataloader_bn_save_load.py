"""A tabular classifier: TensorDataset + DataLoader (shuffle, a torch.Generator), BatchNorm1d and
Dropout, a train/eval loop, a checkpoint written with torch.save and read back with torch.load
into a fresh model, which must predict exactly as the trained one."""
import os
import sys
import tempfile

import torchlean as torch
from torchlean import nn
from torchlean.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
n, d = 600, 10
X = torch.randn(n, d) * 3 + 1
w = torch.randn(d)
y = ((X - 1) @ w > 0).long()
train_ds = TensorDataset(X[:500], y[:500])
val_x, val_y = X[500:], y[500:]
g = torch.Generator()
g.manual_seed(42)
loader = DataLoader(train_ds, batch_size=50, shuffle=True, generator=g)


def make_model():
    return nn.Sequential(nn.Linear(d, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1),
                         nn.Linear(32, 2))


model = make_model()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-4)
loss_fn = nn.CrossEntropyLoss()


def evaluate(m):
    m.eval()
    with torch.no_grad():
        logits = m(val_x)
        return loss_fn(logits, val_y).item(), (logits.argmax(1) == val_y).float().mean().item()


first_val_loss, _ = evaluate(model)
for epoch in range(8):
    model.train()
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
val_loss, val_acc = evaluate(model)

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "checkpoint.pt")
    torch.save({"epoch": 8, "model_state_dict": model.state_dict(),
                "optimizer_state_dict": optimizer.state_dict(), "val_loss": val_loss}, path)
    checkpoint = torch.load(path, weights_only=True)

restored = make_model()
restored.load_state_dict(checkpoint["model_state_dict"])
restored_optimizer = torch.optim.Adam(restored.parameters(), lr=1e-2, weight_decay=1e-4)
restored_optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
restored.eval()
model.eval()
with torch.no_grad():
    same = torch.equal(restored(val_x), model(val_x))
print(f"val loss {first_val_loss:.4f} -> {val_loss:.4f}, val accuracy {val_acc:.3f}, "
      f"checkpoint epoch {checkpoint['epoch']}, restored model identical: {same}")
print(f"METRIC accuracy {val_acc:.4f}")
sys.exit(0 if val_acc > 0.85 and val_loss < first_val_loss / 2 and same else 1)
