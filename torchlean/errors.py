"""Exceptions torchlean raises beyond the builtin ValueError / TypeError / MemoryError."""


class BackendError(RuntimeError):
    """The requested native backend cannot be used (library missing, no device, driver error)."""


class DeviceError(BackendError):
    """An unrecoverable device error (illegal address, launch failure).

    The CUDA context is unusable after one of these: restart the process. Every later call
    fails fast with the original message instead of cascading.
    """


class Int64OverflowError(RuntimeError, OverflowError):
    """A value int64 cannot hold (NaN, inf, 1e20, 2**63) was written into or combined with an
    int64 tensor. torch raises RuntimeError "value cannot be converted to type int64_t without
    overflow" (and OverflowError for Python ints past 64 bits): this is both."""


class IntegerDivisionByZero(RuntimeError, ZeroDivisionError):
    """Integer `//` or `%` by zero. torch's CPU kernels raise RuntimeError("ZeroDivisionError");
    this is a RuntimeError and a ZeroDivisionError, so either `except` catches it."""
