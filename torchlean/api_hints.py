"""The message of an AttributeError on a Tensor: point a PyTorch or NumPy habit, or a registry
name, at the PyTorch-style method torchlean offers."""
from __future__ import annotations

import difflib

# names people type (registry names, NumPy spellings, torch names with a different home here)
HINTS = {
    "reduce_max": "x.amax(dim=...)",
    "reduce_sum": "x.sum(dim=...)",
    "reduce_mean": "x.mean(dim=...)",
    "swap_last2": "x.mT / x.transpose(-2, -1)",
    "transpose2d": "x.T",
    "swap_adjacent": "x.transpose(d, d + 1)",
    "permute3d_bca": "x.permute(1, 2, 0)",
    "permute3d_cab": "x.permute(2, 0, 1)",
    "concat0": "torchlean.cat([a, b], dim=0)",
    "concat1d": "torchlean.cat([a, b])",
    "slice_range0": "x[start:stop]",
    "slice1d": "x[start:stop]",
    "gather_vec": "x[indices]",
    "broadcast_to": "x.expand(*sizes)",
    "concatenate": "torchlean.cat(tensors, dim)",
    "astype": "x.to(dtype), x.long() or x.float() (float32, int64 and bool tensors)",
    "double": "x.float(): torchlean tensors are float32 (int64 and bool: IntTensor)",
    "square_": "x.square()",
}


def unknown_attribute(name: str, public_names) -> str:
    """'Tensor has no attribute n; use ...' (a hint, else difflib's closest public names)."""
    head = f"'Tensor' object has no attribute {name!r}"
    if name in HINTS:
        return f"{head}; use {HINTS[name]}"
    names = sorted(set(public_names))
    close = difflib.get_close_matches(name, names + list(HINTS), n=3, cutoff=0.6)
    if not close:
        return head
    hints = [f"x.{c}" if c in names else HINTS[c] for c in close]
    return f"{head}; did you mean {' or '.join(dict.fromkeys(hints))}?"


class UnknownAttributeError(AttributeError):
    """AttributeError whose hint is worked out only when its message is read: hasattr() and
    getattr(x, name, default) catch it unread, so probing a Tensor for a missing attribute
    costs what it costs on a torch tensor (the hint's difflib search over dir() took 1.4 ms)."""

    def __init__(self, name: str, public_names):
        super().__init__(name, name=name)
        self._public_names = public_names          # a callable: the names, computed on demand

    def __str__(self):
        return unknown_attribute(self.name, self._public_names())

    def __reduce__(self):
        # copied or pickled (a worker process reporting it): a plain AttributeError with the
        # message, since the name list is a closure over this process's Tensor class
        return AttributeError, (str(self),)
