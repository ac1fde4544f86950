"""A variational autoencoder (PyTorch's examples/vae shape: Linear-ReLU encoder to mean and
log-variance, the reparameterisation trick with torch.randn_like, a sigmoid decoder, binary
cross-entropy plus the KL divergence) on scikit-learn's 8x8 digits scaled to [0, 1], written as
a PyTorch program and run by torchlean after changing imports.

Only the three import lines below differ from the torch program (`import torch`, `import
torch.nn as nn`, `import torch.nn.functional as F`).
"""
import argparse

from sklearn.datasets import load_digits

import torchlean as torch                 # torch: import torch
import torchlean.nn as nn                 # torch: import torch.nn as nn
import torchlean.nn.functional as F       # torch: import torch.nn.functional as F


class VAE(nn.Module):
    def __init__(self, d_in=64, hidden=128, latent=8):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc21 = nn.Linear(hidden, latent)
        self.fc22 = nn.Linear(hidden, latent)
        self.fc3 = nn.Linear(latent, hidden)
        self.fc4 = nn.Linear(hidden, d_in)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x)
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction (binary cross-entropy, summed) + KL divergence, summed over the batch."""
    bce = F.binary_cross_entropy(recon_x, x, reduction='sum')
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def main():
    parser = argparse.ArgumentParser(description="a VAE on 8x8 digits")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    args = parser.parse_args()

    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    digits = load_digits()
    data = torch.tensor(digits.data / 16.0, dtype=torch.float32)
    perm = torch.randperm(data.size(0))
    train = torch.utils.data.TensorDataset(data[perm[:1500]])
    test = data[perm[1500:]].to(device)
    loader = torch.utils.data.DataLoader(train, batch_size=args.batch_size, shuffle=True)

    model = VAE().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    history = []
    step = 0
    for epoch in range(1, args.epochs + 1):
        model.train()
        train_loss = 0.0
        for (x,) in loader:
            x = x.to(device)
            optimizer.zero_grad()
            recon, mu, logvar = model(x)
            loss = loss_function(recon, x, mu, logvar)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
            history.append(loss)            # kept for logging, read after the epoch
            step += 1
            if args.steps is not None and step >= args.steps:
                break
        model.eval()
        with torch.no_grad():
            recon, mu, logvar = model(test)
            test_loss = loss_function(recon, test, mu, logvar).item() / test.size(0)
        per_sample = sum(h.item() for h in history[-len(loader):]) / len(train)
        print(f"epoch {epoch}: train loss {per_sample:.2f}  test loss {test_loss:.2f} "
              f"nats per image")
        if args.steps is not None and step >= args.steps:
            break
    with torch.no_grad():
        sample = model.decode(torch.randn(4, 8).to(device))
    print(f"first loss {history[0].item() / args.batch_size:.2f}, final test loss "
          f"{test_loss:.2f} nats per image; samples in [{sample.min().item():.3f}, "
          f"{sample.max().item():.3f}]")


if __name__ == "__main__":
    main()
