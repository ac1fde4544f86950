"""torch-named dtypes. torchlean has three: float32 (every device Tensor), and int64 and bool
(IntTensor, on the host); torch's other integer names map to int64."""
from __future__ import annotations

import numpy as np


class dtype:
    """A torch-style dtype object (torchlean.float32, torchlean.int64, torchlean.bool)."""

    __slots__ = ("name", "numpy", "is_floating_point")

    def __init__(self, name: str, np_type, is_floating_point: bool):
        self.name, self.numpy, self.is_floating_point = name, np.dtype(np_type), is_floating_point

    def __repr__(self):
        return f"torchlean.{self.name}"

    def __eq__(self, o):
        """Equal to itself and to the NumPy dtype it stores (x.dtype == np.int64 holds)."""
        if isinstance(o, dtype):
            return o is self
        try:
            return np.dtype(o) == self.numpy
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return hash(self.numpy)

    def __reduce__(self):
        return (_named, (self.name,))


float32 = dtype("float32", np.float32, True)
int64 = dtype("int64", np.int64, False)
bool_ = dtype("bool", np.bool_, False)
_BY_NAME = {"float32": float32, "float": float32, "int64": int64, "long": int64,
            "int32": int64, "int": int64, "int16": int64, "int8": int64, "uint8": int64,
            "bool": bool_}


def _named(name: str) -> dtype:
    return _BY_NAME[name]


def dtype_of(dt, op: str = "dtype") -> dtype:
    """dt (a torchlean dtype, a NumPy dtype or type, Python's float/int/bool, or a name) as one
    of torchlean's three dtypes; float64 and anything else raise TypeError naming op."""
    if isinstance(dt, dtype):
        return dt
    if dt is float:
        return float32
    if dt is bool:
        return bool_
    if dt is int:
        return int64
    if isinstance(dt, str) and dt.removeprefix("torch.").removeprefix("torchlean.") in _BY_NAME:
        return _BY_NAME[dt.removeprefix("torch.").removeprefix("torchlean.")]
    try:
        nd = np.dtype(dt)
    except TypeError:
        nd = None
    if nd is not None:
        if nd == np.float32:
            return float32
        if nd == np.bool_:
            return bool_
        if nd.kind in "iu":
            return int64
    raise TypeError(f"{op}: torchlean tensors are float32, int64 or bool; got dtype {dt!r}")
