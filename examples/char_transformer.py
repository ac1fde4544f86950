"""Character-level transformer LM on standard-library docstrings (collected offline with inspect):
Embedding + learned positions -> [LayerNorm -> MultiHeadAttention (causal mask) + residual ->
LayerNorm -> MLP (GELU) + residual] -> Linear to the vocabulary, cross-entropy on the next
character, AdamW."""
from __future__ import annotations

import inspect
import time

import numpy as np

from _common import DataParallel, graph_option, graph_step_or_none, parser, setup, progress, summary


def corpus(limit=200_000) -> str:
    import collections, json, os, re, string, textwrap, argparse, inspect as ins
    parts = []
    for mod in (collections, json, os, re, string, textwrap, argparse, ins):
        for _, obj in ins.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc:
                parts.append(doc)
    return "\n".join(parts)[:limit]


def load_data():
    """(data, chars): the corpus as integer codes and the sorted vocabulary."""
    text = corpus()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return np.array([stoi[c] for c in text], dtype=np.int64), chars


def build_model(vocab: int, T: int = 32, d: int = 32, heads: int = 2):
    """A one-block pre-norm transformer; forward(idx, session) takes (T,) or (B, T) codes and
    returns logits with the vocabulary on the last axis."""
    from torchlean import nn
    from torchlean.nn import fused   # gelu(ff1(x)) and ff2(.) + h as single ops

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.T = T
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Parameter(nn.init.normal((T, d), 0.0, 0.02), name="pos")
            self.ln1, self.att, self.ln2 = nn.LayerNorm(d), nn.MultiHeadAttention(d, heads), \
                nn.LayerNorm(d)
            self.ff1, self.ff2, self.head = nn.Linear(d, 4 * d), nn.Linear(4 * d, d), \
                nn.Linear(d, vocab)
            self.mask = np.tril(np.ones((T, T), dtype=bool))

        def forward(self, idx, session):
            h = self.emb(idx, session=session) + session.use(self.pos)
            h = h + self.att(self.ln1(h), mask=self.mask)
            h = fused.linear_residual(self.ff2, fused.linear_gelu(self.ff1, self.ln2(h)), h)
            return self.head(h)

    return CharTransformer()


def batch(data, rng, B, T):
    """B random windows: inputs (B, T) and next-character targets (B, T)."""
    starts = rng.integers(0, len(data) - T - 1, B)
    x = np.stack([data[i:i + T] for i in starts])
    y = np.stack([data[i + 1:i + T + 1] for i in starts])
    return x, y


def main(argv=None):
    p = parser(__doc__, steps=300)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=4)
    graph_option(p)
    args = p.parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session, default_session

    data, chars = load_data()
    V, T = len(chars), 32
    dp = DataParallel(args)
    model = dp.wrap(build_model(V, T))
    opt = optim.AdamW(model.parameters(), lr=args.lr)
    s = Session()

    def train_step(xb, yb):        # --graph: captured once, then replayed
        opt.zero_grad()
        logits = model(xb, default_session())
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), yb.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    graphed = graph_step_or_none(args, dp, train_step)
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    t0 = time.perf_counter()
    bar = progress(args.steps, "train", args.no_progress or dp.rank > 0)
    for step in bar:
        x, y = batch(data, rng, args.batch_size, T)
        if graphed:
            loss = graphed(x, y)
        else:
            opt.zero_grad()
            for (xb, yb), sync in dp.micro_batches(model, x, y):
                with sync:
                    logits = model(xb, s)
                    loss = nn.functional.cross_entropy(logits.reshape(-1, V), yb.reshape(-1))
                    dp.backward(loss)
            opt.step()
        if step % 50 == 0 or step == args.steps - 1:
            loss_v = loss.item()
            bar.set_postfix(loss=f"{loss_v:.4f}")
        s.step()
    tl.synchronize()
    dt = time.perf_counter() - t0
    if args.save and dp.rank == 0:
        getattr(model, "module", model).save(args.save)
    summary("char_transformer", tl, steps=args.steps, loss=loss_v, vocab=V, time_s=dt)


if __name__ == "__main__":
    main()
