"""FNO1d on viscous Burgers' equation data from a NumPy pseudo-spectral solver (RK4 in time):
lift (1 -> width) -> [SpectralConv1d + pointwise skip, ReLU] -> projection (width -> 1), MSE
between the predicted and the solved field at t_end, Adam."""
from __future__ import annotations

import time

import numpy as np

from _common import DataParallel, parser, setup, progress, summary


def burgers(n_samples, grid=32, nu=0.1, t_end=0.5, dt=1e-3, seed=0):
    """(u0, u(t_end)) pairs, float32 (n_samples, grid). The nonlinear term is de-aliased with
    the 2/3 rule: without it the coarse-grid solve blows up to NaN."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 2 * np.pi, grid, endpoint=False)
    k = np.fft.rfftfreq(grid, 1.0 / grid)
    keep = k < grid / 3
    u0 = np.zeros((n_samples, grid))
    for m in range(1, 4):
        u0 += rng.standard_normal((n_samples, 1)) * np.sin(m * x) / m
        u0 += rng.standard_normal((n_samples, 1)) * np.cos(m * x) / m

    def rhs(u):
        uh = np.fft.rfft(u, axis=1)
        ux = np.fft.irfft(1j * k * uh, n=grid, axis=1)
        uxx = np.fft.irfft(-(k ** 2) * uh, n=grid, axis=1)
        adv = np.fft.irfft(np.fft.rfft(-u * ux, axis=1) * keep, n=grid, axis=1)
        return adv + nu * uxx

    u = u0.copy()
    for _ in range(int(t_end / dt)):
        k1 = rhs(u); k2 = rhs(u + dt / 2 * k1); k3 = rhs(u + dt / 2 * k2); k4 = rhs(u + dt * k3)
        u = u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return u0.astype(np.float32), u.astype(np.float32)


def build_model(width: int = 8, modes: int = 8):
    """forward(x): x (grid, 1) or (B, grid, 1) -> the same shape."""
    from torchlean import nn

    class FNO1d(nn.Module):
        def __init__(self):
            super().__init__()
            self.lift, self.spec = nn.Linear(1, width), nn.SpectralConv1d(width, modes)
            self.skip, self.proj = nn.Linear(width, width), nn.Linear(width, 1)

        def forward(self, x):
            h = self.lift(x)
            h = (self.spec(h) + self.skip(h)).relu()
            return self.proj(h)

    return FNO1d()


def main(argv=None):
    p = parser(__doc__, steps=300)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=8)
    args = p.parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session

    grid, ntrain = 32, 128
    a, u = burgers(160, grid)
    dp = DataParallel(args)
    model = dp.wrap(build_model())
    opt = optim.Adam(model.parameters(), lr=args.lr)
    s = Session()
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps, "train", args.no_progress or dp.rank > 0)
    for step in bar:
        i = rng.integers(0, ntrain, args.batch_size)
        opt.zero_grad()
        for (ab, ub), sync in dp.micro_batches(model, a[i], u[i]):
            with sync:
                pred = model(s.tensor(ab.reshape(-1, grid, 1)))
                loss = nn.functional.mse_loss(pred, s.tensor(ub.reshape(-1, grid, 1)))
                dp.backward(loss)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            loss_v = loss.item()
            bar.set_postfix(mse=f"{loss_v:.5f}")
        s.step()
    tl.synchronize()
    dt = time.perf_counter() - t0
    with tl.no_grad():
        pred = model(s.tensor(a[ntrain:].reshape(-1, grid, 1))).numpy().reshape(-1, grid)
    s.step()
    test = float(np.mean((pred - u[ntrain:]) ** 2))
    if args.save and dp.rank == 0:
        getattr(model, "module", model).save(args.save)
    summary("fno_burgers", tl, steps=args.steps, train_mse=loss_v, test_mse=test, time_s=dt)


if __name__ == "__main__":
    main()
