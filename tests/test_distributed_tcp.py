"""Jobs launched without MPI: W processes started here with torchrun's variables (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) or SLURM's (SLURM_PROCID, SLURM_NTASKS,
SLURM_LOCALID, the node list), meeting at a TCP store on rank 0 (a free port per test).

The stub's collectives then travel over that store; on CUDA with enough GPUs NCCL carries them
and the store only its unique id. The workers are test_distributed.py's (and
test_distributed_dp.py's), so the references are the same: closed forms for the collectives,
the one-process accumulation bit for bit in exact mode. A rank that dies, stalls or skips a
backward must give every other rank a DistributedError within the deadline, never a hang: each
job runs under a wall-clock limit past which every process is killed and the test fails.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import test_distributed as td

ROOT = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent
LAUNCH_VARS = ("OMPI_", "PMI_", "PMIX_", "MPI_LOCALRANKID", "SLURM_", "RANK", "WORLD_SIZE",
               "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHLEAN_STORE_PORT",
               "TORCHLEAN_DIST_BOOTSTRAP", "TORCHELASTIC_")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(style: str, r: int, world: int, port: int) -> dict:
    if style == "torchrun":
        return {"RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(r),
                "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if style == "torchrun-nolocal":          # the local rank found from the host names
        return {"RANK": str(r), "WORLD_SIZE": str(world), "MASTER_ADDR": "localhost",
                "MASTER_PORT": str(port)}
    assert style == "slurm"                 # rank 0's host from the node list
    return {"SLURM_PROCID": str(r), "SLURM_NTASKS": str(world), "SLURM_LOCALID": str(r),
            "SLURM_JOB_NODELIST": "localhost", "SLURM_JOB_ID": "4711",
            "TORCHLEAN_STORE_PORT": str(port)}


class Job:
    """The W processes of one job: return codes, wall time to each exit, logs."""

    def __init__(self, procs, logs, t0):
        self.procs, self.logs, self.t0 = procs, logs, t0
        self.rc: list[int | None] = [None] * len(procs)
        self.took: list[float | None] = [None] * len(procs)

    def log(self, r: int) -> str:
        return self.logs[r].read_text()[-3000:]

    def all_logs(self) -> str:
        return "\n".join(f"--- rank {r}\n{self.log(r)}" for r in range(len(self.procs)))


def spawn(world: int, script: Path, scenario: str, out: Path, style: str = "torchrun",
          limit_s: float = 90.0, extra_env=None, stopped_ok=()) -> Job:
    """Start the ranks, wait for them (at most limit_s), kill what is left. Ranks in
    stopped_ok may be left running (a stopped rank); any other still running fails the test."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCH_VARS)}
    base["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(TESTS), os.environ.get("PYTHONPATH", "")])
    base.setdefault("TORCHLEAN_DIST_TIMEOUT_S", "30")
    base["NCCL_NVLS_ENABLE"] = "0"
    base.update(td.rank_backend(world))
    base.update(extra_env or {})
    procs, logs = [], []
    t0 = time.monotonic()
    for r in range(world):
        log = out / f"log{r}.txt"
        logs.append(log)
        with open(log, "w") as f:
            procs.append(subprocess.Popen(
                [sys.executable, str(script), scenario, str(out)],
                env={**base, **rank_env(style, r, world, port)}, stdout=f,
                stderr=subprocess.STDOUT, cwd=str(ROOT), start_new_session=True))
    job = Job(procs, logs, t0)
    while time.monotonic() - t0 < limit_s:
        for r, p in enumerate(procs):
            if job.rc[r] is None and p.poll() is not None:
                job.rc[r], job.took[r] = p.returncode, time.monotonic() - t0
        if all(job.rc[r] is not None for r in range(world) if r not in stopped_ok):
            break
        time.sleep(0.05)
    hung = [r for r in range(world) if job.rc[r] is None and r not in stopped_ok]
    for r, p in enumerate(procs):
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    if hung:
        pytest.fail(f"ranks {hung} of {scenario} ({style}) did not end within {limit_s} s:\n"
                    + job.all_logs())
    return job


def run_ok(world: int, scenario: str, out: Path, style: str = "torchrun",
           script: Path = TESTS / "test_distributed.py", **kw) -> list[dict]:
    job = spawn(world, script, scenario, out, style, **kw)
    assert job.rc == [0] * world, f"{scenario} ({style}) failed {job.rc}:\n{job.all_logs()}"
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(world)]


# ---------------------------------------------------------------------------------- workers
def worker_lose(out: Path, who: int, how: str) -> None:
    """Rank `who` dies (SIGKILL), stops (SIGSTOP) or leaves early between two all_reduces; every
    other rank writes the DistributedError it got to error<r>.txt."""
    import torchlean as tl
    import torchlean.distributed as dist
    dist.init()
    r = dist.rank()
    b = tl.AnyBuffer.from_numpy(np.ones(4))
    if r == who:
        dist.all_reduce(b)
        if how == "leave":
            dist.destroy()
            return
        os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    try:     # the first may fail too: rank 0's store stops before it answers every rank
        dist.all_reduce(b)
        dist.all_reduce(b)
    except dist.DistributedError as e:
        (out / f"error{r}.txt").write_text(str(e))
        raise
    (out / f"finished{r}.txt").write_text("no error")


def worker_info(out: Path) -> None:
    """What init() found: the rank, world, local rank and communicator."""
    import torchlean.distributed as dist
    dist.init_process_group()
    np.savez(out / f"rank{dist.get_rank()}.npz", rank=dist.get_rank(),
             world=dist.get_world_size(), local=dist.local_rank(),
             comm=dist.communicator().name, backend=dist.get_backend())
    dist.destroy_process_group()


# ---------------------------------------------------------------------------------- tests
def _stub_only():
    import torchlean as tl
    if tl.backend() != "stub":
        pytest.skip("the TCP collectives are the stub's; on CUDA the GPU tests run NCCL")


@pytest.mark.parametrize("style", ["torchrun", "torchrun-nolocal", "slurm"])
def test_init_reads_each_launch_style(tmp_path, style):
    ranks = run_ok(3, "info", tmp_path, style, script=Path(__file__))
    import torchlean as tl
    want = "nccl" if tl.backend() == "cuda" and td.visible_gpus() >= 3 else "tcp"
    for r, got in enumerate(ranks):
        assert (int(got["rank"]), int(got["world"]), int(got["local"])) == (r, 3, r)
        assert str(got["comm"]) == want
        assert str(got["backend"]) == ("nccl" if want == "nccl" else "gloo")


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_over_the_store(tmp_path, world):
    """Closed forms, as test_distributed's two-process test, at 2 and 3 ranks."""
    ranks = run_ok(world, "collectives", tmp_path)
    a = sum(np.arange(7, dtype=np.float32) * (r + 1) + np.float32(0.25) for r in range(world))
    for r, got in enumerate(ranks):
        assert int(got["world"]) == world
        np.testing.assert_array_equal(got["sum"], a.astype(np.float32))
        np.testing.assert_allclose(got["avg"], np.linspace(-1, 1, 5) * (world + 3) / 2,
                                   rtol=1e-6)
        np.testing.assert_array_equal(got["one"], [sum(q + 0.5 for q in range(world))])
        np.testing.assert_array_equal(got["bcast"], np.full((2, 3), world - 1.0))
        sizes = [3 + q for q in range(world)]
        msg = str(got["mismatch"])
        assert f"rank {r}" in msg and "all_reduce" in msg and str(sizes) in msg, msg


@pytest.mark.parametrize("world,style", [(2, "torchrun"), (3, "torchrun"), (2, "slurm")])
def test_ddp_exact_equals_accumulation_bitwise(tmp_path, world, style):
    """Exact DistributedDataParallel over the store (or NCCL): every gradient, no_sync
    gradient and Adam update equals one process accumulating the W*K micro-batches."""
    td._check_training(run_ok(world, "train_exact", tmp_path, style), world, exact=True)


def test_ddp_default_mode_over_the_store(tmp_path):
    td._check_training(run_ok(2, "train_default", tmp_path), 2, exact=False)


def test_rank_order_sum_over_the_store(tmp_path):
    """3 ranks whose gradients are known exactly: (x0 + x1) + x2, scaled by float32(1/3)."""
    world = 3
    ranks = run_ok(world, "grad_sum", tmp_path)
    x = td.rank_vectors(world)
    want = np.float32(1.0 / world) * ((x[0] + x[1]) + x[2])
    for r, got in enumerate(ranks):
        assert np.array_equal(got["grad"], want), f"rank {r}"


@pytest.mark.parametrize("who,how", [(1, "kill"), (0, "kill"), (2, "leave")])
def test_dead_or_departed_rank_fails_the_others_at_once(tmp_path, who, how):
    """A rank that dies (rank 0, the store's host, too) or leaves mid-job: the others raise a
    DistributedError naming it well before the 20 s deadline."""
    _stub_only()
    world = 3
    job = spawn(world, Path(__file__), f"lose{who}{how}", tmp_path,
                extra_env={"TORCHLEAN_DIST_TIMEOUT_S": "20"}, limit_s=60)
    for r in range(world):
        if r == who:
            continue
        err = tmp_path / f"error{r}.txt"
        assert err.exists(), f"rank {r} raised nothing:\n{job.all_logs()}"
        msg = err.read_text()
        assert msg.startswith(f"rank {r}: all_reduce"), msg
        if who == 0:
            assert "rank 0 died or left the job" in msg, msg
        else:
            assert f"rank {who} {'died' if how == 'kill' else 'left the job'}" in msg, msg
        assert job.rc[r] != 0 and job.took[r] < 15, (r, job.rc, job.took)


@pytest.mark.parametrize("who", [1, 0])
def test_stalled_rank_fails_the_others_at_the_deadline(tmp_path, who):
    """A rank that stops (SIGSTOP) mid-job: the others' all_reduce raises after the 3 s
    deadline (rank 0 keeps serving the others until then), naming the rank and collective."""
    _stub_only()
    world = 3
    job = spawn(world, Path(__file__), f"lose{who}stall", tmp_path,
                extra_env={"TORCHLEAN_DIST_TIMEOUT_S": "3"}, limit_s=40, stopped_ok=(who,))
    for r in range(world):
        if r == who:
            continue
        msg = (tmp_path / f"error{r}.txt").read_text()
        assert f"rank {r}: all_reduce" in msg and "did not complete within 3 s" in msg, msg
        assert job.rc[r] != 0 and 2.5 < job.took[r] < 20, (r, job.rc, job.took)


@pytest.mark.parametrize("batchnorm", [False, True])
def test_skipped_backward_fails_that_step_over_the_store(tmp_path, batchnorm):
    """The last rank skips step 1's backward: the step check (read at the end of the backward
    pass) fails that step on every rank; with BatchNorm the tagged exchanges tell the step
    check and the statistics exchange apart."""
    world = 2
    job = spawn(world, TESTS / "test_distributed_dp.py", "skip_bn" if batchnorm else "skip",
                tmp_path, extra_env={"TORCHLEAN_DIST_TIMEOUT_S": "10"}, limit_s=60)
    for r in range(world):
        msg = (tmp_path / f"error{r}.txt").read_text()
        assert msg.startswith(f"step {1 + r}:") and f"rank {r}:" in msg, msg
        if batchnorm:
            assert ("rank 0 at 'DistributedDataParallel step check', rank 1 at 'BatchNorm "
                    "running statistics'") in msg, msg
        else:
            assert "forward passes since the last reduction by rank: [1, 2]" in msg, msg
        assert job.took[r] < 30 and not (tmp_path / f"finished{r}.txt").exists()


def test_rendezvous_address_from_each_environment():
    from torchlean.distributed.launch import bootstrap, detect, first_host, rendezvous
    tr = {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "29400"}
    assert rendezvous(detect(tr), tr) == ("10.0.0.5", 29400)
    assert bootstrap(detect(tr), tr) == "tcp"
    agent = {**tr, "TORCHELASTIC_USE_AGENT_STORE": "True"}       # torchrun's own store there
    assert rendezvous(detect(agent), agent) == ("10.0.0.5", 29401)
    sl = {"SLURM_PROCID": "3", "SLURM_NTASKS": "8", "SLURM_JOB_ID": "123456",
          "SLURM_JOB_NODELIST": "gpu-a[007-009,12],gpu-b3"}
    assert rendezvous(detect(sl), sl) == ("gpu-a007", 29500 + 123456 % 10000)
    assert bootstrap(detect(sl), sl) == "tcp"
    assert bootstrap(detect(sl), {**sl, "TORCHLEAN_DIST_BOOTSTRAP": "mpi"}) == "mpi"
    mp = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4"}
    assert bootstrap(detect(mp), mp) == "mpi" and bootstrap(detect({}), {}) == "solo"
    assert first_host("n[1-3]-ib,m2") == "n1-ib" and first_host("a[01-2]b[5,7]") == "a01b5"
    assert first_host(" node17 ") == "node17"
    with pytest.raises(ValueError, match="MASTER_ADDR"):
        rendezvous(detect({"RANK": "0", "WORLD_SIZE": "2"}), {"RANK": "0", "WORLD_SIZE": "2"})
    no_port = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}
    with pytest.raises(ValueError, match="MASTER_PORT"):
        rendezvous(detect(no_port), no_port)
    with pytest.raises(ValueError, match="unclosed"):
        first_host("n[1-3")
    with pytest.raises(ValueError, match="TORCHLEAN_DIST_BOOTSTRAP='nccl'"):
        bootstrap(detect(tr), {**tr, "TORCHLEAN_DIST_BOOTSTRAP": "nccl"})


def test_unreachable_rendezvous_fails_within_the_deadline():
    from torchlean.distributed import DistributedError
    from torchlean.distributed.store import StoreClient
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match=r"rank 1: cannot reach the rendezvous at "
                                               r"127.0.0.1:\d+ within 0.5 s"):
        StoreClient("127.0.0.1", free_port(), 1, 2, 0.5)
    assert time.monotonic() - t0 < 5


def test_store_in_one_process_deletes_read_keys_and_names_a_lost_rank():
    """Two clients of one server, in this process: values come back in key order, a key read
    as often as announced is dropped, and a client that vanishes makes waits fail at once."""
    from torchlean.distributed import DistributedError
    from torchlean.distributed.store import StoreClient
    port = free_port()
    c0 = StoreClient("127.0.0.1", port, 0, 2, 5.0)
    c1 = StoreClient("127.0.0.1", port, 1, 2, 5.0)
    c0.set("a", b"x" * 100_003, 1)
    c1.set("b", b"", 2)
    assert c1.get(["a", "b"], "g") == [b"x" * 100_003, b""]
    assert c0.get(["b"], "g") == [b""]
    assert c0.server.data == {}
    c1.sock.close()          # died: no goodbye
    with pytest.raises(DistributedError, match=r"rank 0: wait: rank 1 died before this "
                                               r"collective completed \(waiting for 'c'\)"):
        c0.get(["c"], "wait")
    c1.closed = True
    c0.close()


if __name__ == "__main__":
    scenario, out = sys.argv[1], Path(sys.argv[2])
    if scenario == "info":
        worker_info(out)
    else:                                   # lose<rank><kill|stall|leave>
        worker_lose(out, int(scenario[4]), scenario[5:])
