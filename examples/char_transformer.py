"""Character-level transformer LM on standard-library docstrings (collected offline with inspect):
Embedding -> [LayerNorm -> MultiHeadAttention (causal mask) + residual -> LayerNorm -> MLP +
residual] -> Linear to the vocabulary, cross-entropy on the next character."""
from __future__ import annotations

import inspect

import numpy as np

from _common import parser, setup, progress


def corpus(limit=200_000) -> str:
    import collections, json, os, re, string, textwrap, argparse, inspect as ins
    parts = []
    for mod in (collections, json, os, re, string, textwrap, argparse, ins):
        for _, obj in ins.getmembers(mod):
            doc = inspect.getdoc(obj)
            if doc:
                parts.append(doc)
    return "\n".join(parts)[:limit]


def main(argv=None):
    args = parser(__doc__, steps=300).parse_args(argv)
    tl = setup(args)
    from torchlean import nn, optim
    from torchlean.session import Session

    text = corpus()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    V, T, D, H = len(chars), 32, 32, 2
    emb, pos = nn.Embedding(V, D), nn.Parameter(nn.init.normal((T, D), 0.0, 0.02))
    ln1, att, ln2 = nn.LayerNorm(D), nn.MultiHeadAttention(D, H), nn.LayerNorm(D)
    ff1, ff2, head = nn.Linear(D, 4 * D), nn.Linear(4 * D, D), nn.Linear(D, V)
    mods = [emb, ln1, att, ln2, ff1, ff2, head]
    params = [pos] + [p for m in mods for p in m.parameters()]
    opt = optim.AdamW(params, lr=3e-3)
    mask = np.tril(np.ones((T, T), dtype=bool))
    s = Session()
    rng = np.random.default_rng(args.seed)
    loss_v = float("nan")
    for step in progress(args.steps, "train"):
        i = int(rng.integers(0, len(data) - T - 1))
        x = s.op("gather_rows", emb.weight, indices=data[i:i + T])
        h = x + s.use(pos)
        h = h + att(ln1(h), mask=mask)
        h = h + ff2(ff1(ln2(h)).gelu())
        loss = nn.functional.cross_entropy(head(h), data[i + 1:i + T + 1])
        opt.zero_grad(); loss.backward(); opt.step()
        if step == args.steps - 1 or step % 50 == 0:
            loss_v = loss.item()
        s.step()
    print(f"summary: example=char_transformer backend={tl.backend()} steps={args.steps} "
          f"loss={loss_v:.4f} vocab={V}")


if __name__ == "__main__":
    main()
