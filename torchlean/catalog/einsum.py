"""torch.einsum: each operand's repeated labels become a diagonal (one gather), labels no other
operand or the output needs are summed, then operands are contracted left to right, each pair
as one batched matmul of (batch, left-only, shared) by (batch, shared, right-only) axes."""
from __future__ import annotations

import math
import string

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c

EXPORTS = {"torch": ("einsum",)}

_LETTERS = string.ascii_letters


def _parse(equation, shapes):
    """([labels per operand], output labels), every ellipsis expanded to private labels."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: equation {equation!r} names {len(terms)} operands, "
                         f"got {len(shapes)}")
    n_ell = 0
    for t, s in zip(terms, shapes):
        if t.count("...") > 1 or any(ch not in _LETTERS for ch in t.replace("...", "")):
            raise ValueError(f"einsum: invalid subscripts {t!r} in {equation!r}")
        named = len(t.replace("...", ""))
        if ("..." in t and named > len(s)) or ("..." not in t and named != len(s)):
            raise ValueError(f"einsum: subscripts {t!r} do not match an operand of shape "
                             f"{tuple(s)}")
        if "..." in t:
            n_ell = max(n_ell, len(s) - named)
    ell = [chr(0x100 + i) for i in range(n_ell)]
    labels = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            k = len(s) - len(t.replace("...", ""))
            a, _, b = t.partition("...")
            labels.append(list(a) + ell[n_ell - k:] + list(b))
        else:
            labels.append(list(t))
    if arrow:
        if out.count("...") > 1 or any(ch not in _LETTERS for ch in out.replace("...", "")):
            raise ValueError(f"einsum: invalid output subscripts {out!r}")
        a, _, b = out.partition("...")
        out_labels = list(a) + (ell if "..." in out else []) + list(b)
        seen = set().union(*labels) if labels else set()
        bad = [ch for ch in out_labels if ch not in seen]
        if bad or len(set(out_labels)) != len(out_labels):
            raise ValueError(f"einsum: output subscripts {out!r} must name each input label "
                             "at most once")
    else:
        counts = {}
        for ls in labels:
            for ch in ls:
                counts[ch] = counts.get(ch, 0) + 1
        out_labels = ell + sorted(ch for ch, k in counts.items() if k == 1 and ch not in ell)
    return labels, out_labels


def _diagonal(x, labels):
    """x with each repeated label's axes reduced to their diagonal, labels made unique."""
    uniq = list(dict.fromkeys(labels))
    if len(uniq) == len(labels):
        return x, labels
    if any(x.shape[i] != x.shape[labels.index(ch)] for i, ch in enumerate(labels)):
        raise RuntimeError(f"einsum: a repeated label spans axes of different sizes in shape "
                           f"{tuple(x.shape)}")
    letters = {ch: _LETTERS[i] for i, ch in enumerate(uniq)}
    spec = "".join(letters[ch] for ch in labels) + "->" + "".join(letters[ch] for ch in uniq)
    return c.rearrange(x, np.einsum(spec, c.positions(tuple(x.shape)))), uniq


def _ordered(x, perm):
    """x with its axes in perm's order; x itself when they already are (no view to re-derive)."""
    return x.permute(perm) if x.ndim and perm != sorted(perm) else x


def _shaped(x, shape):
    """x reshaped to shape; x itself when it has that shape already."""
    return x if tuple(x.shape) == shape else x.reshape(shape)


def _contract(a, la, b, lb, needed):
    batch = [ch for ch in la if ch in lb and ch in needed]
    shared = [ch for ch in la if ch in lb and ch not in needed]
    left = [ch for ch in la if ch not in lb]
    right = [ch for ch in lb if ch not in la]
    size = {**dict(zip(la, a.shape)), **dict(zip(lb, b.shape))}
    nb, m, k, n = (math.prod(size[ch] for ch in g) for g in (batch, left, shared, right))
    am = _ordered(a, [la.index(ch) for ch in batch + left + shared])
    bm = _ordered(b, [lb.index(ch) for ch in batch + shared + right])
    y = composite.matmul(_shaped(am, (nb, m, k)), _shaped(bm, (nb, k, n)))
    return _shaped(y, tuple(size[ch] for ch in batch + left + right)), batch + left + right


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    xs = [c.tensor("einsum", x, "operands") for x in operands]
    if not xs:
        raise ValueError("einsum: expected at least one operand")
    labels, out = _parse(equation, [x.shape for x in xs])
    sizes = {}
    for x, ls in zip(xs, labels):
        for ch, n in zip(ls, x.shape):
            if sizes.get(ch, 1) != 1 and n != 1 and sizes[ch] != n:
                raise RuntimeError(f"einsum: label {ch!r} has sizes {sizes[ch]} and {n} in "
                                   f"{equation!r} (operand shapes "
                                   f"{[tuple(t.shape) for t in xs]})")
            sizes[ch] = max(sizes.get(ch, 1), n) if n != 0 else 0
    prepared = []
    for i, (x, ls) in enumerate(zip(xs, labels)):
        x, ls = _diagonal(x, ls)
        target = [sizes[ch] for ch in ls]
        if list(x.shape) != target:                    # size-1 axes broadcast
            x = c.expand(x, target)
        others = set(out).union(*[set(v) for j, v in enumerate(labels) if j != i])
        lonely = [d for d, ch in enumerate(ls) if ch not in others]
        if lonely:
            x = x.sum(lonely)
            ls = [ch for ch in ls if ch in others]
        prepared.append((x, ls))
    x, ls = prepared[0]
    for j in range(1, len(prepared)):
        needed = set(out).union(*[set(v) for _, v in prepared[j + 1:]])
        x, ls = _contract(x, ls, *prepared[j], needed)
    lonely = [d for d, ch in enumerate(ls) if ch not in out]     # one operand: sum to output
    if lonely:
        x = x.sum(lonely)
        ls = [ch for ch in ls if ch in out]
    perm = [ls.index(ch) for ch in out]
    return x.permute(perm) if len(perm) > 1 and perm != sorted(perm) else \
        (x.clone() if x is xs[0] else x)
