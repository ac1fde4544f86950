"""Data parallelism across processes: one process per device, launched by mpirun/mpiexec, srun
or torchrun.

    import torchlean.distributed as dist
    dist.init()                       # reads the launcher's environment, binds the device
    dist.all_reduce(buf, op="avg")    # in place, on every rank

init() reads the rank, world size and local rank from the launcher (torchlean.distributed.
launch), binds this process to device `local_rank` on CUDA, and opens the communicator: NCCL on
the CUDA backend (rank 0's unique id broadcast over MPI), MPI itself on the stub, whose buffers
are host memory. A plain `python script.py` is rank 0 of 1 and needs no MPI. Every collective
waits with a deadline (TORCHLEAN_DIST_TIMEOUT_S, default 300 s): a dead peer ends the job with a
DistributedError naming this rank and the collective instead of hanging it.

reduce.py holds the sums over ranks in a fixed order (and the differentiable one SyncBatchNorm
records on the tape); agree.py the small tagged exchanges that tell ranks at different points of
the program apart (DistributedDataParallel's step check, BatchNorm's batch sizes).
"""
from __future__ import annotations

from torchlean.distributed.errors import DistributedError
from torchlean.distributed.launch import LaunchInfo, detect
from torchlean.distributed.reduce import all_reduce_tensor
from torchlean.distributed.group import (init, is_initialized, communicator, rank, world_size,
                                         local_rank, device, destroy, crosses_network, _state)
# all_reduce / broadcast / barrier take torch's arguments (ReduceOp or "sum"/"avg", group,
# async_op) and call the group's collectives
from torchlean.distributed.torch_names import (ReduceOp, is_available, init_process_group,
                                               get_rank, get_world_size, get_backend,
                                               destroy_process_group, all_reduce, broadcast,
                                               barrier)
from torchlean.distributed.sampler import DistributedSampler

__all__ = ["init", "is_initialized", "rank", "world_size", "local_rank", "device", "all_reduce",
           "broadcast", "barrier", "destroy", "DistributedError", "LaunchInfo", "detect",
           "communicator", "crosses_network", "all_reduce_tensor", "ReduceOp", "is_available",
           "init_process_group", "get_rank", "get_world_size", "get_backend",
           "destroy_process_group", "DistributedSampler"]
