"""torch's tensor factories: tensor, zeros, ones, full, empty, arange, linspace, eye, rand,
randn, randint and the *_like forms, with torch's signatures (sizes as varargs or one
sequence, dtype=, device=, requires_grad=).

Float results are Tensors of the default session (the innermost `with Session()`), made by
the native kernels; int64 and bool results are IntTensors on the host. Random draws take one
key each from torchlean.manual_seed's stream: rand and randn run the counter-based kernels
(rand_uniform, rand_normal), which give the same bits on the stub and CUDA in every mode,
and randint is computed on the host from the same SplitMix64 draws.
"""
from __future__ import annotations

import math
import operator

import numpy as np

from torchlean import random as _random
from torchlean._generated import ops as _ops
from torchlean.buffer import AnyBuffer, check_count
from torchlean.devices import parse_to
from torchlean.dtypes import bool_, dtype_of, float32, int64
from torchlean.int_tensor import IntTensor
from torchlean.session import Parameter, Tensor, default_session


def _size(op: str, size) -> tuple:
    """torch's size arguments: f(2, 3), f((2, 3)), f([2, 3]) or f() (0-d)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for d in size:
        if isinstance(d, bool) or isinstance(d, (float, np.floating)):
            raise TypeError(f"{op}: sizes must be ints, got {size!r}")
        try:
            d = operator.index(d)
        except TypeError:
            raise TypeError(f"{op}: sizes must be ints, got {size!r}") from None
        if d < 0:
            raise ValueError(f"{op}: negative dimension {d} in size {tuple(size)}")
        out.append(d)
    check_count(op, out)
    return tuple(out)


def _dtype(op: str, dtype, device, default=float32):
    dt = parse_to(op, (), {"dtype": dtype, "device": device})
    return default if dt is None else dt


def _float(buf: AnyBuffer, requires_grad: bool) -> Tensor:
    requires_grad = _flag("tensor", requires_grad)
    s = default_session()
    s.check_thread()
    return Tensor(s, s._own_leaf(buf, requires_grad), s.gen)


def _flag(op: str, requires_grad) -> bool:
    """requires_grad must be a bool, as torch checks ('no' is not True)."""
    if not isinstance(requires_grad, (bool, np.bool_)):
        raise TypeError(f"{op}(): argument 'requires_grad' must be bool, not "
                        f"{type(requires_grad).__name__}")
    return bool(requires_grad)


def _no_grad_for_ints(op: str, dt, requires_grad: bool) -> None:
    if _flag(op, requires_grad) and dt is not float32:
        raise TypeError(f"{op}: only floating point tensors can require gradients, got "
                        f"dtype {dt}")


def _filled(op, size, value, dtype, device, requires_grad):
    shape = _size(op, size)
    dt = _dtype(op, dtype, device)
    _no_grad_for_ints(op, dt, requires_grad)
    if dt is not float32:
        return IntTensor(np.full(shape, _int_value(op, value, dt), dtype=dt.numpy))
    return _float(AnyBuffer.full(shape, float(value)), requires_grad)


_INT64_LO, _INT64_HI = -(1 << 63), 1 << 63


def _int_value(op: str, value, dt):
    """A scalar written into an int64 or bool tensor: bool as truth, numbers truncated toward
    zero; NaN, inf and values outside int64 raise torch's RuntimeError."""
    if dt is bool_:
        return bool(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not _INT64_LO <= math.trunc(value) < _INT64_HI:
            raise RuntimeError(f"{op}: value cannot be converted to type int64_t without "
                               f"overflow: {value!r}")
        return math.trunc(value)
    v = int(value)
    if not _INT64_LO <= v < _INT64_HI:
        raise RuntimeError(f"{op}: value cannot be converted to type int64_t without "
                           f"overflow: {value!r}")
    return v


def _int_array(op: str, a: np.ndarray, dt) -> np.ndarray:
    """a as an int64 or bool array: floats truncated toward zero; NaN, inf, values outside
    int64 and uint64 values >= 2**63 raise torch's RuntimeError instead of wrapping."""
    if dt is bool_:
        return a.astype(np.bool_)
    if a.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(a) | (a >= 2.0 ** 63) | (a < -2.0 ** 63)
        if bad.any():
            raise RuntimeError(f"{op}: value cannot be converted to type int64 without "
                               f"overflow: {a[bad].flat[0]!r}")
    elif a.dtype.kind == "u" and a.dtype.itemsize == 8 and (a >= np.uint64(1 << 63)).any():
        raise RuntimeError(f"{op}: value cannot be converted to type int64 without overflow: "
                           f"{int(a[a >= np.uint64(1 << 63)].flat[0])} (torchlean has no uint64)")
    return a.astype(dt.numpy)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled("zeros", size, 0, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled("ones", size, 1, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """torch.empty: torchlean fills it with zeros (no uninitialised memory is handed out)."""
    return _filled("empty", size, 0, dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """torch.full: the dtype follows fill_value (bool, int -> int64, float) unless given."""
    if dtype is None and not isinstance(fill_value, (float, np.floating)):
        if isinstance(fill_value, (bool, np.bool_)):
            dtype = bool_
        elif isinstance(fill_value, (int, np.integer)):
            dtype = int64
    if not isinstance(size, (tuple, list)):
        size = (size,)
    return _filled("full", (tuple(size),), fill_value, dtype, device, requires_grad)


def _like_shape(op, input):
    if not isinstance(input, (Tensor, IntTensor, Parameter)):
        raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
    return tuple(input.shape), (int64 if input.dtype == int64 else
                                bool_ if input.dtype == bool_ else float32)


def zeros_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dt = _like_shape("zeros_like", input)
    return zeros(shape, dtype=dtype or dt, device=device, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dt = _like_shape("ones_like", input)
    return ones(shape, dtype=dtype or dt, device=device, requires_grad=requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad=False):
    shape, dt = _like_shape("empty_like", input)
    return empty(shape, dtype=dtype or dt, device=device, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False):
    shape, dt = _like_shape("full_like", input)
    return full(shape, fill_value, dtype=dtype or dt, device=device, requires_grad=requires_grad)


# ------------------------------------------------------------------------------ random

def _float_only(op, dtype, device):
    dt = _dtype(op, dtype, device)
    if dt is not float32:
        raise TypeError(f"{op}: draws float32 values, got dtype {dt}")


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Uniform in [0, 1): u_i = (draw_i >> 8) * 2^-24 (the rand_uniform kernel), keyed by
    `generator` (a torchlean.Generator) or the process-wide stream."""
    _float_only("rand", dtype, device)
    _flag("rand", requires_grad)
    shape = _size("rand", size)
    b = _ops.rand_uniform(n=math.prod(shape), key=_random.device_key_for("rand", generator))
    return _float(AnyBuffer(shape, b.buf), requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Standard normal by Box-Muller on draws 2i, 2i+1 (the rand_normal kernel)."""
    _float_only("randn", dtype, device)
    _flag("randn", requires_grad)
    shape = _size("randn", size)
    b = _ops.rand_normal(n=math.prod(shape), key=_random.device_key_for("randn", generator),
                         mean=0.0, std=1.0)
    return _float(AnyBuffer(shape, b.buf), requires_grad)


def randint(*args, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    """torch.randint(high, size) or randint(low, high, size): int64 in [low, high).

    Element i is low + (draw_i * (high - low)) >> 32 for the 32-bit SplitMix64 draw of the
    key's element i, so it is a function of (seed, counter, i) only, on every backend."""
    if size is None and args and isinstance(args[-1], (tuple, list)):
        args, size = args[:-1], args[-1]
    if size is None or len(args) not in (1, 2):
        raise TypeError("randint: expected randint(high, size) or randint(low, high, size) "
                        f"with size a tuple, got args {args!r} and size {size!r}")
    low, high = (0, args[0]) if len(args) == 1 else args
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"randint: {name} must be an int, got {v!r}")
    low, high = int(low), int(high)
    if high <= low or high - low > 2**32:
        raise ValueError(f"randint: expected low < high with high - low <= 2**32, got "
                         f"low={low}, high={high}")
    dt = _dtype("randint", dtype, device, default=int64)
    _no_grad_for_ints("randint", dt, requires_grad)
    shape = _size("randint", (size,))
    d = _random._draws(_random.key_for("randint", generator), 0,
                       math.prod(shape)).astype(np.uint64)
    v = (d * np.uint64(high - low)) >> np.uint64(32)
    out = (v.astype(np.int64) + low).reshape(shape)
    if dt is float32:
        return _float(AnyBuffer.from_numpy(out.astype(np.float32)), requires_grad)
    return IntTensor(out)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    shape, _ = _like_shape("rand_like", input)
    return rand(shape, generator=generator, dtype=dtype, device=device,
                requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    shape, _ = _like_shape("randn_like", input)
    return randn(shape, generator=generator, dtype=dtype, device=device,
                 requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad=False):
    shape, dt = _like_shape("randint_like", input)
    if high is None:
        low, high = 0, low
    return randint(low, high, shape, generator=generator, dtype=dtype or dt, device=device,
                   requires_grad=requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A permutation of range(n), int64 unless dtype says otherwise: the stable argsort of n
    draws of one key (random.permutation)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    n = int(n)
    if n < 0:
        raise RuntimeError(f"randperm: Trying to create tensor with negative dimension {n}: "
                           f"[{n}]")
    dt = _dtype("randperm", dtype, device, default=int64)
    if dt is bool_:
        raise RuntimeError("randperm: \"randperm\" not implemented for 'Bool'")
    _no_grad_for_ints("randperm", dt, requires_grad)
    perm = _random.permutation(n, _random.key_for("randperm", generator))
    if dt is float32:
        return _float(AnyBuffer.from_numpy(perm.astype(np.float32)), requires_grad)
    return IntTensor(perm.astype(dt.numpy))


# ------------------------------------------------------------------------------ ranges

def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """torch.arange: int64 when start, end and step are all ints (and no dtype), else float32
    values start + i * step computed in float64."""
    if end is None:
        start, end = 0, start
    for name, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange: {name} must be a number, got {v!r}")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"arange: unsupported range: {start} -> {end}")
    if not math.isfinite(step):
        raise RuntimeError(f"arange: step must be finite but got {step}")
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError(f"arange: upper bound and lower bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    ints = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    dt = _dtype("arange", dtype, device, default=int64 if ints else float32)
    _flag("arange", requires_grad)
    n = (-((start - end) // step) if ints else math.ceil((end - start) / step))
    vals = start + np.arange(n, dtype=np.float64 if not ints else np.int64) * step
    if dt is not float32:
        _no_grad_for_ints("arange", dt, requires_grad)
        return IntTensor(vals.astype(dt.numpy))
    return _float(AnyBuffer.from_numpy(vals.astype(np.float64)), requires_grad)


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """steps values from start to end computed in float64; an integer dtype truncates each
    toward zero, as torch."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)):
        raise TypeError(f"linspace(): argument 'steps' must be int, not {type(steps).__name__}")
    steps = int(steps)
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got {steps}")
    dt = _dtype("linspace", dtype, device)
    vals = np.linspace(float(start), float(end), steps)
    if dt is not float32:
        _no_grad_for_ints("linspace", dt, requires_grad)
        return IntTensor(_int_array("linspace", vals, dt))
    return _float(AnyBuffer.from_numpy(vals), requires_grad)


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    shape = _size("eye", (n, n if m is None else m))
    dt = _dtype("eye", dtype, device)
    a = np.eye(*shape)
    if dt is not float32:
        _no_grad_for_ints("eye", dt, requires_grad)
        return IntTensor(a.astype(dt.numpy))
    return _float(AnyBuffer.from_numpy(a), requires_grad)


# ------------------------------------------------------------------------------ from data

def tensor(data, dtype=None, device=None, requires_grad=False, session=None):
    """torch.tensor: a copy of data with torch's dtype inference: integer data gives an int64
    IntTensor, booleans a bool IntTensor, anything else float32 (float64 rounds to nearest).
    session= (torchlean's) records a float result on that Session instead of the default."""
    dt = parse_to("tensor", (), {"dtype": dtype, "device": device})
    _flag("tensor", requires_grad)
    if isinstance(data, Tensor):
        a = data.numpy()
    elif isinstance(data, (IntTensor, Parameter)):
        a = np.asarray(data)
    else:
        a = _as_array(data)
        if a.dtype.kind not in "biuf":
            raise TypeError(f"tensor: expected numbers (a number, nested lists or an array of "
                            f"bool/int/float), got dtype {a.dtype}")
    if dt is None:
        dt = bool_ if a.dtype == np.bool_ else int64 if a.dtype.kind in "iu" else float32
    if dt is not float32:
        _no_grad_for_ints("tensor", dt, requires_grad)
        return IntTensor(_int_array("tensor", a, dt))
    s = session or default_session()
    return s.tensor(a, requires_grad=requires_grad)


def _as_array(data) -> np.ndarray:
    """np.asarray(data), except that Python ints outside int64 raise torch's ValueError instead
    of becoming uint64, float64 or object arrays."""
    if not isinstance(data, np.ndarray) and _has_huge_int(data):
        raise ValueError("tensor: Overflow when unpacking long long: an integer is outside "
                         "int64 [-2**63, 2**63)")
    return np.asarray(data)


def _has_huge_int(data) -> bool:
    if isinstance(data, (list, tuple)):
        return any(_has_huge_int(v) for v in data)
    return (isinstance(data, int) and not isinstance(data, bool)
            and not _INT64_LO <= data < _INT64_HI)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, (Tensor, IntTensor)) and dtype is None:
        return data
    return tensor(data, dtype=dtype, device=device)


def from_numpy(a, session=None, requires_grad=False):
    """torch.from_numpy: an int or bool array gives an IntTensor sharing the int64/bool memory
    (as torch shares it); a float array a float32 Tensor (a device copy)."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"from_numpy: expected a NumPy array, got {type(a).__name__}")
    if a.dtype.kind in "biu":
        if a.dtype.kind == "b" or a.dtype == np.int64:
            return IntTensor(a, shares=True)      # the caller's memory: no device copy kept
        return IntTensor(_int_array("from_numpy", a, int64))
    return tensor(a, dtype=float32, requires_grad=requires_grad, session=session)


def is_tensor(obj) -> bool:
    return isinstance(obj, (Tensor, IntTensor, Parameter))


def numel(input) -> int:
    return input.numel()


__all__ = ["tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full",
           "zeros_like", "ones_like", "empty_like", "full_like", "rand", "randn", "randint",
           "rand_like", "randn_like", "randint_like", "randperm", "arange", "linspace", "eye",
           "is_tensor", "numel", "dtype_of"]
