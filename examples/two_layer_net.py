"""PyTorch's two-layer-net tutorial ("Learning PyTorch with Examples", the nn-module version)
in torchlean: a random (N, D_in) -> (N, D_out) regression fitted by Linear-ReLU-Linear with a
summed MSE loss and plain SGD. The torch lines carry over one for one; what differs is that
data are NumPy arrays turned into Tensors of a Session, and each step's Session is closed
(`with`), which frees that step's memory."""
from __future__ import annotations

import time

import numpy as np

from _common import DataParallel, parser, setup, progress, summary

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

    dp = DataParallel(args)          # --accumulate K, and mpirun -n W: data parallel
    model = dp.wrap(build_model())
    loss_fn = nn.MSELoss(reduction="sum")
    optimizer = optim.SGD(model.parameters(), lr=args.lr)

    first = last = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps, "train", args.no_progress or dp.rank > 0)
    for t in bar:
        with tl.Session() as s:
            optimizer.zero_grad()
            for (xb, yb), sync in dp.micro_batches(model, x, y):
                with sync:
                    loss = loss_fn(model(s.tensor(xb)), s.tensor(yb))
                    dp.backward(loss)
            if t == 0:
                first = loss.item()
            if t % 100 == 99 or t == args.steps - 1:
                last = loss.item()
                bar.set_postfix(loss=f"{last:.4g}")
            optimizer.step()
    tl.synchronize()
    dt = time.perf_counter() - t0
    if args.save and dp.rank == 0:
        getattr(model, "module", model).save(args.save)
    summary("two_layer_net", tl, steps=args.steps, loss_initial=first, loss=last, time_s=dt)


if __name__ == "__main__":
    main()
