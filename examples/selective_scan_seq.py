"""Selective-scan sequence model: h_t = a_t * h_{t-1} + b_t * x_t with input-dependent gates
a = sigmoid(x Wa), b = x Wb, then a linear readout; learns a running (decayed) sum target."""
from __future__ import annotations

import time

import numpy as np

from _common import DataParallel, parser, setup, progress, summary


def build_model(d: int = 4):
    """forward(x, session): x (T, d) -> (T, 1)."""
    from torchlean import nn

    class ScanModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.d = d
            self.Wa, self.Wb, self.out = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, 1)

        def forward(self, x):
            s = x.session
            h = s.op("selective_scan", self.Wa(x).sigmoid(), self.Wb(x), x,
                     np.zeros(self.d, np.float32))
            return self.out(h)

    return ScanModel()


def main(argv=None):
    p = parser(__doc__, steps=200)
    p.add_argument("--lr", type=float, default=1e-2)
    args = p.parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session

    T, D = 16, 4
    dp = DataParallel(args)
    model = dp.wrap(build_model(D))
    opt = optim.Adam(model.parameters(), lr=args.lr)
    s = Session()
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps, "train", args.no_progress or dp.rank > 0)
    for step in bar:
        # one sequence per micro-batch: a global batch of W * K sequences
        xs = [rng.standard_normal((T, D)).astype(np.float32) for _ in range(dp.world * dp.k)]
        opt.zero_grad()
        for (x,), sync in dp.micro_batches(model, np.stack(xs)):
            x = x[0]
            target = np.cumsum(x.sum(1)).reshape(T, 1).astype(np.float32) * 0.1
            with sync:
                loss = nn.functional.mse_loss(model(s.tensor(x)), s.tensor(target))
                dp.backward(loss)
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            loss_v = loss.item()
            bar.set_postfix(loss=f"{loss_v:.5f}")
        s.step()
    tl.synchronize()
    dt = time.perf_counter() - t0
    if args.save and dp.rank == 0:
        getattr(model, "module", model).save(args.save)
    summary("selective_scan_seq", tl, steps=args.steps, loss=loss_v, time_s=dt)


if __name__ == "__main__":
    main()
