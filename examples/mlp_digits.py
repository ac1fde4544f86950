"""MLP 64 -> 128 -> 10 on scikit-learn's digits with SGD + momentum."""
from __future__ import annotations

import numpy as np

from _common import parser, setup, progress


def main(argv=None):
    args = parser(__doc__, steps=500).parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session
    from sklearn.datasets import load_digits

    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(X))
    X, y = X[perm], y[perm]
    ntr = int(0.8 * len(X))
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    s = Session()
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    for step in progress(args.steps, "train"):
        idx = rng.integers(0, ntr, 64)
        loss = nn.functional.cross_entropy(model(s.tensor(X[idx])), y[idx])
        opt.zero_grad(); loss.backward(); opt.step()
        if step == args.steps - 1:
            loss_v = loss.item()
        s.step()
    with tl.no_grad():
        acc = float((model(s.tensor(X[ntr:])).numpy().argmax(1) == y[ntr:]).mean())
    s.step()
    if args.save:
        model.save(args.save)
    print(f"summary: example=mlp_digits backend={tl.backend()} steps={args.steps} "
          f"loss={loss_v:.4f} test_acc={acc:.4f}")


if __name__ == "__main__":
    main()
