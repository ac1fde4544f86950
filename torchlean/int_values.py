"""Values into int64, as torch converts them: floats truncate toward zero, and a value int64
cannot hold (NaN, inf, 1e20, uint64 >= 2**63, a Python int past 64 bits) raises
Int64OverflowError naming the op, never wraps to -9223372036854775808."""
from __future__ import annotations

import numpy as np

from torchlean.errors import Int64OverflowError

INT64_MIN = -(2 ** 63)
INT64_MAX = 2 ** 63 - 1


def overflow(op: str, value) -> Int64OverflowError:
    return Int64OverflowError(f"{op}: value {value!r} cannot be converted to type int64_t "
                              "without overflow")


def check_int(op: str, v) -> int:
    """A Python or NumPy integer operand that int64 must hold."""
    v = int(v)
    if not INT64_MIN <= v <= INT64_MAX:
        raise overflow(op, v)
    return v


def to_int64(op: str, value) -> np.ndarray:
    """value (a number, a nested list, an array; bool, integer or float) as an int64 array."""
    a = value if isinstance(value, np.ndarray) else np.asarray(value)
    kind = a.dtype.kind
    if kind in "bi":
        return a.astype(np.int64, copy=False)
    if kind == "u":
        if a.size and a.max() > INT64_MAX:
            raise overflow(op, int(a.max()))
        return a.astype(np.int64)
    if kind == "f":
        f = a.astype(np.float64, copy=False)
        bad = ~(np.isfinite(f) & (f >= -2.0 ** 63) & (f < 2.0 ** 63))
        if bad.any():
            raise overflow(op, float(f[bad].reshape(-1)[0]))
        return np.trunc(f).astype(np.int64)
    if kind == "O":        # Python ints past 64 bits (or mixed objects)
        flat = [v for v in a.reshape(-1)]
        for v in flat:
            if isinstance(v, (bool, int, np.integer)):
                check_int(op, v)
            elif isinstance(v, (float, np.floating)):
                to_int64(op, np.float64(v))
            else:
                raise TypeError(f"{op}: cannot convert {type(v).__name__} to int64")
        return np.array([int(v) for v in flat], dtype=np.int64).reshape(a.shape)
    raise TypeError(f"{op}: cannot convert values of dtype {a.dtype} to int64"
                    + (" (torch refuses to drop an imaginary part too)" if kind == "c" else ""))


def to_bool(op: str, value) -> np.ndarray:
    """value as a bool array (nonzero is True, NaN too, as torch)."""
    a = np.asarray(value)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{op}: cannot convert values of dtype {a.dtype} to bool")
    return a != 0
