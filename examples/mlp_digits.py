"""MLP 64 -> 128 -> 10 on scikit-learn's 8x8 digits with SGD + momentum, cross-entropy."""
from __future__ import annotations

import time

import numpy as np

from _common import DataParallel, graph_option, graph_step_or_none, parser, setup, progress, summary


def load_data(seed: int = 0):
    """(Xtr, ytr, Xte, yte): flattened images scaled to [0, 1] as (N, 64), an 80/20 split."""
    from sklearn.datasets import load_digits
    d = load_digits()
    X = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(seed).permutation(len(X))
    X, y = X[perm], y[perm]
    ntr = int(0.8 * len(X))
    return X[:ntr], y[:ntr], X[ntr:], y[ntr:]


def build_model(hidden: int = 128):
    from torchlean import nn
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def main(argv=None):
    p = parser(__doc__, steps=500)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    graph_option(p)
    args = p.parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session

    Xtr, ytr, Xte, yte = load_data()
    dp = DataParallel(args)
    model = dp.wrap(build_model(args.hidden))
    opt = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    s = Session()

    def train_step(xb, yb):        # --graph: captured once, then replayed
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    graphed = graph_step_or_none(args, dp, train_step)
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps, "train", args.no_progress or dp.rank > 0)
    for step in bar:
        idx = rng.integers(0, len(Xtr), args.batch_size)
        if graphed:
            loss = graphed(Xtr[idx], ytr[idx])
        else:
            opt.zero_grad()
            for (xb, yb), sync in dp.micro_batches(model, Xtr[idx], ytr[idx]):
                with sync:
                    loss = nn.functional.cross_entropy(model(s.tensor(xb)), yb)
                    dp.backward(loss)
            opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            loss_v = loss.item()
            bar.set_postfix(loss=f"{loss_v:.4f}")
        s.step()
    tl.synchronize()
    dt = time.perf_counter() - t0
    with tl.no_grad():
        acc = float((model(s.tensor(Xte)).numpy().argmax(1) == yte).mean())
    s.step()
    if args.save and dp.rank == 0:
        getattr(model, "module", model).save(args.save)
    summary("mlp_digits", tl, steps=args.steps, loss=loss_v, test_acc=acc, time_s=dt)


if __name__ == "__main__":
    main()
