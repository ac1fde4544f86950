"""A GAN (DCGAN tutorial style, on 1-D data): a generator and a discriminator with their own
Adam optimizers, a custom weights_init applied with model.apply, real/fake labels made with
torch.full and fill_, and D's loss on fake data through G's output detached."""
import sys

import torchlean as torch
from torchlean import nn

torch.manual_seed(0)
nz, batch_size = 4, 64
real_label, fake_label = 1.0, 0.0
target_mean, target_std = 3.0, 0.5


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Linear") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.2)
        nn.init.constant_(m.bias.data, 0)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


netG = nn.Sequential(nn.Linear(nz, 16), nn.BatchNorm1d(16), nn.ReLU(True), nn.Linear(16, 1))
netD = nn.Sequential(nn.Linear(1, 16), nn.LeakyReLU(0.2, inplace=True), nn.Linear(16, 1),
                     nn.Sigmoid())
netG.apply(weights_init)
netD.apply(weights_init)

criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=0.01, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=0.01, betas=(0.5, 0.999))

with torch.no_grad():
    start_mean = netG(torch.randn(512, nz)).mean().item()

for i in range(300):
    # (1) update D: maximize log(D(x)) + log(1 - D(G(z)))
    netD.zero_grad()
    real = target_mean + target_std * torch.randn(batch_size, 1)
    label = torch.full((batch_size,), real_label, dtype=torch.float)
    output = netD(real).view(-1)
    errD_real = criterion(output, label)
    errD_real.backward()
    noise = torch.randn(batch_size, nz)
    fake = netG(noise)
    label.fill_(fake_label)
    output = netD(fake.detach()).view(-1)
    errD_fake = criterion(output, label)
    errD_fake.backward()
    optimizerD.step()
    # (2) update G: maximize log(D(G(z)))
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake).view(-1)
    errG = criterion(output, label)
    errG.backward()
    optimizerG.step()

netG.eval()
with torch.no_grad():
    samples = netG(torch.randn(1000, nz))
mean = samples.mean().item()
print(f"generated mean {start_mean:.3f} -> {mean:.3f} (target {target_mean})")
print(f"METRIC mean_error {abs(mean - target_mean):.4f}")
sys.exit(0 if abs(mean - target_mean) < 0.5 < abs(start_mean - target_mean) else 1)
