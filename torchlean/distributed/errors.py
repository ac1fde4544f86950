"""DistributedError: a collective failed (a peer died, timed out, sizes disagree, NCCL failed)."""


class DistributedError(RuntimeError):
    """Raised by torchlean.distributed; the message names this rank and the collective."""
