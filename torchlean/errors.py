"""Exceptions torchlean raises beyond the builtin ValueError / TypeError / MemoryError."""


class BackendError(RuntimeError):
    """The requested native backend cannot be used (library missing, no device, driver error)."""


class DeviceError(BackendError):
    """An unrecoverable device error (illegal address, launch failure).

    The CUDA context is unusable after one of these: restart the process. Every later call
    fails fast with the original message instead of cascading.
    """
