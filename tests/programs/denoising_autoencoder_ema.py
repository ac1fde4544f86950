"""A denoising autoencoder with an exponential moving average of its weights (the research
habit: an EMA copy made with copy.deepcopy, updated in place under torch.no_grad())."""
import copy
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)
n, d = 512, 20
basis = torch.randn(3, d)
clean = torch.randn(n, 3) @ basis / 2


class DAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d, 16), nn.Tanh(), nn.Linear(16, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, d))

    def forward(self, x):
        return self.decoder(self.encoder(x))


model = DAE()
ema = copy.deepcopy(model)
for p in ema.parameters():
    p.requires_grad_(False)


@torch.no_grad()
def update_ema(decay=0.99):
    for p_ema, p in zip(ema.parameters(), model.parameters()):
        p_ema.mul_(decay).add_(p, alpha=1 - decay)


def denoise_error(m):
    with torch.no_grad():
        noisy = clean + 0.3 * torch.randn(n, d)
        return nn.functional.mse_loss(m(noisy), clean).item()


optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
start = denoise_error(ema)
for step in range(400):
    idx = torch.randint(0, n, (64,))
    x = clean[idx]
    noisy = x + 0.3 * torch.randn_like(x)
    loss = nn.functional.mse_loss(model(noisy), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    update_ema()

end_model, end_ema = denoise_error(model), denoise_error(ema)
print(f"denoising mse: start {start:.4f}, model {end_model:.4f}, ema {end_ema:.4f}")
print(f"METRIC ema_mse {end_ema:.4f}")
sys.exit(0 if end_ema < start / 3 and end_model < start / 3 else 1)
