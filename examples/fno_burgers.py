"""FNO1d on viscous Burgers' equation data from a NumPy pseudo-spectral solver (RK4 in time).
Lift (1 -> width) -> [SpectralConv1d + pointwise skip, ReLU] -> projection (width -> 1), MSE."""
from __future__ import annotations

import numpy as np

from _common import parser, setup, progress


def burgers(n_samples, grid=32, nu=0.05, t_end=0.5, dt=1e-3, seed=0):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 2 * np.pi, grid, endpoint=False)
    k = np.fft.rfftfreq(grid, 1.0 / grid)
    u0 = np.zeros((n_samples, grid))
    for m in range(1, 4):
        u0 += rng.standard_normal((n_samples, 1)) * np.sin(m * x) / m
        u0 += rng.standard_normal((n_samples, 1)) * np.cos(m * x) / m

    def rhs(u):
        uh = np.fft.rfft(u, axis=1)
        ux = np.fft.irfft(1j * k * uh, n=grid, axis=1)
        uxx = np.fft.irfft(-(k ** 2) * uh, n=grid, axis=1)
        return -u * ux + nu * uxx

    u = u0.copy()
    for _ in range(int(t_end / dt)):
        k1 = rhs(u); k2 = rhs(u + dt / 2 * k1); k3 = rhs(u + dt / 2 * k2); k4 = rhs(u + dt * k3)
        u = u + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return u0.astype(np.float32), u.astype(np.float32)


def main(argv=None):
    args = parser(__doc__, steps=300).parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session

    grid, width, modes = 32, 8, 8
    a, u = burgers(160, grid)
    lift, spec, skip, proj = (nn.Linear(1, width), nn.SpectralConv1d(width, modes),
                              nn.Linear(width, width), nn.Linear(width, 1))
    params = [p for m in (lift, spec, skip, proj) for p in m.parameters()]
    opt = optim.Adam(params, lr=3e-3)
    s = Session()

    def model(xs):
        h = lift(s.tensor(xs.reshape(grid, 1)))
        h = (spec(h) + skip(h)).relu()
        return proj(h)

    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    for step in progress(args.steps, "train"):
        i = int(rng.integers(0, 128))
        loss = nn.functional.mse_loss(model(a[i]), s.tensor(u[i].reshape(grid, 1)))
        opt.zero_grad(); loss.backward(); opt.step()
        loss_v = loss.item() if step == args.steps - 1 else loss_v
        s.step()
    with tl.no_grad():
        test = float(np.mean([np.mean((model(a[i]).numpy().ravel() - u[i]) ** 2)
                              for i in range(128, 160)]))
    s.step()
    print(f"summary: example=fno_burgers backend={tl.backend()} steps={args.steps} "
          f"train_mse={loss_v:.5f} test_mse={test:.5f}")


if __name__ == "__main__":
    main()
