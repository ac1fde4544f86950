"""The process group of this job: init() opens the communicator the launcher's environment
calls for; rank(), world_size(), the collectives on buffers and tensors, destroy()."""
from __future__ import annotations

import numpy as np

from torchlean import _loader, runtime
from torchlean._loader import lib as _lib
from torchlean.buffer import AnyBuffer, Buffer, raise_status
from torchlean.distributed.errors import DistributedError
from torchlean.distributed.launch import LaunchInfo, bootstrap, detect, rendezvous
from torchlean.distributed.work import timeout_from_env
from torchlean.inplace import bump_storage

_state: dict = {"comm": None, "info": None, "device": None, "hosts": 1}


class _SoloComm:
    """World of one process: every collective is the identity (no MPI needed)."""

    name, rank, world = "solo", 0, 1
    averages = False

    def _done(self):
        from torchlean.distributed.work import Work
        return Work(lambda: None)

    def all_reduce(self, bufs, what):
        return self._done()

    def broadcast(self, bufs, src, what):
        return self._done()

    def all_gather(self, bufs, what):
        return self._done(), [b.buf.copy() for b in bufs]

    def allgather_array(self, a, what):
        return np.asarray(a)[None]

    def allgather_array_start(self, a, what):
        return lambda: np.asarray(a)[None]

    def fail(self):
        pass

    def barrier(self, what="barrier"):
        pass

    def copy_into(self, src, dst):
        from torchlean.distributed.work import host_copy
        host_copy(src, dst)

    def close(self):
        pass


def _bind_device(info: LaunchInfo, local: int) -> int | None:
    """On CUDA: device `local` (or 0 when the launcher shows each process one device)."""
    if runtime.backend() != "cuda":
        return None
    n = _loader.ffi.new("int64_t *")
    if _lib.tl_device_count(n):
        raise_status("distributed.init", _lib.TL_E_DEVICE)
    count = int(n[0])
    dev = 0 if count == 1 else local
    if dev >= count:
        raise DistributedError(f"rank {info.rank}: local rank {local} has no device of its own "
                               f"({count} visible); start at most {count} processes per node")
    st = _lib.tl_set_device(dev)
    if st:
        raise_status("distributed.init", st)
    return dev


def init(timeout_s: float | None = None) -> None:
    """Join the job the launcher started (idempotent). timeout_s overrides
    TORCHLEAN_DIST_TIMEOUT_S for every later collective."""
    if _state["comm"] is not None:
        return
    info = detect()
    timeout = timeout_from_env() if timeout_s is None else float(timeout_s)
    boot = bootstrap(info)
    if info.world_size == 1 and boot != "mpi":
        _state["device"] = _bind_device(info, 0)
        _state.update(comm=_SoloComm(), info=info, hosts=1)
        return
    if boot == "mpi":
        from torchlean.distributed.mpi_comm import MPIComm
        host = MPIComm(timeout)
        if (host.world, host.rank) != (info.world_size, info.rank):
            raise DistributedError(
                f"torchlean.distributed: {info.launcher} says rank {info.rank} of "
                f"{info.world_size} but MPI sees rank {host.rank} of {host.world}: the "
                "processes are not one MPI job (launch with mpirun -n N, or leave "
                "TORCHLEAN_DIST_BOOTSTRAP unset under torchrun and srun)")
    else:
        from torchlean.distributed.tcp_comm import TCPComm
        addr, port = rendezvous(info)
        host = TCPComm(addr, port, info.rank, info.world_size, timeout)
    names = _host_names(host)
    local = info.local_rank
    if local is None:     # the launcher names none: the ranks below this one on its host
        local = int((names[:info.rank] == names[info.rank]).sum())
    _state["hosts"] = len(set(names.tolist()))
    info = LaunchInfo(info.launcher, info.rank, info.world_size, local)
    _state["device"] = _bind_device(info, local)
    if runtime.backend() == "cuda":
        from torchlean.distributed.nccl_comm import NCCLComm
        comm = NCCLComm(host, _state["device"])
    else:
        comm = host
    _state.update(comm=comm, info=info)


def _host_names(host) -> np.ndarray:
    """Every rank's host name (a CRC of it), in rank order."""
    import socket
    import zlib
    me = zlib.crc32(socket.gethostname().encode())
    return host.allgather_array(np.array([me], np.int64), "host names")[:, 0]


def crosses_network() -> bool:
    """Whether this job's traffic goes over a network: its ranks run on more than one host, or
    NCCL's peer-to-peer and shared-memory transports are both off (NCCL_P2P_DISABLE=1
    NCCL_SHM_DISABLE=1: its socket or InfiniBand transport then carries even one host's
    traffic, which is how a single machine emulates several)."""
    import os
    off = {"1", "true", "yes"}
    return _state["hosts"] > 1 or (
        os.environ.get("NCCL_P2P_DISABLE", "").lower() in off
        and os.environ.get("NCCL_SHM_DISABLE", "").lower() in off)


def is_initialized() -> bool:
    return _state["comm"] is not None


def communicator():
    """The communicator init() opened (DistributedDataParallel's channel)."""
    if _state["comm"] is None:
        raise DistributedError("torchlean.distributed: call torchlean.distributed.init() first")
    return _state["comm"]


def rank() -> int:
    return communicator().rank


def world_size() -> int:
    return communicator().world


def local_rank() -> int:
    communicator()
    return _state["info"].local_rank


def device() -> int | None:
    """The CUDA device this process is bound to (None on the stub)."""
    communicator()
    return _state["device"]


def _as_anybuffer(op: str, buf) -> AnyBuffer:
    from torchlean.session import Tensor
    if isinstance(buf, Tensor):
        buf = buf.value
    if isinstance(buf, Buffer):
        buf = AnyBuffer((buf.n,), buf, owns=False)
    if not isinstance(buf, AnyBuffer):
        raise TypeError(f"{op}: expected an AnyBuffer, Buffer or Tensor, got {type(buf).__name__}")
    if not buf.live:
        raise ValueError(f"{op}: buffer of shape {buf.shape} was already released")
    return buf


def _check_same_size(op: str, comm, b: AnyBuffer) -> None:
    sizes = comm.allgather_array(np.array([b.numel], np.int64), f"{op} size check")[:, 0]
    if (sizes != b.numel).any():
        raise DistributedError(f"rank {comm.rank}: {op}: buffer sizes differ across ranks "
                               f"(element counts by rank: {sizes.tolist()})")


def all_reduce(buf, op: str = "sum") -> None:
    """Sum (op="sum") or average (op="avg": the sum scaled by 1/world) `buf` over every rank, in
    place. The sizes are checked across ranks first."""
    if op not in ("sum", "avg"):
        raise ValueError(f"all_reduce: op must be 'sum' or 'avg', got {op!r}")
    b = _as_anybuffer("all_reduce", buf)
    comm = communicator()
    _check_same_size("all_reduce", comm, b)
    comm.all_reduce([b], f"all_reduce(op={op}, {b.numel} floats)").wait()
    if op == "avg" and comm.world > 1:
        _scale_in_place(b, 1.0 / comm.world)
    bump_storage(b.buf, "all_reduce")   # an in-place write: a new version of the storage


def _scale_in_place(b: AnyBuffer, c: float) -> None:
    """b = c * b with the scale kernel, written back into b's own memory."""
    from torchlean._generated import ops as _ops
    s = _ops.scale(b, c=c)
    try:
        communicator().copy_into(s, b)
    finally:
        s.release()


def broadcast(buf, src: int = 0) -> None:
    """Overwrite `buf` on every rank with rank src's values, in place."""
    b = _as_anybuffer("broadcast", buf)
    comm = communicator()
    if not 0 <= src < comm.world:
        raise ValueError(f"broadcast: src must be a rank in [0, {comm.world}), got {src}")
    _check_same_size("broadcast", comm, b)
    comm.broadcast([b], src, f"broadcast(src={src}, {b.numel} floats)").wait()
    bump_storage(b.buf, "broadcast")


def barrier() -> None:
    """Wait until every rank has reached this call (and, on CUDA, finished its queued work)."""
    communicator().barrier("barrier")


def destroy() -> None:
    """Close the communicator; init() may be called again afterwards."""
    comm = _state["comm"]
    if comm is not None:
        comm.close()
    _state.update(comm=None, info=None, hosts=1)

