"""torch.einsum: each operand's repeated labels become a diagonal (one gather), labels no other
operand or the output needs are summed, then operands are contracted left to right, each pair
as one batched matmul of (batch, left-only, shared) by (batch, shared, right-only) axes."""
from __future__ import annotations

import functools
import math
import string

import numpy as np

from torchlean import composite
from torchlean.catalog import _common as c

EXPORTS = {"torch": ("einsum",)}

_LETTERS = string.ascii_letters


@functools.lru_cache(maxsize=512)
def _parse(equation, shapes):
    """([labels per operand], output labels), every ellipsis expanded to private labels (kept
    per equation and operand shapes: a model calls einsum with the same ones every step)."""
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
            labels.append(tuple(a) + tuple(ell[n_ell - k:]) + tuple(b))
        else:
            labels.append(tuple(t))
    if arrow:
        if out.count("...") > 1 or any(ch not in _LETTERS for ch in out.replace("...", "")):
            raise ValueError(f"einsum: invalid output subscripts {out!r}")
        a, _, b = out.partition("...")
        out_labels = tuple(a) + (tuple(ell) if "..." in out else ()) + tuple(b)
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
        out_labels = tuple(ell) + tuple(sorted(ch for ch, k in counts.items()
                                               if k == 1 and ch not in ell))
    return tuple(labels), out_labels


def _diagonal_plan(shape, labels):
    """(gather positions or None, unique labels): each repeated label's axes reduced to their
    diagonal."""
    uniq = list(dict.fromkeys(labels))
    if len(uniq) == len(labels):
        return None, uniq
    if any(shape[i] != shape[labels.index(ch)] for i, ch in enumerate(labels)):
        raise RuntimeError(f"einsum: a repeated label spans axes of different sizes in shape "
                           f"{tuple(shape)}")
    letters = {ch: _LETTERS[i] for i, ch in enumerate(uniq)}
    spec = "".join(letters[ch] for ch in labels) + "->" + "".join(letters[ch] for ch in uniq)
    return np.einsum(spec, c.positions(tuple(shape))), uniq


def _reorder(perm, now, shape):
    """(permutation or None, target shape or None) that turn axes of shape `now` into `shape`."""
    return (None if perm == sorted(perm) else perm), (None if now == shape else shape)


def _contract_plan(la, lb, size, needed):
    """One pair as a batched matmul: (a's reorder, b's reorder, output shape or None, labels)."""
    batch = [ch for ch in la if ch in lb and ch in needed]
    shared = [ch for ch in la if ch in lb and ch not in needed]
    left = [ch for ch in la if ch not in lb]
    right = [ch for ch in lb if ch not in la]
    nb, m, k, n = (math.prod(size[ch] for ch in g) for g in (batch, left, shared, right))
    ga, gb, labels = batch + left + shared, batch + shared + right, batch + left + right
    ra = _reorder([la.index(ch) for ch in ga], tuple(size[ch] for ch in ga), (nb, m, k))
    rb = _reorder([lb.index(ch) for ch in gb], tuple(size[ch] for ch in gb), (nb, k, n))
    out = tuple(size[ch] for ch in labels)
    return ra, rb, (None if out == (nb, m, n) else out), labels


@functools.lru_cache(maxsize=512)
def _plan(equation, shapes):
    """What einsum does for these operand shapes, decided once (a model calls einsum with the
    same equation and shapes every step): per operand (diagonal positions, broadcast target,
    axes summed alone), the pairwise contractions, and the output's sum and permutation."""
    labels, out = _parse(equation, shapes)
    sizes = {}
    for shape, ls in zip(shapes, labels):
        for ch, n in zip(ls, shape):
            if sizes.get(ch, 1) != 1 and n != 1 and sizes[ch] != n:
                raise RuntimeError(f"einsum: label {ch!r} has sizes {sizes[ch]} and {n} in "
                                   f"{equation!r} (operand shapes {list(shapes)})")
            sizes[ch] = max(sizes.get(ch, 1), n) if n != 0 else 0
    operands, final = [], []
    for i, (shape, ls0) in enumerate(zip(shapes, labels)):
        diag, ls = _diagonal_plan(shape, ls0)
        now = [shape[ls0.index(ch)] for ch in ls]
        target = [sizes[ch] for ch in ls]
        others = set(out).union(*[set(v) for j, v in enumerate(labels) if j != i])
        lonely = [d for d, ch in enumerate(ls) if ch not in others]
        operands.append((diag, None if now == target else target, lonely or None))
        final.append([ch for ch in ls if ch in others])
    steps, ls = [], final[0]
    for j in range(1, len(final)):
        needed = set(out).union(*final[j + 1:])
        step = _contract_plan(ls, final[j], sizes, needed)
        steps.append(step)
        ls = step[3]
    lonely = [d for d, ch in enumerate(ls) if ch not in out]     # one operand: sum to output
    ls = [ch for ch in ls if ch in out]
    perm = [ls.index(ch) for ch in out]
    return operands, steps, lonely or None, (perm if len(perm) > 1 and perm != sorted(perm) else None)


def _apply(x, reorder):
    perm, shape = reorder
    if perm is not None:
        x = x.permute(perm)
    return x if shape is None else x.reshape(shape)


def einsum(equation, *operands):
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError(f"einsum: the equation must be a string, got {type(equation).__name__}")
    xs = [c.tensor("einsum", x, "operands") for x in operands]
    if not xs:
        raise ValueError("einsum: expected at least one operand")
    plan, steps, lonely, perm = _plan(equation, tuple(tuple(x.shape) for x in xs))
    prepared = []
    for x, (diag, target, alone) in zip(xs, plan):
        if diag is not None:
            x = c.rearrange(x, diag)
        if target is not None:                           # size-1 axes broadcast
            x = c.expand(x, target)
        prepared.append(x.sum(alone) if alone is not None else x)
    x = prepared[0]
    for b, (ra, rb, out, _) in zip(prepared[1:], steps):
        y = composite.session_op(_apply(x, ra), "bmm", _apply(b, rb))
        x = y if out is None else y.reshape(out)
    if lonely is not None:
        x = x.sum(lonely)
    if perm is not None:
        return x.permute(perm)
    return x.clone() if x is xs[0] else x
