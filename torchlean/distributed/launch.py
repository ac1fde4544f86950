"""Who am I in the job: rank, world size and local rank from the launcher's environment.

mpirun/mpiexec (Open MPI's OMPI_COMM_WORLD_*, MPICH/Hydra's PMI_* and MPI_LOCALRANKID, PMIx),
srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) and torchrun (RANK, WORLD_SIZE, LOCAL_RANK) are
recognised, in that order. Only the environment is read here; MPI itself is opened by the
communicator, which then checks that MPI sees the same job.

bootstrap() says how the ranks find each other: MPI under mpirun/mpiexec; under srun and
torchrun a TCP store on rank 0 (rendezvous() gives its address: MASTER_ADDR and MASTER_PORT,
under SLURM by default the first host of the job's node list and a port from the job id), so no
MPI is needed. TORCHLEAN_DIST_BOOTSTRAP=mpi|tcp chooses.
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


_MPI_LAUNCHERS = ("mpirun (Open MPI)", "mpiexec (PMI)", "mpiexec (PMIx)")
SLURM_BASE_PORT = 29500


def bootstrap(info: LaunchInfo, env=None) -> str:
    """"mpi" or "tcp": how the ranks of this job reach each other ("solo": a plain process)."""
    env = os.environ if env is None else env
    if info.launcher == "none":
        return "solo"
    want = env.get("TORCHLEAN_DIST_BOOTSTRAP", "").strip().lower()
    if want:
        if want not in ("mpi", "tcp"):
            raise ValueError(f"torchlean.distributed: TORCHLEAN_DIST_BOOTSTRAP={want!r} is "
                             "neither 'mpi' nor 'tcp'")
        return want
    return "mpi" if info.launcher in _MPI_LAUNCHERS else "tcp"


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list: 'gpu[03-05,9],cpu1' -> 'gpu03'."""
    depth, end = 0, len(nodelist)
    for i, c in enumerate(nodelist):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            end = i
            break
    item, out, i = nodelist[:end].strip(), "", 0
    while i < len(item):
        if item[i] == "[":
            j = item.find("]", i)
            if j < 0:
                raise ValueError(f"torchlean.distributed: node list {nodelist!r} has an "
                                 "unclosed '['")
            out += item[i + 1:j].split(",")[0].split("-")[0]
            i = j + 1
        else:
            out += item[i]
            i += 1
    if not out:
        raise ValueError(f"torchlean.distributed: empty SLURM node list {nodelist!r}")
    return out


def rendezvous(info: LaunchInfo, env=None) -> tuple[str, int]:
    """(host, port) of rank 0's TCP store. TORCHLEAN_STORE_PORT overrides the port; under
    torchrun's agent (which serves its own store at MASTER_PORT) the port is MASTER_PORT + 1."""
    env = os.environ if env is None else env
    host = env.get("MASTER_ADDR")
    if not host and info.launcher == "srun":
        nodes = next((env[v] for v in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
                                       "SLURM_NODELIST") if env.get(v)), None)
        host = first_host(nodes) if nodes else None
    if not host:
        raise ValueError(f"torchlean.distributed: {info.launcher} started this process without "
                         "MASTER_ADDR (rank 0's host): set MASTER_ADDR and MASTER_PORT, or "
                         "launch with mpirun")
    for name in ("TORCHLEAN_STORE_PORT", "MASTER_PORT"):
        if env.get(name):
            port = _int(env, name)
            if name == "MASTER_PORT" and env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() \
                    == "true":
                port += 1
            break
    else:
        if info.launcher == "srun" and env.get("SLURM_JOB_ID"):
            port = SLURM_BASE_PORT + _int(env, "SLURM_JOB_ID") % 10000
        else:
            raise ValueError(f"torchlean.distributed: {info.launcher} started this process "
                             "without MASTER_PORT (the rendezvous port on rank 0's host)")
    if not 0 < port < 65536:
        raise ValueError(f"torchlean.distributed: rendezvous port {port} is out of range")
    return host, port
