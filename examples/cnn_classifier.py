"""A CNN classifier on scikit-learn's 8x8 digits (bundled, no download), written as a PyTorch
training script: an nn.Module of conv-BatchNorm-ReLU blocks with dropout and a linear head,
SGD with Nesterov momentum and weight decay under a OneCycleLR schedule, gradient-norm
clipping, a shuffling DataLoader, evaluation under no_grad, and training checkpoints (model,
optimizer, scheduler and RNG state) that `--resume` continues bit-exactly.

Target: at least 97% test accuracy with the defaults (400 steps of batch 64, about 18 epochs)."""
from __future__ import annotations

import itertools
import os
import pickle
import time

import numpy as np

from _common import DataParallel, parser, setup, progress, summary
from digits_cnn import load_data

TARGET_ACC = 0.97


def build_model(width: int = 16, dropout: float = 0.1):
    """(N, 1, 8, 8) images -> (N, 10) logits."""
    from torchlean import nn

    class DigitsCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
                nn.MaxPool2d(2),                                            # 8x8 -> 4x4
                nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
                nn.MaxPool2d(2))                                            # 4x4 -> 2x2
            self.classifier = nn.Sequential(nn.Flatten(), nn.Dropout(dropout),
                                            nn.Linear(2 * width * 2 * 2, 10))

        def forward(self, x):
            return self.classifier(self.features(x))

    return DigitsCNN()


def train_batches(dataset, batch_size: int, seed: int, start_step: int):
    """Endless training batches from step `start_step` on. Each epoch's shuffle is seeded by
    (seed, epoch), so a resumed run rebuilds the interrupted epoch's order and skips the
    batches already seen: the data order needs no saved state."""
    from torchlean.data import DataLoader
    steps_per_epoch = len(DataLoader(dataset, batch_size, drop_last=True))
    epoch, skip = divmod(start_step, steps_per_epoch)
    while True:
        loader = DataLoader(dataset, batch_size, shuffle=True, drop_last=True,
                            seed=(seed, epoch))
        yield from itertools.islice(loader, skip, None)
        epoch, skip = epoch + 1, 0


def save_checkpoint(path: str, tl, model, optimizer, scheduler, step: int) -> None:
    """Everything the next step depends on, written atomically (torch.save's usual dict): a
    temporary file, fsync, rename."""
    from torchlean.nn.checkpoint import write_atomic
    state = {"step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "rng_state": tl.get_rng_state()}
    write_atomic(path, pickle.dumps(state))


def load_checkpoint(path: str, tl, model, optimizer, scheduler, total_steps: int) -> int:
    """Restore a checkpoint written by save_checkpoint; returns the step it was taken at.
    A pickle, as torch.save writes: load only checkpoints you wrote yourself."""
    with open(path, "rb") as f:
        state = pickle.load(f)
    if state["scheduler"]["total_steps"] != total_steps:
        raise SystemExit(f"--resume {path}: the checkpoint's schedule runs "
                         f"{state['scheduler']['total_steps']} steps, --steps is {total_steps}")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    tl.set_rng_state(state["rng_state"])
    return int(state["step"])


def evaluate(tl, model, X, y, batch_size: int = 256):
    """(accuracy, mean cross-entropy) of the model in eval mode, no gradients recorded."""
    from torchlean import nn
    from torchlean.data import DataLoader
    model.eval()
    correct, loss_sum = 0, 0.0
    with tl.no_grad():
        for xb, yb in DataLoader((X, y), batch_size):
            with tl.Session() as s:
                logits = model(s.tensor(xb))
                loss_sum += nn.functional.cross_entropy(logits, yb).item() * len(yb)
                correct += int((logits.numpy().argmax(1) == yb).sum())
    model.train()
    return correct / len(y), loss_sum / len(y)


def main(argv=None):
    p = parser(__doc__, steps=400)
    p.add_argument("--lr", type=float, default=0.2, help="OneCycleLR's max_lr")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--width", type=int, default=16, help="channels of the first conv")
    p.add_argument("--clip", type=float, default=2.0, help="max gradient norm")
    p.add_argument("--checkpoint-dir", default=None,
                   help="write training checkpoints here (step_N.ckpt)")
    p.add_argument("--checkpoint-every", type=int, default=0, metavar="K",
                   help="checkpoint every K steps (0: only at the end)")
    p.add_argument("--resume", default=None, metavar="CKPT",
                   help="continue from a checkpoint of a run with the same --steps")
    args = p.parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.data import TensorDataset
    from torchlean.optim import lr_scheduler

    Xtr, ytr, Xte, yte = load_data()
    dp = DataParallel(args)          # --accumulate K, and mpirun -n W: data parallel
    net = build_model(args.width)
    model = dp.wrap(net)
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    scheduler = lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr, total_steps=args.steps)
    start = 0
    if args.resume:
        start = load_checkpoint(args.resume, tl, net, optimizer, scheduler, args.steps)
        dp.step = start                  # micro-batch draws are keyed by the step
    if args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    batches = train_batches(TensorDataset(Xtr, ytr), args.batch_size, args.seed, start)

    loss_v = grad_norm = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps - start, "train", args.no_progress or dp.rank > 0)
    for i in bar:
        step = start + i + 1                      # the number of optimizer steps taken after
        xb, yb = next(batches)
        with tl.Session() as s:
            optimizer.zero_grad()
            for (xm, ym), sync in dp.micro_batches(model, xb, yb):
                with sync:
                    loss = criterion(model(s.tensor(xm)), ym)
                    dp.backward(loss)
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            scheduler.step()
            if step % 25 == 0 or step == args.steps:
                loss_v = loss.item()
                bar.set_postfix(loss=f"{loss_v:.4f}", lr=f"{scheduler.get_last_lr()[0]:.3g}")
        if args.checkpoint_dir and dp.rank == 0 and (step == args.steps or (
                args.checkpoint_every and step % args.checkpoint_every == 0)):
            save_checkpoint(os.path.join(args.checkpoint_dir, f"step_{step}.ckpt"), tl, net,
                            optimizer, scheduler, step)
    tl.synchronize()
    dt = time.perf_counter() - t0

    acc, test_loss = evaluate(tl, net, Xte, yte)
    print(f"test accuracy: {acc * 100:.2f}% (target {TARGET_ACC * 100:.0f}%), "
          f"test loss {test_loss:.4f}, {dt:.1f} s for {args.steps - start} steps")
    if args.save and dp.rank == 0:
        net.save(args.save)
    summary("cnn_classifier", tl, steps=args.steps, start_step=start, loss=loss_v,
            grad_norm=grad_norm, test_acc=acc, test_loss=test_loss, target_acc=TARGET_ACC,
            time_s=dt)


if __name__ == "__main__":
    main()
