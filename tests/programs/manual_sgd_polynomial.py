"""PyTorch's tutorial: fit sin(x) with a third-order polynomial, nn.Sequential and a manual SGD
update under torch.no_grad()."""
import math
import sys

import torchlean as torch
from torchlean import nn

x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)

p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

model = nn.Sequential(
    nn.Linear(3, 1),
    nn.Flatten(0, 1),
)
loss_fn = nn.MSELoss(reduction="sum")

learning_rate = 1e-6
losses = []
for t in range(2000):
    y_pred = model(xx)
    loss = loss_fn(y_pred, y)
    losses.append(loss.item())
    model.zero_grad()
    loss.backward()
    with torch.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad

linear_layer = model[0]
print(f"Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + "
      f"{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3")
print(f"first loss {losses[0]:.2f} final loss {losses[-1]:.2f}")
print(f"METRIC final_loss {losses[-1]:.4f}")
sys.exit(0 if losses[-1] < losses[0] / 10 and losses[-1] < 50 else 1)
