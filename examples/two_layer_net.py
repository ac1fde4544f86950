"""PyTorch's two-layer-net tutorial ("Learning PyTorch with Examples", the nn-module version)
in torchlean: a random (N, D_in) -> (N, D_out) regression fitted by Linear-ReLU-Linear with a
summed MSE loss and plain SGD. The torch lines carry over one for one; what differs is that
data are NumPy arrays turned into Tensors of a Session, and each step's Session is closed
(`with`), which frees that step's memory."""
from __future__ import annotations

import time

import numpy as np

from _common import parser, setup, progress, summary

N, D_in, H, D_out = 64, 1000, 100, 10


def build_model():
    from torchlean import nn
    return nn.Sequential(nn.Linear(D_in, H), nn.ReLU(), nn.Linear(H, D_out))


def main(argv=None):
    p = parser(__doc__, steps=500)
    p.add_argument("--lr", type=float, default=1e-4)
    args = p.parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim

    rng = np.random.default_rng(args.seed)
    x = rng.standard_normal((N, D_in)).astype(np.float32)
    y = rng.standard_normal((N, D_out)).astype(np.float32)

    model = build_model()
    loss_fn = nn.MSELoss(reduction="sum")
    optimizer = optim.SGD(model.parameters(), lr=args.lr)

    first = last = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps, "train", args.no_progress)
    for t in bar:
        with tl.Session() as s:
            y_pred = model(s.tensor(x))
            loss = loss_fn(y_pred, s.tensor(y))
            if t == 0:
                first = loss.item()
            if t % 100 == 99 or t == args.steps - 1:
                last = loss.item()
                bar.set_postfix(loss=f"{last:.4g}")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    tl.synchronize()
    dt = time.perf_counter() - t0
    if args.save:
        model.save(args.save)
    summary("two_layer_net", tl, steps=args.steps, loss_initial=first, loss=last, time_s=dt)


if __name__ == "__main__":
    main()
