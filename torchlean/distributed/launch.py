"""Who am I in the job: rank, world size and local rank from the launcher's environment.

mpirun/mpiexec (Open MPI's OMPI_COMM_WORLD_*, MPICH/Hydra's PMI_* and MPI_LOCALRANKID, PMIx),
srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and torchrun (RANK, WORLD_SIZE, LOCAL_RANK) are
recognised, in that order. Only the environment is read here; MPI itself is opened by the
communicator, which then checks that MPI sees the same job.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

# (launcher, rank var, size var, local rank vars)
_LAUNCHERS = (
    ("mpirun (Open MPI)", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     ("OMPI_COMM_WORLD_LOCAL_RANK",)),
    ("mpiexec (PMI)", "PMI_RANK", "PMI_SIZE", ("MPI_LOCALRANKID", "PMI_LOCAL_RANK")),
    ("mpiexec (PMIx)", "PMIX_RANK", "PMIX_SIZE", ("PMIX_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK")),
    ("srun", "SLURM_PROCID", "SLURM_NTASKS", ("SLURM_LOCALID",)),
    ("torchrun", "RANK", "WORLD_SIZE", ("LOCAL_RANK",)),
)


@dataclass(frozen=True)
class LaunchInfo:
    launcher: str          # which environment the numbers came from ("none": a plain process)
    rank: int
    world_size: int
    local_rank: int | None  # None: not in the environment (MPI's shared-memory split decides)


def _int(env, name: str) -> int:
    v = env[name]
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"torchlean.distributed: environment variable {name}={v!r} is not an "
                         "integer") from None


def detect(env=None) -> LaunchInfo:
    """The first launcher whose rank and size variables are both set; a plain process is rank 0
    of 1. PMIx sets no size variable of its own under Open MPI, which sets OMPI_* first."""
    env = os.environ if env is None else env
    for name, rv, sv, lvs in _LAUNCHERS:
        if rv in env and sv in env:
            rank, size = _int(env, rv), _int(env, sv)
            if size < 1 or not 0 <= rank < size:
                raise ValueError(f"torchlean.distributed: {rv}={rank} and {sv}={size} do not "
                                 f"describe a rank of a job ({name})")
            local = next((_int(env, v) for v in lvs if v in env), None)
            return LaunchInfo(name, rank, size, local)
    return LaunchInfo("none", 0, 1, 0)
