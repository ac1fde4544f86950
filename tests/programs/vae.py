"""A variational autoencoder (the pytorch/examples VAE, shrunk) on synthetic data lying near a
2-D plane in 16 dimensions: reparameterisation with randn_like, BCE reconstruction + KL."""
import sys

import torchlean as torch
from torchlean import nn
from torchlean.nn import functional as F

torch.manual_seed(0)
n, dim = 256, 16
z_true = torch.randn(n, 2)
mixing = torch.randn(2, dim)
data = torch.sigmoid(3 * z_true @ mixing)


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(dim, 32)
        self.fc21 = nn.Linear(32, 2)
        self.fc22 = nn.Linear(32, 2)
        self.fc3 = nn.Linear(2, 32)
        self.fc4 = nn.Linear(32, dim)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, dim))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    bce = F.binary_cross_entropy(recon_x, x.view(-1, dim), reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


model = VAE()
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
epoch_losses = []
for epoch in range(30):
    model.train()
    train_loss = 0.0
    for i in range(0, n, 32):
        batch = data[i:i + 32]
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(batch)
        loss = loss_function(recon_batch, batch, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    epoch_losses.append(train_loss / n)

model.eval()
with torch.no_grad():
    recon, mu, logvar = model(data)
    mse = F.mse_loss(recon, data).item()
    baseline = F.mse_loss(data.mean(0, keepdim=True).expand(n, dim), data).item()
print(f"loss per sample {epoch_losses[0]:.3f} -> {epoch_losses[-1]:.3f}; reconstruction mse "
      f"{mse:.5f} (mean predictor {baseline:.5f})")
print(f"METRIC recon_ratio {mse / baseline:.4f}")
sys.exit(0 if epoch_losses[-1] < epoch_losses[0] and mse < baseline / 3 else 1)
