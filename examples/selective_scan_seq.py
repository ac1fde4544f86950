"""Selective-scan sequence model: h_t = a_t * h_{t-1} + b_t * x_t with input-dependent gates
a = sigmoid(x Wa), b = x Wb, then a linear readout; learns a running (decayed) sum target."""
from __future__ import annotations

import numpy as np

from _common import parser, setup, progress


def main(argv=None):
    args = parser(__doc__, steps=200).parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session

    T, D = 16, 4
    Wa, Wb, out = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, 1)
    params = [p for m in (Wa, Wb, out) for p in m.parameters()]
    opt = optim.Adam(params, lr=1e-2)
    s = Session()
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    for step in progress(args.steps, "train"):
        x = rng.standard_normal((T, D)).astype(np.float32)
        target = np.cumsum(x.sum(1)).reshape(T, 1).astype(np.float32) * 0.1
        xt = s.tensor(x)
        h = s.op("selective_scan", Wa(xt).sigmoid(), Wb(xt), xt, np.zeros(D, np.float32))
        loss = nn.functional.mse_loss(out(h), s.tensor(target))
        opt.zero_grad(); loss.backward(); opt.step()
        loss_v = loss.item() if step == args.steps - 1 else loss_v
        s.step()
    print(f"summary: example=selective_scan_seq backend={tl.backend()} steps={args.steps} "
          f"loss={loss_v:.5f}")


if __name__ == "__main__":
    main()
