"""torchlean: a small, auditable float32 autograd runtime with native kernels.

Two interchangeable native libraries implement one generated C ABI: a portable C stub (the
reference) and a CUDA library. TORCHLEAN_BACKEND=stub|cuda|auto picks one at import.
"""
from __future__ import annotations


from torchlean.errors import BackendError, DeviceError
from torchlean import _loader
from torchlean._loader import ffi as _ffi, lib as _lib
from torchlean.buffer import AnyBuffer, Buffer
from torchlean._opsupport import DeviceMask
from torchlean.tape import Tape, no_grad, is_grad_enabled
from torchlean._generated import ops
from torchlean.dgemm import dgemm
from torchlean.session import Session, Tensor, Parameter, manual_seed, tensor, softmax, log_softmax
from torchlean.session import cat, stack, split, chunk, get_rng_state, set_rng_state
from torchlean.session import where, argmax, argmin, pow, erf, eq, ne, lt, le, gt, ge  # noqa: A004
from torchlean import optim, nn, interop, data
from torchlean.interop import tensor_from_dlpack as from_dlpack
# torch-shaped top level: factories, torch.X forms of Tensor methods, dtypes and devices
from torchlean.int_tensor import IntTensor
from torchlean.dtypes import dtype, float32, int64, bool_ as _bool_dtype
from torchlean.devices import device
from torchlean import cuda, utils
from torchlean.factories import (tensor, as_tensor, from_numpy, zeros, ones, empty, full,  # noqa: F811
                                 zeros_like, ones_like, empty_like, full_like, rand, randn,
                                 randint, rand_like, randn_like, randint_like, randperm, arange,
                                 linspace, eye, is_tensor, numel)
from torchlean.functions import (abs, exp, log, sqrt, rsqrt, sigmoid, tanh, relu, reciprocal,  # noqa: A004
                                 neg, square, sum, mean, amax, amin, max, min, var, std,
                                 logsumexp, flatten, reshape, transpose, permute, squeeze,
                                 unsqueeze, t, clamp, clip, detach, clone, add, sub, mul, div,
                                 matmul, mm, bmm, maximum, minimum, floor, trunc, gather,
                                 broadcast_to)
from torchlean.exact_arith import exact_version
from torchlean.random import Generator, default_generator, initial_seed, seed
from torchlean.serialization import save, load
from torchlean.runtime import (backend, set_deterministic, is_deterministic, set_exact, is_exact,
                               synchronize, memory_stats, reset_peak_memory_stats, empty_cache)

__version__ = "0.1.0"


__all__ = ["AnyBuffer", "Buffer", "Tape", "BackendError", "DeviceError", "backend", "ops",
           "set_deterministic", "is_deterministic", "set_exact", "is_exact", "memory_stats", "reset_peak_memory_stats",
           "empty_cache", "synchronize", "no_grad", "is_grad_enabled", "dgemm", "Session", "Tensor",
           "Parameter", "manual_seed", "tensor", "softmax", "log_softmax", "optim", "nn",
           "from_numpy", "from_dlpack", "DeviceMask", "cat", "stack", "split", "chunk",
           "get_rng_state", "set_rng_state", "data", "where", "argmax", "argmin", "pow", "erf",
           "eq", "ne", "lt", "le", "gt", "ge", "IntTensor", "utils", "dtype", "float32", "int64", "long",
           "device", "cuda", "as_tensor", "zeros", "ones", "empty",
           "full", "zeros_like", "ones_like", "empty_like", "full_like", "rand", "randn",
           "randint", "rand_like", "randn_like", "randint_like", "randperm", "arange",
           "linspace", "eye", "is_tensor", "numel", "exp", "log", "sqrt", "rsqrt",
           "sigmoid", "tanh", "relu", "reciprocal", "neg", "square", "mean", "amax",
           "amin", "var", "std", "logsumexp", "flatten", "reshape", "transpose",
           "permute", "squeeze", "unsqueeze", "t", "clamp", "clip", "detach", "clone", "add",
           "sub", "mul", "div", "matmul", "mm", "bmm", "maximum", "minimum", "floor", "trunc",
           "gather", "broadcast_to", "exact_version", "Generator", "default_generator",
           "initial_seed", "seed", "save", "load"]

# torch's dtype aliases; bound last, since they shadow builtins in this module's namespace (the
# names that shadow builtins, these and abs/max/min/sum, stay out of __all__)
globals().update(float=float32, long=int64, int=int64, bool=_bool_dtype)

# PyTorch's operator catalog beyond the core (torchlean/catalog/): bound last, never replacing a
# core name
from torchlean import catalog as _catalog, special, linalg, fft, masked  # noqa: E402
from torchlean.signal import windows as _windows  # noqa: E402
import torchlean.nn.functional as _functional  # noqa: E402
import sys as _sys  # noqa: E402
_catalog.install((Tensor, Parameter), IntTensor,
                 {"torch": _sys.modules[__name__], "nn.functional": _functional,
                  "special": special, "linalg": linalg, "fft": fft, "masked": masked,
                  "signal.windows": _windows})
del _sys

# TORCHLEAN_AUDIT=path: record this process's run (torchlean.audit), from here to its exit
import os as _os  # noqa: E402
if _os.environ.get("TORCHLEAN_AUDIT"):
    from torchlean import audit as _audit  # noqa: E402
    _audit.start_from_environment()
