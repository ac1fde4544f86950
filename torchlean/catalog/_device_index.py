"""Integer tensors that stay on the device: an index as a float32 whole-number Tensor of a session
(uploaded once per IntTensor, or never when a device op made it), a tape result as an IntTensor
that is read back only when the host asks, and the range check that needs no read-back when the
producer knew the range."""
from __future__ import annotations

from torchlean import _capture
from torchlean.buffer import AnyBuffer
from torchlean.int_tensor import IntTensor
from torchlean.tape import no_grad


def index_tensor(s, index):
    """index (an IntTensor) as a no-grad Tensor of session s holding its values as float32 whole
    numbers, or None when it cannot be one (not an IntTensor, a bool tensor, |value| > 2^24,
    a graph capture)."""
    if not isinstance(index, IntTensor) or index.dtype.name == "bool":
        return None
    buf = index.device_values()
    return None if buf is None else s.borrow(buf)


def check_range(index, n, op, d, shape):
    """IndexError naming op when an entry of index is outside [0, n) (read from the bounds the
    IntTensor knows, else computed once)."""
    lo, hi = index.within()
    if index.numel() and (lo < 0 or hi >= n):
        lo, hi = index.bounds()
        bad = lo if lo < 0 else hi
        if lo < 0 or hi >= n:
            raise IndexError(f"{op}: index {bad} is out of bounds for dimension {d} with size "
                             f"{n} (shape {tuple(shape)})")


def int_result(t, bounds=None, within=None):
    """A Tape Tensor of float32 whole numbers as an int64 IntTensor on the device (a copy no
    tape owns, so it outlives the step), or None during a graph capture."""
    if _capture.STATE.active:
        return None
    with no_grad():
        buf = t.value.copy()
    return IntTensor.on_device(buf, bounds, within)


def reshaped(buf, shape):
    """An AnyBuffer with buf's payload seen as `shape` (the payload stays buf's)."""
    return AnyBuffer(shape, buf.buf, owns=False)
