"""torchlean.distributed and DistributedDataParallel across real processes (mpiexec).

The multi-process tests start `mpiexec -n W python tests/test_distributed.py <scenario> <dir>`
(the bottom of this file is the worker); each rank writes what it saw to <dir>, and the test
compares that with references computed here, in one process: closed forms for the collectives,
and for DistributedDataParallel the single-process accumulation of the ranks' micro-batches in
rank order (g = g0; g = g + g1; ...; then the scale op with c = 1/W). On the stub backend the
ranks talk MPI; on CUDA (one GPU per rank) NCCL. CI installs mpi4py and an MPI (the test extra):
a missing mpiexec is a failure here, not a skip.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
B, K_MICRO = 3, 2          # rows per micro-batch (odd), micro-batches per rank in step 2


# ---------------------------------------------------------------------------------- shared
def build_model():
    from torchlean import nn
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(3 * 5 * 5, 4), nn.Tanh(), nn.Linear(4, 3))


def batches(world: int):
    """X[step, rank, micro] of shape (B, 1, 5, 5) and integer labels Y[step, rank, micro]."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(2, world, K_MICRO, B, 1, 5, 5))
    Y = rng.integers(0, 3, size=(2, world, K_MICRO, B))
    return X, Y


def set_exact(flag: bool) -> None:
    """Exact mode where this build has it (stub and CUDA then agree bit for bit), else
    deterministic mode; both make DistributedDataParallel reduce in rank order."""
    import torchlean as tl
    getattr(tl, "set_exact", tl.set_deterministic)(flag)
    if not flag:
        tl.set_deterministic(False)


def micro_loss(model, s, x, y):
    from torchlean.nn import functional as F
    return F.cross_entropy(model(s.tensor(x)), y)


# ---------------------------------------------------------------------------------- workers
def worker_collectives(out: Path) -> None:
    import torchlean as tl
    import torchlean.distributed as dist
    dist.init()
    r, W = dist.rank(), dist.world_size()
    res = {"world": np.array(W)}
    a = tl.AnyBuffer.from_numpy(np.arange(7) * (r + 1) + 0.25)
    dist.all_reduce(a)
    res["sum"] = a.to_numpy()
    b = tl.Buffer.from_numpy(np.linspace(-1, 1, 5) * (r + 2))
    dist.all_reduce(b, op="avg")
    res["avg"] = b.to_numpy()
    one = tl.AnyBuffer.from_numpy(np.array([r + 0.5]))
    dist.all_reduce(one)
    res["one"] = one.to_numpy()
    s = tl.Session()
    t = s.tensor(np.full((2, 3), float(r)))
    dist.broadcast(t, src=W - 1)
    res["bcast"] = t.numpy()
    c = tl.AnyBuffer.from_numpy(np.ones(3 + r))
    try:
        dist.all_reduce(c)
        res["mismatch"] = np.array("no error")
    except dist.DistributedError as e:
        res["mismatch"] = np.array(str(e))
    try:
        dist.all_reduce(a, op="max")
    except ValueError as e:
        res["bad_op"] = np.array(str(e))
    dist.barrier()
    np.savez(out / f"rank{r}.npz", **res)
    dist.destroy()


def worker_train(out: Path, exact: bool) -> None:
    """Two Adam steps of the model under DistributedDataParallel; step 1 one micro-batch per
    rank, step 2 K_MICRO micro-batches per rank (all but the last under no_sync)."""
    import torchlean.distributed as dist
    from torchlean import optim
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session, manual_seed
    dist.init()
    set_exact(exact)
    r, W = dist.rank(), dist.world_size()
    manual_seed(100 + r)                 # every rank starts different: the wrap must broadcast
    model = build_model()
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.0004)   # several buckets
    res = {"buckets": np.array(len(ddp._buckets))}
    for k, p in enumerate(model.parameters()):
        res[f"init{k}"] = p.numpy()
    opt = optim.Adam(model.parameters(), lr=0.01)
    X, Y = batches(W)
    s = Session()
    opt.zero_grad()
    micro_loss(ddp, s, X[0, r, 0], Y[0, r, 0]).backward()
    s.step()
    for k, p in enumerate(model.parameters()):
        res[f"grad1_{k}"] = p.grad.numpy()
    opt.step()
    opt.zero_grad()
    with ddp.no_sync():
        for m in range(K_MICRO - 1):
            micro_loss(ddp, s, X[1, r, m], Y[1, r, m]).backward()
            s.step()
    for k, p in enumerate(model.parameters()):   # exact mode: set aside, .grad is None
        res[f"local_{k}"] = np.array("none") if p.grad is None else p.grad.numpy()
    micro_loss(ddp, s, X[1, r, K_MICRO - 1], Y[1, r, K_MICRO - 1]).backward()
    s.step()
    for k, p in enumerate(model.parameters()):
        res[f"grad2_{k}"] = p.grad.numpy()
    opt.step()
    for k, p in enumerate(model.parameters()):
        res[f"final{k}"] = p.numpy()
    np.savez(out / f"rank{r}.npz", **res)
    dist.destroy()


def rank_vectors(world: int) -> np.ndarray:
    """x_r (7, 143) per rank: the gradient of sum(w * x_r) with respect to w is x_r exactly."""
    return np.random.default_rng(11).normal(size=(world, 7, 143)).astype(np.float32)


def worker_grad_sum(out: Path) -> None:
    """One exact DistributedDataParallel step whose local gradients are known exactly."""
    import torchlean as tl
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session
    dist.init()
    tl.set_deterministic(True)
    r, W = dist.rank(), dist.world_size()

    class Dot(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(np.ones((7, 143)))

        def forward(self, s, x):
            return (s.use(self.w) * s.tensor(x)).sum()

    model = Dot()
    ddp = DistributedDataParallel(model)
    s = Session()
    ddp(s, rank_vectors(W)[r]).backward()
    np.savez(out / f"rank{r}.npz", grad=model.w.grad)
    dist.destroy()


def worker_lose_rank1(out: Path, sig: int) -> None:
    """Rank 1 stops (SIGSTOP: a hung peer) or dies (SIGKILL) between two all_reduces; rank 0
    must fail within its timeout, writing the DistributedError's message to error0.txt."""
    import torchlean as tl
    import torchlean.distributed as dist
    dist.init()
    b = tl.AnyBuffer.from_numpy(np.ones(4))
    dist.all_reduce(b)
    if dist.rank() == 1:
        os.kill(os.getpid(), sig)
    try:
        dist.all_reduce(b)
    except dist.DistributedError as e:
        (out / f"error{dist.rank()}.txt").write_text(str(e))
        raise


# ---------------------------------------------------------------------------------- launching
def mpiexec() -> str:
    """mpiexec next to this Python first (the mpich wheel puts it there, or in the user
    scripts folder for a --user install), then PATH."""
    import sysconfig
    dirs = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    try:
        dirs.append(Path(sysconfig.get_path("scripts", f"{os.name}_user")))
    except KeyError:
        pass
    for here in dirs:
        for name in ("mpiexec", "mpirun"):
            if (here / name).is_file():
                return str(here / name)
    found = shutil.which("mpiexec") or shutil.which("mpirun")
    if found is None:
        import pytest
        pytest.fail("mpiexec not found next to sys.executable or on PATH: install the test "
                    "extra (pip install -e '.[test]' brings mpi4py and mpich)")
    return found


# Open MPI's mpiexec refuses to start as root without these (containers and GPU machines often
# run as root); MPICH ignores them
MPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def launch(world: int, scenario: str, out: Path, timeout_s: float = 60.0,
           extra_env=None) -> subprocess.CompletedProcess:
    return launch_script(world, Path(__file__).resolve(), out, timeout_s, extra_env,
                         args=(scenario,))


def launch_script(world: int, script: Path, out: Path, timeout_s: float = 60.0,
                  extra_env=None, args=()) -> subprocess.CompletedProcess:
    """`mpiexec -n world python script [args] out`: every rank with PYTHONPATH at the repo, the
    collective deadline, NVLink multicast off, Open MPI allowed as root."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TORCHLEAN_DIST_TIMEOUT_S", "30")
    env["NCCL_NVLS_ENABLE"] = "0"
    env.update(MPI_AS_ROOT)
    env.update(extra_env or {})
    return run_group([mpiexec(), "-n", str(world), sys.executable, str(script), *args, str(out)],
                     env, timeout_s)


def run_group(cmd, env, timeout_s: float) -> subprocess.CompletedProcess:
    """Run cmd in its own process group; past timeout_s kill the whole group (launcher and
    ranks, a stopped one included) and fail."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(ROOT), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not end within {timeout_s} s (killed):\n"
                    f"{out[-3000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def rank_backend(world: int) -> dict:
    """The environment the ranks run with. On CUDA each rank needs a GPU of its own (NCCL refuses
    two ranks on one device): with fewer GPUs than ranks the ranks run the same scenario on the
    stub (the MPI path), so a one-GPU run still checks it instead of skipping; the NCCL path is
    covered by the `multigpu` tests on a machine with enough GPUs."""
    import torchlean as tl
    if tl.backend() != "cuda" or visible_gpus() >= world:
        return {}
    return {"TORCHLEAN_BACKEND": "stub"}


def visible_gpus() -> int:
    import torchlean as tl
    if tl.backend() != "cuda":
        return 0
    from torchlean._loader import ffi, lib
    n = ffi.new("int64_t *")
    lib.tl_device_count(n)
    return int(n[0])


def run_ok(world: int, scenario: str, out: Path, extra_env=None, **kw) -> list[dict]:
    env = {**rank_backend(world), **(extra_env or {})}
    res = launch(world, scenario, out, extra_env=env, **kw)
    assert res.returncode == 0, (f"mpiexec -n {world} {scenario} failed ({res.returncode}):\n"
                                 f"{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return [dict(np.load(out / f"rank{r}.npz")) for r in range(world)]


# ---------------------------------------------------------------------------------- references
def single_process_reference(world: int, exact: bool) -> dict:
    """The same two Adam steps in this one process: each step accumulates the ranks'
    micro-batch gradients in global micro-batch order (rank r's j-th is m = j * W + r) and
    scales by 1/W (torchlean.ops.scale). local{r}_k: rank r's own sum after its first K_MICRO-1
    micro-batches (what a rank holds under no_sync in default mode)."""
    from torchlean import optim, ops
    from torchlean.session import Session, manual_seed
    set_exact(exact)
    try:
        manual_seed(100)
        model = build_model()
        params = model.parameters()
        ref = {f"init{k}": p.numpy() for k, p in enumerate(params)}
        opt = optim.Adam(params, lr=0.01)
        X, Y = batches(world)
        s = Session()

        def scale_grads():
            for p in params:
                g = ops.scale(p.grad_buf, c=1.0 / world)
                p.grad_buf.release()
                p.grad_buf = g

        opt.zero_grad()
        for r in range(world):          # backward() accumulates: g = g0; g = g + g1; ...
            micro_loss(model, s, X[0, r, 0], Y[0, r, 0]).backward()
            s.step()
        scale_grads()
        ref.update({f"grad1_{k}": p.grad.numpy() for k, p in enumerate(params)})
        opt.step()
        for r in range(world):
            opt.zero_grad()
            for m in range(K_MICRO - 1):
                micro_loss(model, s, X[1, r, m], Y[1, r, m]).backward()
                s.step()
            ref.update({f"local{r}_{k}": p.grad.numpy() for k, p in enumerate(params)})
        opt.zero_grad()
        for m in range(K_MICRO):
            for r in range(world):
                micro_loss(model, s, X[1, r, m], Y[1, r, m]).backward()
                s.step()
        scale_grads()
        ref.update({f"grad2_{k}": p.grad.numpy() for k, p in enumerate(params)})
        opt.step()
        ref.update({f"final{k}": p.numpy() for k, p in enumerate(params)})
        return ref
    finally:
        set_exact(False)


def _compare(got: dict, ref: dict, keys, exact: bool, who: str):
    for key in keys:
        if exact:
            assert np.array_equal(got[key], ref[key]), (
                f"{who} {key}: not bitwise equal, max diff {np.abs(got[key] - ref[key]).max()}")
        else:
            np.testing.assert_allclose(got[key], ref[key], rtol=1e-5, atol=1e-6,
                                       err_msg=f"{who} {key}")


NPARAMS = 6


def _check_training(ranks: list[dict], world: int, exact: bool):
    import torchlean as tl
    ref = single_process_reference(world, exact)
    # Adam's first steps move each weight by about lr * sign(gradient): on CUDA's default
    # (atomic) reductions a gradient at rounding level may flip sign, so there the default
    # mode compares gradients only
    whats = ("init", "grad1_", "grad2_") + (("final",) if exact or tl.backend() == "stub" else ())
    keys = [f"{what}{k}" for what in whats for k in range(NPARAMS)]
    for r, got in enumerate(ranks):
        assert int(got["buckets"]) >= 3
        _compare(got, ref, keys, exact, f"rank {r}")
        # inside no_sync nothing was exchanged: each rank holds its own local gradient
        # (exact mode sets each micro-batch's aside until the reduction: .grad is None)
        for k in range(NPARAMS):
            if exact:
                assert str(got[f"local_{k}"]) == "none"
            else:
                _compare({"g": got[f"local_{k}"]}, {"g": ref[f"local{r}_{k}"]}, ["g"], exact,
                         f"rank {r} no_sync local gradient {k}")
    if world > 1:   # the local gradients really differed, so the reduction did something
        assert not np.array_equal(ref["local0_0"], ref["local1_0"])


# ---------------------------------------------------------------------------------- tests
def test_collectives_two_processes(tmp_path):
    ranks = run_ok(2, "collectives", tmp_path)
    for r, got in enumerate(ranks):
        assert int(got["world"]) == 2
        np.testing.assert_array_equal(got["sum"], (np.arange(7) * 1 + 0.25 + np.arange(7) * 2
                                                   + 0.25).astype(np.float32))
        np.testing.assert_allclose(got["avg"], np.linspace(-1, 1, 5) * 2.5, rtol=1e-6)
        np.testing.assert_array_equal(got["one"], [2.0])
        np.testing.assert_array_equal(got["bcast"], np.full((2, 3), 1.0))
        msg = str(got["mismatch"])
        assert f"rank {r}" in msg and "all_reduce" in msg and "[3, 4]" in msg, msg
        assert "'sum' or 'avg'" in str(got["bad_op"])


def test_ddp_exact_equals_single_process_accumulation_bitwise(tmp_path):
    """Deterministic mode: parameter broadcast, gradients of a 1-micro-batch step, no_sync
    local gradients, accumulated gradients and the Adam updates all equal the single-process
    reference bit for bit, on 2 ranks."""
    _check_training(run_ok(2, "train_exact", tmp_path), 2, exact=True)


def test_ddp_exact_three_ranks_sums_in_rank_order(tmp_path):
    """With 3 ranks float addition is no longer order-free: ((g0 + g1) + g2) is required."""
    _check_training(run_ok(3, "train_exact", tmp_path, timeout_s=90), 3, exact=True)


def test_ddp_exact_four_ranks_equals_single_process_accumulation(tmp_path):
    """Four ranks under mpiexec (the stub's MPI; NCCL where 4 GPUs are visible): K = 1 and
    K = 2 steps equal one process accumulating the 4 (resp. 8) micro-batches, bit for bit."""
    _check_training(run_ok(4, "train_exact", tmp_path, timeout_s=180), 4, exact=True)


@pytest.mark.cuda
@pytest.mark.multigpu(4)
def test_ddp_exact_four_gpus_equals_single_process_accumulation(tmp_path):
    """Four GPUs, one rank each (NCCL all-gather, rank-order sum): the exact-mode step equals one
    process accumulating the four micro-batches in rank order, bit for bit."""
    assert visible_gpus() >= 4, "needs 4 GPUs"
    _check_training(run_ok(4, "train_exact", tmp_path, timeout_s=180), 4, exact=True)


def test_ddp_default_mode_matches_single_process(tmp_path):
    _check_training(run_ok(2, "train_default", tmp_path), 2, exact=False)


def _lose_rank1(tmp_path, scenario: str):
    t0 = time.monotonic()
    res = launch(2, scenario, tmp_path, timeout_s=60,
                 extra_env={**rank_backend(2), "TORCHLEAN_DIST_TIMEOUT_S": "3"})
    elapsed = time.monotonic() - t0
    assert res.returncode != 0, res.stdout + res.stderr
    assert elapsed < 45, f"the job took {elapsed:.1f} s to end"
    return tmp_path / "error0.txt", res


def _check_error(err: Path, res) -> None:
    assert err.exists(), f"rank 0 raised no DistributedError:\n{res.stdout}\n{res.stderr}"
    msg = err.read_text()
    assert "rank 0" in msg and "all_reduce" in msg and "within 3 s" in msg, msg


def test_stalled_rank_raises_within_timeout(tmp_path):
    """Rank 1 freezes (SIGSTOP) mid-job; rank 0's all_reduce raises a DistributedError after
    TORCHLEAN_DIST_TIMEOUT_S (3 s) naming the rank and the collective, then aborts the job
    (which also ends the frozen rank) instead of hanging."""
    err, res = _lose_rank1(tmp_path, "stall")
    _check_error(err, res)


def test_killed_rank_ends_the_job(tmp_path):
    """Rank 1 is killed (SIGKILL): the job ends with an error well within the timeout, either
    because the launcher tears it down or because rank 0's collective times out."""
    err, res = _lose_rank1(tmp_path, "kill")
    if err.exists():
        _check_error(err, res)


def test_exact_reduction_is_the_rank_order_float32_sum(tmp_path):
    """Each rank's gradient is x_r exactly; the exact reduction must give, bit for bit,
    float32(1/W) * (((x_0 + x_1) + x_2) ...) in float32 (3 ranks on the stub, where the
    grouping matters; 2 GPUs on CUDA)."""
    import torchlean as tl
    world = 3 if tl.backend() == "stub" else 2
    ranks = run_ok(world, "grad_sum", tmp_path, timeout_s=90)
    x = rank_vectors(world)
    acc = x[0].copy()
    for r in range(1, world):
        acc = acc + x[r]
    want = np.float32(1.0 / world) * acc
    other = np.float32(1.0 / world) * (x[0] + (x[1] + x[2])) if world == 3 else None
    for r, got in enumerate(ranks):
        assert got["grad"].dtype == np.float32
        assert np.array_equal(got["grad"], want), f"rank {r}"
    if other is not None:   # the test can tell the orders apart
        assert not np.array_equal(other, want)


@pytest.mark.cuda
@pytest.mark.multigpu(2)
def test_exact_cuda_run_equals_stub_run(tmp_path):
    """GPU machine: the 2-rank exact step on CUDA (NCCL all-gather, rank-order sum) equals the
    2-rank stub run (MPI) bit for bit: initial weights, gradients, no_sync gradients, updates."""
    assert visible_gpus() >= 2, "the multigpu tests need 2 GPUs"
    (tmp_path / "cuda").mkdir()
    (tmp_path / "stub").mkdir()
    cuda = run_ok(2, "train_exact", tmp_path / "cuda")
    stub = run_ok(2, "train_exact", tmp_path / "stub", extra_env={"TORCHLEAN_BACKEND": "stub"})
    for r in range(2):
        for key in cuda[r]:
            assert np.array_equal(cuda[r][key], stub[r][key]), f"rank {r} {key}"


def test_example_trains_data_parallel(tmp_path):
    """examples/mlp_digits.py under mpiexec -n 2 with --accumulate 2 takes the same global
    batches as one process with --accumulate 4 (4 micro-batches of 16 either way): the weights
    after 12 SGD steps agree to float32 rounding of the different summation grouping."""
    from safetensors.numpy import load_file
    ex = str(ROOT / "examples" / "mlp_digits.py")
    args = ["--steps", "12", "--no-progress", "--save"]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", **MPI_AS_ROOT, **rank_backend(2))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.setdefault("TORCHLEAN_DIST_TIMEOUT_S", "30")
    dp = run_group([mpiexec(), "-n", "2", sys.executable, ex, "--accumulate", "2", *args,
                    str(tmp_path / "dp.safetensors")], env, 120)
    assert dp.returncode == 0, dp.stdout[-2000:] + dp.stderr[-2000:]
    one = subprocess.run([sys.executable, ex, "--accumulate", "4", *args,
                          str(tmp_path / "one.safetensors")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-2000:]
    a, b = load_file(str(tmp_path / "dp.safetensors")), load_file(str(tmp_path / "one.safetensors"))
    assert sorted(a) == sorted(b) and len(a) == 4
    for k in a:
        np.testing.assert_allclose(a[k], b[k], rtol=0, atol=2e-6, err_msg=k)


# in-process: launcher detection, the timeout variable, library lookup, a world of one ------
def test_launch_detection_reads_each_launcher():
    from torchlean.distributed.launch import detect
    assert detect({}) == detect({"UNRELATED": "1"})
    assert (detect({}).rank, detect({}).world_size, detect({}).launcher) == (0, 1, "none")
    i = detect({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1", "RANK": "0", "WORLD_SIZE": "1"})
    assert (i.rank, i.world_size, i.local_rank) == (3, 8, 1) and "Open MPI" in i.launcher
    i = detect({"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"})
    assert (i.rank, i.world_size, i.local_rank) == (1, 2, 1)
    i = detect({"SLURM_PROCID": "5", "SLURM_NTASKS": "6", "SLURM_LOCALID": "2"})
    assert (i.rank, i.world_size, i.local_rank, i.launcher) == (5, 6, 2, "srun")
    i = detect({"RANK": "2", "WORLD_SIZE": "4"})
    assert (i.rank, i.world_size, i.local_rank, i.launcher) == (2, 4, None, "torchrun")


def test_launch_detection_rejects_nonsense():
    from torchlean.distributed.launch import detect
    with pytest.raises(ValueError, match="RANK='x'"):
        detect({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="SLURM_PROCID=4 and SLURM_NTASKS=4"):
        detect({"SLURM_PROCID": "4", "SLURM_NTASKS": "4"})


def test_timeout_variable(monkeypatch):
    from torchlean.distributed.work import DEFAULT_TIMEOUT_S, timeout_from_env
    monkeypatch.delenv("TORCHLEAN_DIST_TIMEOUT_S", raising=False)
    assert timeout_from_env() == DEFAULT_TIMEOUT_S
    monkeypatch.setenv("TORCHLEAN_DIST_TIMEOUT_S", "2.5")
    assert timeout_from_env() == 2.5
    for bad in ("0", "-1", "soon", "inf", "nan"):
        monkeypatch.setenv("TORCHLEAN_DIST_TIMEOUT_S", bad)
        with pytest.raises(ValueError, match="TORCHLEAN_DIST_TIMEOUT_S"):
            timeout_from_env()


def test_poll_gives_up_at_the_deadline():
    from torchlean.distributed import DistributedError
    from torchlean.distributed.work import poll
    aborted = []
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match=r"rank 4: bucket 2 did not complete within 0.2 s"):
        poll(lambda: False, rank=4, what="bucket 2", timeout_s=0.2,
             on_timeout=lambda: aborted.append(1))
    assert aborted == [1] and 0.2 <= time.monotonic() - t0 < 5


def test_nccl_lookup_names_what_it_tried(monkeypatch, tmp_path):
    from torchlean.distributed import DistributedError
    from torchlean.distributed import nccl_comm
    missing = tmp_path / "libnccl_missing.so.2"
    monkeypatch.setenv("TORCHLEAN_NCCL_LIB", str(missing))
    assert nccl_comm.nccl_candidates()[0] == str(missing)
    monkeypatch.setattr(nccl_comm, "nccl_candidates", lambda: [str(missing)])
    with pytest.raises(DistributedError, match="libnccl_missing.so.2 \\(missing\\)"):
        nccl_comm.load_nccl()


def test_world_of_one_needs_no_mpi():
    """A plain process is rank 0 of 1: collectives are the identity and DistributedDataParallel
    gives the plain gradient (scaled by 1/1)."""
    import torchlean as tl
    import torchlean.distributed as dist
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session, manual_seed
    for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS", "WORLD_SIZE"):
        assert v not in os.environ
    dist.init()
    try:
        assert (dist.rank(), dist.world_size(), dist.local_rank()) == (0, 1, 0)
        a = tl.AnyBuffer.from_numpy(np.array([1.5, -2.0, 3.25]))
        dist.all_reduce(a, op="avg")
        dist.broadcast(a, 0)
        np.testing.assert_array_equal(a.to_numpy(), [1.5, -2.0, 3.25])
        X, Y = batches(1)
        manual_seed(3)
        plain = build_model()
        manual_seed(3)
        wrapped = build_model()
        ddp = DistributedDataParallel(wrapped)
        s = Session()
        micro_loss(plain, s, X[0, 0, 0], Y[0, 0, 0]).backward()
        micro_loss(ddp, s, X[0, 0, 0], Y[0, 0, 0]).backward()
        s.step()
        for p, q in zip(plain.parameters(), wrapped.parameters()):
            np.testing.assert_array_equal(p.grad, q.grad)
        ddp.remove_hooks()
    finally:
        dist.destroy()
    assert not dist.is_initialized()


def test_data_parallel_step_refuses_capture():
    """graph_step's warm-up and capture (STATE.strict) refuse a training forward through
    DistributedDataParallel, whose reductions the host starts at every step (a replay would
    skip them); evaluation and the eager step outside it are unaffected."""
    import torchlean.distributed as dist
    from torchlean import _capture
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session
    dist.init()
    try:
        ddp = DistributedDataParallel(build_model())
        s = Session()
        X, Y = batches(1)
        _capture.STATE.strict = True
        try:
            with pytest.raises(RuntimeError, match="graph_step: DistributedDataParallel"):
                micro_loss(ddp, s, X[0, 0, 0], Y[0, 0, 0])
            ddp.eval()
            out = ddp(s.tensor(X[0, 0, 0]))            # no reduction in evaluation
            ddp.train()
        finally:
            _capture.STATE.strict = False
        loss = micro_loss(ddp, s, X[0, 0, 0], Y[0, 0, 0])
        loss.backward()
        assert np.isfinite(loss.item()) and out.shape[0] == X.shape[3]
        ddp.remove_hooks()
    finally:
        dist.destroy()


def test_buckets_follow_backward_order_and_caps():
    """Buckets hold the parameters in reverse registration order (the order backward makes
    their gradients final); none exceeds its cap unless it holds a single parameter, the first
    included (no 1 MB first bucket: a model under the cap is one bucket)."""
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    model = nn.Sequential(nn.Linear(300, 500), nn.Linear(500, 700), nn.Linear(700, 9),
                          nn.Linear(9, 3))
    dist.init()
    try:
        for cap_mb in (0.5, 2.0, 25.0):
            ddp = DistributedDataParallel(model, bucket_cap_mb=cap_mb)
            order = [p for b in ddp._buckets for p in b.params]
            assert [id(p) for p in order] == [id(p) for p in reversed(model.parameters())]
            for i, b in enumerate(ddp._buckets):
                cap = cap_mb
                assert b.nbytes == sum(4 * p.numel() for p in b.params)
                assert b.nbytes <= cap * 1e6 or len(b.params) == 1, (cap_mb, i, b.nbytes)
                if i + 1 < len(ddp._buckets):   # a bucket closes only when the next would not fit
                    nxt = ddp._buckets[i + 1].params[0]
                    assert b.nbytes + 4 * nxt.numel() > cap * 1e6
            ddp.remove_hooks()
        # 4 * (150500 + 350700 + 6309 + 30) bytes = 2.03 MB: one bucket under 25 MB, two under 2
        assert len(DistributedDataParallel(model, bucket_cap_mb=25.0)._buckets) == 1
        assert len(DistributedDataParallel(model, bucket_cap_mb=2.0)._buckets) == 2
    finally:
        dist.destroy()


def test_first_bucket_is_capped_where_traffic_crosses_a_network(monkeypatch):
    """Within one host every bucket is up to bucket_cap_mb; where the ranks span hosts, or NCCL's
    peer-to-peer and shared-memory transports are off (the emulated network), the first bucket
    (the last layers) is capped at 1 MB, as PyTorch's, so its reduction starts early."""
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    model = nn.Sequential(nn.Linear(300, 500), nn.Linear(500, 700), nn.Linear(700, 9),
                          nn.Linear(9, 3))
    dist.init()
    try:
        def sizes():
            ddp = DistributedDataParallel(model, bucket_cap_mb=25.0)
            out = [b.nbytes for b in ddp._buckets]
            ddp.remove_hooks()
            return out
        monkeypatch.delenv("NCCL_P2P_DISABLE", raising=False)
        monkeypatch.delenv("NCCL_SHM_DISABLE", raising=False)
        assert not dist.crosses_network()
        assert sizes() == [4 * 507539]                     # one bucket: 2.03 MB under 25 MB
        # parameters in reverse order: Linear(9, 3)'s 30, Linear(700, 9)'s 6309, then
        # Linear(500, 700)'s bias (700) fit under 1 MB; its weight (1.4 MB) opens the second
        first = [4 * (30 + 6309 + 700), 4 * (350000 + 150500)]
        monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
        assert not dist.crosses_network()                  # one transport off is not enough
        monkeypatch.setenv("NCCL_SHM_DISABLE", "1")
        assert dist.crosses_network() and sizes() == first
        monkeypatch.delenv("NCCL_P2P_DISABLE")
        monkeypatch.setitem(dist._state, "hosts", 2)      # ranks on two hosts
        assert dist.crosses_network() and sizes() == first
    finally:
        dist.destroy()


def test_grad_hooks_fire_when_gradients_are_final():
    """The hooks DistributedDataParallel relies on: each used parameter's hook runs once per
    backward, after its gradient was added to grad_buf (so it sees the accumulated sum), last
    layer first, and before the backward-end hook; remove() unregisters."""
    from torchlean import nn
    from torchlean.session import Session, register_backward_end_hook
    model = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2))
    unused = nn.Linear(2, 2)
    names = {id(p): n for n, p in model.named_parameters()}
    seen = []
    hooks = [p.register_post_accumulate_grad_hook(lambda p: seen.append((names[id(p)], p.grad)))
             for p in model.parameters()]
    hooks += [p.register_post_accumulate_grad_hook(lambda p: seen.append(("unused", None)))
              for p in unused.parameters()]
    hooks.append(register_backward_end_hook(lambda: seen.append(("end", None))))
    try:
        x = np.random.default_rng(0).normal(size=(3, 4))
        s = Session()
        model(s.tensor(x)).sum().backward()
        s.step()
        first = {n: g for n, g in seen if n != "end"}
        order = [n for n, _ in seen]
        assert sorted(order[:2]) == ["2.bias", "2.weight"]
        assert sorted(order[2:4]) == ["0.bias", "0.weight"] and order[4:] == ["end"]
        seen.clear()
        model(s.tensor(x)).sum().backward()     # accumulates: the hook sees twice the gradient
        s.step()
        for n, g in seen[:-1]:
            np.testing.assert_allclose(g, 2 * first[n], rtol=1e-6)
        for h in hooks:
            h.remove()
        seen.clear()
        model(s.tensor(x)).sum().backward()
        s.step()
        assert seen == []
    finally:
        for h in hooks:
            h.remove()


def test_collective_before_init_is_a_clear_error():
    import torchlean as tl
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    assert not dist.is_initialized()
    with pytest.raises(dist.DistributedError, match="init"):
        dist.all_reduce(tl.AnyBuffer.from_numpy(np.ones(2)))
    with pytest.raises(dist.DistributedError, match="init"):
        DistributedDataParallel(nn.Linear(2, 2))


if __name__ == "__main__":
    scenario, out = sys.argv[1], Path(sys.argv[2])
    {"collectives": lambda: worker_collectives(out),
     "train_exact": lambda: worker_train(out, exact=True),
     "train_default": lambda: worker_train(out, exact=False),
     "grad_sum": lambda: worker_grad_sum(out),
     "stall": lambda: worker_lose_rank1(out, signal.SIGSTOP),
     "kill": lambda: worker_lose_rank1(out, signal.SIGKILL)}[scenario]()
