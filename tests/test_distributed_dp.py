"""Data parallel equals accumulation with dropout and BatchNorm; ranks that disagree fail fast.

Each multi-process test starts `mpiexec -n W python tests/test_distributed_dp.py <scenario>
<dir>` (the workers are at the bottom); the ranks write what they saw to <dir> and the test
compares it with references computed here in one process: the same micro-batches accumulated
in rank order for DistributedDataParallel, float64 NumPy for SyncBatchNorm. Run under 2 and 3
processes (with 3, float sums depend on their order).
"""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import test_distributed as td

ROOT = Path(__file__).resolve().parent.parent
B = 5                      # rows per micro-batch (odd)
KS = (1, 2, 3)             # micro-batches per rank in each step
SEED = 7


# ---------------------------------------------------------------------------------- shared
def build_model():
    from torchlean import nn
    return nn.Sequential(nn.Conv2d(1, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU(),
                         nn.Flatten(), nn.Dropout(0.3), nn.Linear(3 * 4 * 4, 5),
                         nn.BatchNorm1d(5, momentum=None), nn.Tanh(), nn.Linear(5, 3))


def data(world: int):
    """X[step][m] (B, 1, 4, 4) and labels Y[step][m] for global micro-batch m = j * W + r."""
    rng = np.random.default_rng(3)
    X = [rng.normal(size=(world * k, B, 1, 4, 4)) for k in KS]
    Y = [rng.integers(0, 3, size=(world * k, B)) for k in KS]
    return X, Y


def state(model) -> dict:
    return {k: v.copy() for k, v in model.state_dict().items()}


def note(path: Path, text: str) -> None:
    """Write a rank's report whole or not at all: a rank may be ended (MPI_Abort) mid-write."""
    tmp = path.with_suffix(".part")
    tmp.write_text(text)
    os.replace(tmp, path)


def loss_of(model, s, x, y):
    from torchlean.nn import functional as F
    return F.cross_entropy(model(s.tensor(x)), y)


# ---------------------------------------------------------------------------------- workers
def worker_equal(out: Path) -> None:
    """Three SGD steps (K = 1, 2, 3 micro-batches per rank) of the dropout + BatchNorm model
    under DistributedDataParallel, which keys the dropout draws itself (no micro_batch scope
    here), once per reduce_op. Every rank starts from other weights and buffers: the wrap must
    broadcast rank 0's."""
    import torchlean.distributed as dist
    from torchlean import optim
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session, manual_seed
    dist.init()
    td.set_exact(True)
    r, W = dist.rank(), dist.world_size()
    res = {}
    for op in ("sum", "avg"):
        manual_seed(100 + r)
        model = build_model()
        model[1].running_mean.set(np.full(3, float(r)))
        ddp = DistributedDataParallel(model, bucket_cap_mb=0.0002, reduce_op=op)
        res.update({f"{op}.init.{k}": v for k, v in state(model).items()})
        manual_seed(SEED)
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        X, Y = data(W)
        s = Session()
        for t, k in enumerate(KS):
            opt.zero_grad()
            for j in range(k):
                m = j * W + r
                with contextlib.nullcontext() if j == k - 1 else ddp.no_sync():
                    scale = 1.0 / (W * k) if op == "sum" else 1.0 / k
                    (loss_of(ddp, s, X[t][m], Y[t][m]) * scale).backward()
                s.step()
            res.update({f"{op}.grad{t}.{i}": p.grad.numpy() for i, p in enumerate(model.parameters())})
            opt.step()
        res.update({f"{op}.final.{k}": v for k, v in state(model).items()})
        ddp.remove_hooks()
    np.savez(out / f"rank{r}.npz", **res)
    dist.destroy()


def train_steps(ddp, opt, steps, r: int, W: int) -> None:
    """Steps `steps` of the KS schedule: losses scaled by 1/(W*K), reduce_op="sum"."""
    from torchlean.session import Session
    X, Y = data(W)
    s = Session()
    for t in steps:
        k = KS[t]
        opt.zero_grad()
        for j in range(k):
            m = j * W + r
            with contextlib.nullcontext() if j == k - 1 else ddp.no_sync():
                (loss_of(ddp, s, X[t][m], Y[t][m]) * (1.0 / (W * k))).backward()
            s.step()
        opt.step()


def worker_resume(out: Path) -> None:
    """The uninterrupted run; then the same run checkpointed after step 1 (every rank calls
    the writes: rank 0 alone writes), every rank loading the checkpoint into a model and
    optimizer built from other weights, and going on. DistributedDataParallel keys the
    dropout draws itself: its `steps` comes back from the checkpoint."""
    import pickle
    import torchlean.distributed as dist
    from torchlean import nn, optim, random
    from torchlean.nn.checkpoint import write_atomic
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import manual_seed
    dist.init()
    td.set_exact(True)
    r, W = dist.rank(), dist.world_size()

    def fresh(seed):
        manual_seed(seed)
        model = build_model()
        ddp = DistributedDataParallel(model, bucket_cap_mb=0.0002, reduce_op="sum")
        manual_seed(SEED)
        return model, ddp, optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    model, ddp, opt = fresh(100)
    train_steps(ddp, opt, range(len(KS)), r, W)
    res = {f"full.{k}": v for k, v in state(model).items()}
    ddp.remove_hooks()

    model, ddp, opt = fresh(100)
    train_steps(ddp, opt, range(1), r, W)
    ck = out / "step1.ckpt"
    write_atomic(ck, pickle.dumps({"model": model.state_dict(), "optimizer": opt.state_dict(),
                                   "rng": random.get_rng_state(), "steps": ddp.steps}))
    model.save(out / f"own{r}.safetensors")
    nn.save_file({"w": model[0].weight.numpy()}, out / f"file{r}.safetensors")
    dist.barrier()      # rank 0's write is complete before any rank reads it
    ddp.remove_hooks()
    model, ddp, opt = fresh(200 + r)
    saved = pickle.loads(ck.read_bytes())
    model.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    random.set_rng_state(saved["rng"])
    ddp.steps = saved["steps"]
    train_steps(ddp, opt, range(1, len(KS)), r, W)
    res.update({f"resumed.{k}": v for k, v in state(model).items()})
    res["steps"] = np.array(ddp.steps)
    np.savez(out / f"rank{r}.npz", **res)
    dist.destroy()


def reference(world: int, op: str) -> dict:
    """One process accumulating the W * K micro-batches of each step in global order m (so
    BatchNorm folds them in that order, and .grad = .grad + g adds them in that order), each
    under random.micro_batch(step, m). sum: each loss scaled by 1/(W*K), as a one-process run
    with W*K-way accumulation scales it. avg: each scaled by 1/K, the sum then by 1/W."""
    from torchlean import optim, ops, random
    from torchlean.session import Session, manual_seed
    td.set_exact(True)
    try:
        manual_seed(100)
        model = build_model()
        params = model.parameters()
        ref = {f"{op}.init.{k}": v for k, v in state(model).items()}
        manual_seed(SEED)
        opt = optim.SGD(params, lr=0.1, momentum=0.9)
        X, Y = data(world)
        for t, k in enumerate(KS):
            s = Session()
            opt.zero_grad()
            for m in range(world * k):
                with random.micro_batch(t, m):
                    scale = 1.0 / (world * k) if op == "sum" else 1.0 / k
                    (loss_of(model, s, X[t][m], Y[t][m]) * scale).backward()
            if op == "avg":
                for p in params:
                    p.grad_buf = ops.scale(p.grad_buf, c=1.0 / world)
            ref.update({f"{op}.grad{t}.{i}": p.grad.numpy() for i, p in enumerate(params)})
            opt.step()
            s.step()
        ref.update({f"{op}.final.{k}": v for k, v in state(model).items()})
        return ref
    finally:
        td.set_exact(False)


def worker_checks(out: Path) -> None:
    """Mismatched models raise on every rank at wrap time; then SyncBatchNorm on ranks holding
    batches of different sizes."""
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session, manual_seed
    dist.init()
    r, W = dist.rank(), dist.world_size()
    last = r == W - 1
    res = {}

    def attempt(name, model, **kw):
        try:
            DistributedDataParallel(model, **kw).remove_hooks()
            res[name] = np.array("no error")
        except dist.DistributedError as e:
            res[name] = np.array(str(e))

    manual_seed(1)
    m = build_model()
    if last:
        m[5].weight.requires_grad = False
    attempt("requires_grad", m)
    manual_seed(1)
    attempt("shape", nn.Sequential(nn.Linear(4, 3), nn.Linear(3, 2 if last else 3)))
    attempt("missing", nn.Sequential(nn.Linear(4, 3), *([] if last else [nn.Linear(3, 3)])))
    manual_seed(1 + r)
    attempt("values", nn.Sequential(nn.Linear(4, 3)), init_sync=False)
    manual_seed(1)
    attempt("same_values", nn.Sequential(nn.Linear(4, 3)), init_sync=False)

    # a buffer other than BatchNorm's follows rank 0's at each training forward
    class Tally(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", np.zeros(2, np.float32))

        def forward(self, x):
            self.seen.set(self.seen.numpy() + (r + 1))
            return x

    tally = Tally()
    ddp = DistributedDataParallel(tally)
    s = Session()
    for _ in range(2):
        ddp(s.tensor(np.ones(2)))
    res["tally"] = tally.seen.numpy()
    ddp.remove_hooks()

    # SyncBatchNorm: rank r holds r + 2 samples; loss_r = sum(w_r * y_r)
    x, w = syncbn_data(W)
    bn = nn.SyncBatchNorm(3, momentum=0.25)
    bn.weight.set(np.array([1.5, -0.5, 2.0]))
    bn.bias.set(np.array([0.1, 0.2, -0.3]))
    s = Session()
    xt = s.tensor(x[r], requires_grad=True)
    y = bn(xt)
    (y * s.tensor(w[r])).sum().backward()
    res.update(y=y.numpy(), gx=xt.grad, ggamma=bn.weight.grad, gbeta=bn.bias.grad,
               running_mean=bn.running_mean.numpy(), running_var=bn.running_var.numpy(),
               nbt=bn.num_batches_tracked.numpy())
    bn.eval()
    res["y_eval"] = bn(s.tensor(x[r])).numpy()
    np.savez(out / f"rank{r}.npz", **res)
    dist.destroy()


def syncbn_data(world: int):
    rng = np.random.default_rng(5)
    x = [rng.normal(loc=1.0, scale=2.0, size=(r + 2, 3, 3, 2)) for r in range(world)]
    w = [rng.normal(size=a.shape) for a in x]
    return x, w


def worker_skip(out: Path, batchnorm: bool) -> None:
    """The last rank skips step 1's backward; every rank must fail at that step (with
    BatchNorm, at the first exchange that no longer matches)."""
    import torchlean.distributed as dist
    from torchlean import nn
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session
    dist.init()
    r, W = dist.rank(), dist.world_size()
    model = nn.Sequential(nn.Linear(4, 6), nn.Dropout(0.2), nn.Tanh(), nn.Linear(6, 2),
                          *([nn.BatchNorm1d(2)] if batchnorm else []))
    ddp = DistributedDataParallel(model)
    s = Session()
    x = np.random.default_rng(r).normal(size=(3, 4))
    for step in range(4):
        try:
            loss = ddp(s.tensor(x)).sum()
        except dist.DistributedError as e:
            note(out / f"error{r}.txt", f"step {step}: {e}")
            raise
        if step == 1 and r == W - 1:
            continue
        try:
            loss.backward()
        except dist.DistributedError as e:
            note(out / f"error{r}.txt", f"step {step}: {e}")
            raise
        s.step()
    note(out / f"finished{r}.txt", "no error")


def worker_lose(out: Path, how: str) -> None:
    """The last rank dies (SIGKILL) or raises in step 2 of DistributedDataParallel training;
    the others must fail within TORCHLEAN_DIST_TIMEOUT_S, writing their error."""
    import torchlean.distributed as dist
    from torchlean.nn.parallel import DistributedDataParallel
    from torchlean.session import Session
    dist.init()
    r, W = dist.rank(), dist.world_size()
    model = build_model()
    ddp = DistributedDataParallel(model)
    X, Y = data(W)
    s = Session()
    for step in range(3):
        if step == 2 and r == W - 1:
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"rank {r} gives up")
        try:
            loss_of(ddp, s, X[0][r], Y[0][r]).backward()
        except dist.DistributedError as e:
            note(out / f"error{r}.txt", str(e))
            raise
        s.step()


# ---------------------------------------------------------------------------------- tests
WORLDS = [2, 3]


@pytest.mark.parametrize("world", WORLDS)
def test_dropout_batchnorm_model_equals_accumulation_bitwise(tmp_path, world):
    """W ranks of K = 1, 2, 3 micro-batches equal one process accumulating W*K micro-batches:
    the initial broadcast (weights and buffers), every step's reduced gradients, the final
    weights and the BatchNorm buffers (running mean, variance, num_batches_tracked), bit for
    bit on every rank; reduce_op="sum" with losses scaled by 1/(W*K) for W = 3 too."""
    ranks = td.run_ok(world, "equal", tmp_path, timeout_s=90)
    ref = {**reference(world, "sum"), **reference(world, "avg")}
    assert float(ref["sum.final.6.num_batches_tracked"]) == world * sum(KS)
    for r, got in enumerate(ranks):
        assert sorted(got) == sorted(ref)
        for key in ref:
            assert np.array_equal(got[key], ref[key]), (
                f"rank {r} {key}: max diff {np.abs(got[key] - ref[key]).max()}")
    # the test can fail: dropout really drew per micro-batch, BatchNorm really moved, and the
    # order of the micro-batches matters (summing rank by rank fails this test)
    assert not np.array_equal(ref["sum.init.1.running_mean"], ref["sum.final.1.running_mean"])
    assert not np.array_equal(ref["sum.grad0.0"], ref["sum.grad1.0"])
    if world == 2:   # 1/W is a power of two: the mean of 1/K-scaled losses is the same sum
        for key in (k for k in ref if k.startswith("sum.")):
            assert np.array_equal(ref[key], ref["avg" + key[3:]]), key


@pytest.mark.parametrize("world", WORLDS)
def test_checkpoints_rank0_writes_and_resume_is_bitwise(tmp_path, world):
    """Every rank called write_atomic, Module.save and nn.save_file: only rank 0's files
    exist, with no temporary left; the resumed run's weights and buffers equal the
    uninterrupted run's bit for bit on every rank."""
    ranks = td.run_ok(world, "resume", tmp_path, timeout_s=90)
    files = sorted(f for f in os.listdir(tmp_path) if not f.startswith("rank"))
    assert files == ["file0.safetensors", "own0.safetensors", "step1.ckpt"], files
    for r, got in enumerate(ranks):
        full = sorted(k for k in got if k.startswith("full."))
        assert len(full) == 16
        for k in full:
            assert np.array_equal(got[k], got["resumed" + k[4:]]), f"rank {r} {k}"
        assert np.array_equal(got["full.0.weight"], ranks[0]["full.0.weight"])
        assert int(got["steps"]) == len(KS)


def _syncbn_reference(world: int):
    """float64 BatchNorm over the global batch; gradients of sum_r sum(w_r * y_r)."""
    x, w = syncbn_data(world)
    gamma, beta = np.array([1.5, -0.5, 2.0]), np.array([0.1, 0.2, -0.3])
    X = np.concatenate(x)
    Wt = np.concatenate(w)
    axes = (0, 2, 3)
    n = X.size // 3
    mu = X.mean(axes, keepdims=True)
    var = X.var(axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + 1e-5)
    xhat = (X - mu) * inv
    g = gamma.reshape(1, 3, 1, 1)
    Y = xhat * g + beta.reshape(1, 3, 1, 1)
    dxhat = Wt * g
    GX = inv * (dxhat - dxhat.mean(axes, keepdims=True)
                - xhat * (dxhat * xhat).mean(axes, keepdims=True))
    rm = 0.25 * mu.ravel()
    rv = 0.75 + 0.25 * var.ravel() * n / (n - 1)
    bounds = np.cumsum([0] + [a.shape[0] for a in x])
    per = [slice(bounds[r], bounds[r + 1]) for r in range(world)]
    return x, w, Y, GX, rm, rv, per, xhat, gamma, beta


@pytest.mark.parametrize("world", WORLDS)
def test_mismatched_models_raise_and_syncbatchnorm_is_global(tmp_path, world):
    ranks = td.run_ok(world, "checks", tmp_path, timeout_s=90)
    x, w, Y, GX, rm, rv, per, xhat, gamma, beta = _syncbn_reference(world)
    for r, got in enumerate(ranks):
        msg = str(got["requires_grad"])
        assert f"rank {r}:" in msg and "'5.weight'" in msg and "requires_grad=False" in msg, msg
        assert f"rank {world - 1} has" in msg, msg
        msg = str(got["shape"])
        assert "'1.weight' of shape (3, 3)" in msg and "(2, 3)" in msg, msg
        msg = str(got["missing"])
        assert "'1.weight'" in msg and "nothing" in msg, msg
        msg = str(got["values"])
        assert "'0.weight'" in msg and "init_sync" in msg, msg
        assert str(got["same_values"]) == "no error"
        np.testing.assert_array_equal(got["tally"], [1 + r + 1] * 2)   # rank 0's 1, then own
        sl = per[r]
        np.testing.assert_allclose(got["y"], Y[sl], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["gx"], GX[sl], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got["ggamma"], (w[r] * xhat[sl]).sum((0, 2, 3)), rtol=1e-4,
                                   atol=1e-5)
        np.testing.assert_allclose(got["gbeta"], w[r].sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got["running_mean"], rm, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["running_var"], rv, rtol=1e-5, atol=1e-6)
        assert float(got["nbt"]) == 1.0
        ev = ((x[r] - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5)
              * gamma.reshape(1, 3, 1, 1) + beta.reshape(1, 3, 1, 1))
        np.testing.assert_allclose(got["y_eval"], ev, rtol=1e-5, atol=1e-5)
    # the global statistics differ from a rank's own: a local BatchNorm would fail the check
    local = (x[0] - x[0].mean((0, 2, 3), keepdims=True)) / np.sqrt(
        x[0].var((0, 2, 3), keepdims=True) + 1e-5)
    assert np.abs(local * gamma.reshape(1, 3, 1, 1) + beta.reshape(1, 3, 1, 1)
                  - Y[per[0]]).max() > 1e-2


def _run_failing(world, scenario, tmp_path):
    t0 = time.monotonic()
    res = td.launch(world, scenario, tmp_path, timeout_s=60,
                    extra_env={**td.rank_backend(world), "TORCHLEAN_DIST_TIMEOUT_S": "3"})
    elapsed = time.monotonic() - t0
    assert res.returncode != 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert elapsed < 30, f"the job took {elapsed:.1f} s to end"
    return res


def _launch_here(world, scenario, out, **kw):
    """td.launch runs test_distributed.py's workers; these live in this file."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "tests"),
                                         env.get("PYTHONPATH", "")])
    env.setdefault("TORCHLEAN_DIST_TIMEOUT_S", "30")
    env["NCCL_NVLS_ENABLE"] = "0"
    env.update(td.MPI_AS_ROOT)
    env.update(kw.get("extra_env", {}))
    cmd = [td.mpiexec(), "-n", str(world), sys.executable, str(Path(__file__).resolve()),
           scenario, str(out)]
    return td.run_group(cmd, env, kw.get("timeout_s", 60))


@pytest.mark.parametrize("world", WORLDS)
def test_skipped_backward_fails_that_step_on_every_rank(tmp_path, world):
    res = _run_failing(world, "skip", tmp_path)
    for r in range(world):
        err = tmp_path / f"error{r}.txt"
        assert err.exists(), f"rank {r} raised nothing:\n{res.stdout}\n{res.stderr[-3000:]}"
        msg = err.read_text()
        want_step = 2 if r == world - 1 else 1      # the skipper is one forward ahead
        assert msg.startswith(f"step {want_step}:") and f"rank {r}:" in msg, msg
        counts = [2 if q == world - 1 else 1 for q in range(world)]
        assert f"forward passes since the last reduction by rank: {counts}" in msg, msg
        assert not (tmp_path / f"finished{r}.txt").exists()


def test_skipped_backward_with_batchnorm_fails_on_every_rank(tmp_path):
    """With BatchNorm the skipper's next forward exchanges batch statistics while the others
    check the step: the tagged exchanges tell the two apart on both sides."""
    res = _run_failing(2, "skip_bn", tmp_path)
    for r in range(2):
        err = tmp_path / f"error{r}.txt"
        assert err.exists(), f"rank {r} raised nothing:\n{res.stdout}\n{res.stderr[-3000:]}"
        msg = err.read_text()
        assert msg.startswith(f"step {1 + r}:") and f"rank {r}:" in msg, msg
        assert ("rank 0 at 'DistributedDataParallel step check', rank 1 at 'BatchNorm running "
                "statistics'") in msg, msg


@pytest.mark.parametrize("world,how", [(2, "kill"), (3, "kill"), (2, "raise")])
def test_lost_rank_fails_the_others_within_the_timeout(tmp_path, world, how):
    """A rank killed (or raising) mid-training: the others raise a DistributedError naming
    the collective within the 3 s deadline (or the launcher ends them first), never a hang."""
    res = _run_failing(world, how, tmp_path)
    errors = [tmp_path / f"error{r}.txt" for r in range(world - 1)]
    if how == "raise":
        assert "rank 1 gives up" in res.stderr
        assert all(e.exists() for e in errors), res.stdout + res.stderr[-3000:]
    for r, e in enumerate(errors):
        if e.exists():
            msg = e.read_text()
            assert f"rank {r}:" in msg and "did not complete within 3 s" in msg, msg


# Make td.launch find this file's workers: it runs test_distributed.py, so route through here.
def _patch_launch():
    def launch(world, scenario, out, timeout_s=60.0, extra_env=None):
        return _launch_here(world, scenario, out, timeout_s=timeout_s,
                            extra_env=extra_env or {})
    return launch


@pytest.fixture(autouse=True)
def _workers_here(monkeypatch):
    monkeypatch.setattr(td, "launch", _patch_launch())


if __name__ == "__main__":
    scenario, out = sys.argv[1], Path(sys.argv[2])
    {"equal": lambda: worker_equal(out),
     "resume": lambda: worker_resume(out),
     "checks": lambda: worker_checks(out),
     "skip": lambda: worker_skip(out, batchnorm=False),
     "skip_bn": lambda: worker_skip(out, batchnorm=True),
     "kill": lambda: worker_lose(out, "kill"),
     "raise": lambda: worker_lose(out, "raise")}[scenario]()


# ---------------------------------------------------------------------------------- examples
def test_cnn_classifier_data_parallel_equals_accumulation_and_resumes(tmp_path):
    """examples/cnn_classifier.py (dropout, BatchNorm, checkpoints) in exact mode: 2 ranks equal
    one process with --accumulate 2 in every weight and buffer, bit for bit; resuming the
    2-rank run from its step-3 checkpoint ends with the same bits; rank 0 alone prints."""
    from safetensors.numpy import load_file
    ex = str(ROOT / "examples" / "cnn_classifier.py")
    args = ["--exact", "--steps", "6", "--no-progress", "--batch-size", "30"]
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", **td.MPI_AS_ROOT, **td.rank_backend(2))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env.setdefault("TORCHLEAN_DIST_TIMEOUT_S", "30")

    def dp(*more):
        res = td.run_group([td.mpiexec(), "-n", "2", sys.executable, ex, *args, *more], env, 120)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        return res

    full = dp("--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "3",
              "--save", str(tmp_path / "dp.safetensors"))
    assert full.stdout.count("summary:") == 1 and full.stdout.count("test accuracy") == 1
    assert sorted(os.listdir(tmp_path / "ck")) == ["step_3.ckpt", "step_6.ckpt"]
    dp("--resume", str(tmp_path / "ck" / "step_3.ckpt"),
       "--save", str(tmp_path / "resumed.safetensors"))
    one = subprocess.run([sys.executable, ex, *args, "--accumulate", "2", "--save",
                          str(tmp_path / "one.safetensors")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-2000:]
    a = load_file(str(tmp_path / "dp.safetensors"))
    for other in ("one", "resumed"):
        b = load_file(str(tmp_path / f"{other}.safetensors"))
        assert sorted(a) == sorted(b) and len(a) == 16
        for k in a:
            assert np.array_equal(a[k], b[k]), f"{other} {k}"
    assert float(a["features.1.num_batches_tracked"]) == 12.0    # 6 steps x 2 micro-batches


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    """A failed write leaves the previous file and no temporary behind."""
    from torchlean import nn
    from torchlean.nn import checkpoint
    p = tmp_path / "w.safetensors"
    nn.save_file({"a": np.arange(3.0)}, p)
    np.testing.assert_array_equal(nn.load_file(p)["a"], [0, 1, 2])

    def fail(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(checkpoint.os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        nn.save_file({"a": np.ones(5)}, p)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["w.safetensors"]
    np.testing.assert_array_equal(nn.load_file(p)["a"], [0, 1, 2])
    nn.save_file({"a": np.ones(2)}, p)
    assert os.listdir(tmp_path) == ["w.safetensors"]
    np.testing.assert_array_equal(nn.load_file(p)["a"], [1, 1])


# ---------------------------------------------------------------------------------- in process
def test_micro_batch_keys_depend_on_seed_step_and_index_only():
    """Inside random.micro_batch(step, index) the d-th draw uses micro_key(seed, step, index, d)
    whatever was drawn before, the stream's counter stands still, and scopes nest."""
    import torchlean as tl
    from torchlean import random
    from torchlean.session import manual_seed
    s = tl.Session()
    manual_seed(11)
    s.rand_uniform(7)                               # advances the counter
    before = random.get_rng_state()
    with random.micro_batch(4, 3):
        assert random.current_micro_batch() == (4, 3)
        a = s.bernoulli_mask((5, 3), 0.4).numpy()
        u = s.rand_uniform(9).numpy()
        with random.micro_batch(4, 2):
            inner = s.rand_uniform(9).numpy()
        assert random.current_micro_batch() == (4, 3)
        u2 = s.rand_uniform(9).numpy()
    assert random.current_micro_batch() is None
    np.testing.assert_array_equal(random.get_rng_state(), before)
    np.testing.assert_array_equal(a.ravel(), random.bernoulli(15, random.micro_key(11, 4, 3, 0),
                                                              0.4))
    np.testing.assert_array_equal(u, random.uniform(9, random.micro_key(11, 4, 3, 1)))
    np.testing.assert_array_equal(inner, random.uniform(9, random.micro_key(11, 4, 2, 0)))
    np.testing.assert_array_equal(u2, random.uniform(9, random.micro_key(11, 4, 3, 2)))
    manual_seed(11)                                  # no earlier draws: the same masks
    with random.micro_batch(4, 3):
        np.testing.assert_array_equal(s.bernoulli_mask((5, 3), 0.4).numpy(), a)
    keys = {random.micro_key(sd, st, i, 0) for sd in (0, 1) for st in (0, 1) for i in (0, 1)}
    assert len(keys) == 8 and not keys & {random.key_of(sd, c) for sd in (0, 1)
                                          for c in range(4)}
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(ValueError, match="micro_batch: index must be an integer >= 0"):
            with random.micro_batch(0, bad):
                pass


def test_convert_sync_batchnorm_outside_a_job_is_batchnorm():
    """Without torchlean.distributed.init() SyncBatchNorm is BatchNorm on the local batch;
    convert_sync_batchnorm keeps the parameters and buffers, recursively."""
    import torchlean as tl
    from torchlean import nn
    from torchlean.session import manual_seed
    manual_seed(2)
    plain = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Sequential(nn.Flatten(),
                                                                             nn.BatchNorm1d(12)))
    plain[1].running_mean.set(np.array([0.5, -1.0, 2.0]))
    manual_seed(2)
    conv = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Sequential(nn.Flatten(),
                                                                            nn.BatchNorm1d(12)))
    conv[1].running_mean.set(np.array([0.5, -1.0, 2.0]))
    conv = nn.SyncBatchNorm.convert_sync_batchnorm(conv)
    assert type(conv[1]) is nn.SyncBatchNorm and type(conv[2][1]) is nn.SyncBatchNorm
    assert sorted(conv.state_dict()) == sorted(plain.state_dict())
    x = np.random.default_rng(0).normal(size=(3, 2, 4, 4))
    s = tl.Session()
    for mode in ("train", "eval"):
        getattr(plain, mode)()
        getattr(conv, mode)()
        np.testing.assert_allclose(conv(s.tensor(x)).numpy(), plain(s.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-5)
    for k, v in plain.state_dict().items():
        np.testing.assert_allclose(conv.state_dict()[k], v, rtol=1e-6, atol=1e-7, err_msg=k)
    with pytest.raises(ValueError, match=r"SyncBatchNorm: expected input \(N, 3, \*\)"):
        conv[1](s.tensor(np.ones((2, 4, 5))))
    conv.train()
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        conv[2][1](s.tensor(np.ones((1, 12))))


def test_reduce_op_and_steps_options():
    """In a world of one: a bad reduce_op or steps names the option; `steps` set on resume is
    the step of the micro-batch keys of the next training forward (index j * W + r)."""
    import torchlean as tl
    import torchlean.distributed as dist
    from torchlean import nn, random
    from torchlean.nn.parallel import DistributedDataParallel

    class Seen(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.keys = nn.Linear(2, 1), []

        def forward(self, x):
            self.keys.append(random.current_micro_batch())
            return self.lin(x)

    dist.init()
    try:
        with pytest.raises(ValueError, match="reduce_op must be 'avg' or 'sum', got 'mean'"):
            DistributedDataParallel(nn.Linear(2, 1), reduce_op="mean")
        m = Seen()
        ddp = DistributedDataParallel(m, reduce_op="sum")
        for bad in (-1, 1.5, True, "2"):
            with pytest.raises(ValueError, match="steps must be an integer >= 0"):
                ddp.steps = bad
        ddp.steps = 4
        s = tl.Session()
        ddp(s.tensor(np.ones((1, 2)))).sum().backward()
        with ddp.no_sync():
            ddp(s.tensor(np.ones((1, 2)))).sum().backward()
        ddp(s.tensor(np.ones((1, 2)))).sum().backward()
        s.step()
        assert m.keys == [(4, 0), (5, 0), (5, 1)] and ddp.steps == 6
        ddp.remove_hooks()
    finally:
        dist.destroy()
