"""torch.distributed's names over torchlean.distributed, so a DDP script ports by its imports.

init_process_group reads the launcher's environment as init() does (mpirun, srun, torchrun
variables); its backend argument names what torch would use ("nccl", "gloo", "mpi") and is
checked against what torchlean runs (NCCL on the CUDA backend; on the stub MPI under mpirun, the
TCP store, which get_backend() calls "gloo", under torchrun and srun), never silently
ignored when it asks for something else. Reductions: SUM and AVG (torch's ReduceOp names);
the others raise, naming the op.
"""
from __future__ import annotations

import enum

from torchlean import runtime
import torchlean.distributed.group as dist


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"


_BACKENDS = {"cuda": ("nccl",), "stub": ("mpi", "gloo")}


def is_available() -> bool:
    return True


def init_process_group(backend=None, init_method=None, timeout=None, world_size=-1, rank=-1,
                       store=None, group_name="", pg_options=None, device_id=None) -> None:
    """Join the job (torchlean.distributed.init); world_size/rank, when given, must match
    the launcher's."""
    if backend is not None:
        name = str(backend).split(":")[0].lower()
        if name not in _BACKENDS[runtime.backend()]:
            raise ValueError(
                f"init_process_group: backend {backend!r} is not available with torchlean's "
                f"{runtime.backend()} backend (it uses "
                f"{'NCCL' if runtime.backend() == 'cuda' else 'MPI'}; pass backend=None or "
                f"{_BACKENDS[runtime.backend()][0]!r})")
    if init_method not in (None, "env://"):
        raise ValueError(f"init_process_group: init_method {init_method!r} is not supported "
                         "(torchlean reads the launcher's environment: use None or 'env://')")
    if store is not None:
        raise ValueError("init_process_group: a store is not supported (torchlean reads the "
                         "launcher's environment)")
    seconds = None if timeout is None else float(getattr(timeout, "total_seconds", lambda: timeout)())
    dist.init(timeout_s=seconds)
    for what, asked, got in (("world_size", world_size, dist.world_size()),
                             ("rank", rank, dist.rank())):
        if asked not in (-1, None) and asked != got:
            dist.destroy()
            raise ValueError(f"init_process_group: {what}={asked} but the launcher started "
                             f"this process as {what} {got}")


def is_initialized() -> bool:
    return dist.is_initialized()


def _no_group(op: str, group) -> None:
    if group is not None:
        raise ValueError(f"{op}: process groups other than the default one are not supported "
                         f"(got group={group!r})")


def get_rank(group=None) -> int:
    _no_group("get_rank", group)
    return dist.rank()


def get_world_size(group=None) -> int:
    _no_group("get_world_size", group)
    return dist.world_size()


def get_backend(group=None) -> str:
    _no_group("get_backend", group)
    name = dist.communicator().name
    return {"nccl": "nccl", "tcp": "gloo", "mpi": "mpi"}.get(
        name, "nccl" if runtime.backend() == "cuda" else "mpi")


class _DoneWork:
    """What async_op=True returns: the collective already finished."""

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _reduce_name(op) -> str:
    name = op.value if isinstance(op, ReduceOp) else str(op).lower()
    if name not in ("sum", "avg"):
        raise ValueError(f"all_reduce: op must be 'sum' or 'avg' (ReduceOp.SUM or "
                         f"ReduceOp.AVG), got {op!r}")
    return name


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` over every rank, in place (torch.distributed.all_reduce)."""
    _no_group("all_reduce", group)
    dist.all_reduce(tensor, op=_reduce_name(op))
    return _DoneWork() if async_op else None


def broadcast(tensor, src=0, group=None, async_op=False):
    """Overwrite `tensor` with rank src's values, in place (torch.distributed.broadcast)."""
    _no_group("broadcast", group)
    dist.broadcast(tensor, src=src)
    return _DoneWork() if async_op else None


def barrier(group=None, async_op=False, device_ids=None):
    _no_group("barrier", group)
    dist.barrier()
    return _DoneWork() if async_op else None


def destroy_process_group(group=None) -> None:
    _no_group("destroy_process_group", group)
    dist.destroy()
