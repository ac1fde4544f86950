"""Argument checks torch makes before any work: integer sizes stay integers (a float size is a
TypeError, never truncated), probabilities lie in [0, 1]. Each error names the public op."""
from __future__ import annotations

import operator

import numpy as np

from torchlean import _capture


def int_arg(op: str, name: str, v) -> int:
    """v as an int; a float (1.5 or 2.0), bool, str or None raises TypeError as torch does."""
    if isinstance(v, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} should be of type int, got: bool")
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError(f"{op}: {name} should be of type int, got: {type(v).__name__} "
                        f"{v!r}") from None
    if not -(2 ** 63) <= n < 2 ** 63:
        raise ValueError(f"{op}: {name} = {n} does not fit int64")
    return n


UINT32_ELEMENTS = 2 ** 32 - 1     # the native ABI's element-count limit


def size_arg(op: str, name: str, v, minimum: int = 0) -> int:
    """A module's size argument (features, channels, embeddings): an int >= minimum that the
    native element limit can hold; TypeError for a float, ValueError for a bad value."""
    n = int_arg(op, name, v)
    if n < minimum:
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {n}")
    if n > UINT32_ELEMENTS:
        raise ValueError(f"{op}: {name} = {n} exceeds the uint32 element limit "
                         f"{UINT32_ELEMENTS}")
    return n


def check_numel(op: str, name: str, shape) -> tuple:
    """A parameter shape whose element count the native element limit can hold."""
    total = 1
    for n in shape:
        total *= int(n)
    if total > UINT32_ELEMENTS:
        raise ValueError(f"{op}: {name} of shape {tuple(shape)} has {total} elements, over "
                         f"the uint32 element limit {UINT32_ELEMENTS}")
    return tuple(shape)


def int_tuple(op: str, name: str, values) -> tuple:
    """A sequence of ints (pads, sizes); any float element raises TypeError naming where."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{op}: {name} must be a tuple of ints, got {type(values).__name__}")
    out = []
    for k, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: argument '{name}' must be tuple of ints, but found element "
                            f"of type {type(v).__name__} at pos {k}")
        out.append(int(v))
    return tuple(out)


def check_unit_interval(op: str, what: str, t) -> None:
    """torch's binary_cross_entropy check: every element of `t` (a Tensor) in [0, 1], NaN
    refused. Skipped while a CUDA graph is captured (no host read there)."""
    if _capture.STATE.active:
        return
    a = t.numpy()
    if a.size and not ((a >= 0) & (a <= 1)).all():
        raise RuntimeError(f"{op}: all elements of {what} should be between 0 and 1 (got "
                           f"values in [{np.nanmin(a) if not np.isnan(a).all() else 'nan'}, "
                           f"{np.nanmax(a) if not np.isnan(a).all() else 'nan'}]"
                           f"{', NaN' if np.isnan(a).any() else ''})")


def check_real_state(op: str, sd) -> None:
    """Every entry of a state_dict holds real numbers: torch refuses to copy a complex tensor
    into a float parameter (the cast would drop the imaginary part), so this raises TypeError
    before anything is loaded."""
    for key, value in sd.items():
        dt = getattr(value, "dtype", None)
        if isinstance(dt, np.dtype):
            complex_ = dt.kind == "c"
        elif dt is not None:                       # a torchlean or torch dtype
            complex_ = bool(getattr(dt, "is_complex", False))
        else:                                      # a number or a nested list
            complex_ = np.asarray(value).dtype.kind == "c"
        if complex_:
            raise TypeError(f"{op}: {key!r} holds complex values ({dt or type(value).__name__});"
                            " the parameter is float32 and a complex value cannot be cast to "
                            "it without dropping the imaginary part")
