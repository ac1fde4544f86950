"""torch.cat, torch.stack and torch.where when their values are int64/bool (IntTensors or
Python ints): the result stays an int64 (or bool) IntTensor, as torch's type promotion gives;
torchlean.session sends such calls here and any mixed with floats to the float32 path."""
from __future__ import annotations

import numpy as np

from torchlean import int_shape_ops as _ops
from torchlean.int_tensor import IntTensor
from torchlean.int_values import check_int


def _int_operand(op, v) -> np.ndarray:
    """An IntTensor or a Python/NumPy integer (or bool) as an array for a join."""
    if isinstance(v, IntTensor):
        return v._a
    if isinstance(v, (bool, np.bool_)):
        return np.asarray(v)
    return np.asarray(check_int(op, v), dtype=np.int64)


def is_int_operand(v) -> bool:
    """An IntTensor or a Python integer (a bool too): what keeps a join or where in int64."""
    return isinstance(v, (IntTensor, bool, int, np.integer, np.bool_))


def cat(tensors, dim=0) -> "IntTensor":
    """torch.cat of int64/bool tensors (bool with int64 gives int64)."""
    return IntTensor(_ops.cat([_int_operand("cat", t) for t in tensors], dim))


def stack(tensors, dim=0) -> "IntTensor":
    return IntTensor(_ops.stack([_int_operand("stack", t) for t in tensors], dim))


def where(condition, input, other) -> "IntTensor":
    """torch.where with int64/bool values (IntTensors or Python ints); condition a bool
    IntTensor, a comparison's 0/1 float Tensor or an array."""
    c = condition.numpy() if hasattr(condition, "session") else np.asarray(
        condition._a if isinstance(condition, IntTensor) else condition)
    if c.dtype.kind not in "biuf":
        raise TypeError(f"where: condition must be a bool tensor, got dtype {c.dtype}")
    return IntTensor(_ops.where(c != 0, _int_operand("where", input),
                                _int_operand("where", other)))
