"""Small CNN on scikit-learn's 8x8 digits (no download): conv3x3(16) -> ReLU -> maxpool2 ->
conv3x3(32) -> ReLU -> maxpool2 -> Linear(128->10), Adam, cross-entropy. `make demo` runs it."""
from __future__ import annotations

import time

import numpy as np

from _common import parser, setup, progress


def main(argv=None):
    args = parser(__doc__, steps=600).parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session
    from sklearn.datasets import load_digits

    d = load_digits()
    X = (d.images / 16.0).astype(np.float32)[:, None]       # (N, 1, 8, 8)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(X))
    X, y = X[perm], y[perm]
    ntr = int(0.8 * len(X))
    Xtr, ytr, Xte, yte = X[:ntr], y[:ntr], X[ntr:], y[ntr:]

    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Linear(32 * 2 * 2, 10))
    opt = optim.Adam(model.parameters(), lr=3e-3)
    s = Session()
    batch = 64
    steps_per_epoch = max(1, ntr // batch)
    rng = np.random.default_rng(args.seed)
    print(f"backend: {tl.backend()}")
    t0 = time.perf_counter()
    loss_v = float("nan")
    order = rng.permutation(ntr)
    for step in progress(args.steps, "train"):
        k = step % steps_per_epoch
        if k == 0 and step:
            order = rng.permutation(ntr)
        idx = order[k * batch:(k + 1) * batch]
        loss = nn.functional.cross_entropy(model(s.tensor(Xtr[idx])), ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            loss_v = loss.item()
        s.step()
    dt = time.perf_counter() - t0
    epochs = max(args.steps / steps_per_epoch, 1e-9)
    model.eval()
    with tl.no_grad():
        logits = model(s.tensor(Xte)).numpy()
    s.step()
    acc = float((logits.argmax(1) == yte).mean())
    print(f"time per epoch: {dt / epochs:.3f} s")
    print(f"test accuracy: {acc * 100:.2f}%")
    if args.save:
        model.save(args.save)
    print(f"summary: example=digits_cnn backend={tl.backend()} steps={args.steps} "
          f"loss={loss_v:.4f} test_acc={acc:.4f}")


if __name__ == "__main__":
    main()
