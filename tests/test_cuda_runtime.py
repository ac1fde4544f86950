"""The CUDA runtime (native/cuda/context.cu, pool.cu): pool statistics, empty_cache, the cache
cap, out-of-memory errors, TORCHLEAN_CUDA_SYNC, sticky errors and the TF32 flag.
Everything here needs the CUDA backend; process-wide settings are tested in subprocesses."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from harness import BY_NAME

pytestmark = pytest.mark.cuda
ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def _run_python(code: str, **env):
    e = dict(os.environ, TORCHLEAN_BACKEND="cuda")
    e.pop("TORCHLEAN_REQUIRE_CUDA", None)
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=180)


def test_backend_is_cuda():
    assert tl.backend() == "cuda"
    n = tl._ffi.new("int64_t *")
    assert tl._lib.tl_device_count(n) == 0 and n[0] >= 1


def test_memory_stats_report_device_bytes():
    tl.synchronize()
    before = tl.memory_stats()
    tl.reset_peak_memory_stats()
    b = tl.Buffer.alloc(16 * MiB // 4)
    s = tl.memory_stats()
    assert s["live_bytes"] - before["live_bytes"] == 16 * MiB
    assert s["live_buffers"] - before["live_buffers"] == 1
    assert s["peak_bytes"] >= s["live_bytes"]
    assert 0 < s["device_free_bytes"] <= s["device_total_bytes"]
    assert s["device_total_bytes"] > 1 << 30
    assert b.release() == 1
    tl.synchronize()
    s2 = tl.memory_stats()
    assert s2["live_bytes"] == before["live_bytes"]
    assert s2["peak_bytes"] >= before["live_bytes"] + 16 * MiB
    assert s2["cached_bytes"] >= 16 * MiB  # the pool keeps the freed block for reuse
    assert s2["frees"] == s["frees"] + 1


def test_freed_memory_is_reused_without_growing_the_pool():
    tl.synchronize()
    b = tl.Buffer.alloc(8 * MiB // 4)
    b.release()
    tl.synchronize()
    cached = tl.memory_stats()["cached_bytes"]
    for _ in range(20):
        tl.Buffer.alloc(8 * MiB // 4).release()
    tl.synchronize()
    assert tl.memory_stats()["cached_bytes"] <= cached + 8 * MiB


def test_empty_cache_returns_cached_bytes():
    bufs = [tl.Buffer.alloc(32 * MiB // 4) for _ in range(4)]
    for b in bufs:
        b.release()
    tl.synchronize()
    before = tl.memory_stats()["cached_bytes"]
    assert before >= 128 * MiB
    tl.empty_cache()
    after = tl.memory_stats()["cached_bytes"]
    assert after < before
    assert after <= 32 * MiB


def test_values_survive_pool_reuse():
    """A fresh buffer from reused pool memory holds what was written, not the old contents."""
    x = np.arange(1 << 20, dtype=np.float32)
    for _ in range(3):
        a = tl.Buffer.from_numpy(x)
        z = tl.Buffer.zeros(1 << 20)
        f = tl.Buffer.full(1 << 20, -0.0)
        c = a.copy()
        a.release()
        np.testing.assert_array_equal(c.to_numpy(), x)
        assert not z.to_numpy().view(np.uint32).any()  # zeros are all-zero bits
        assert (f.to_numpy().view(np.uint32) == 0x80000000).all()  # -0.0 is not
        for b in (z, f, c):
            b.release()


def test_huge_allocation_raises_memory_error_naming_bytes():
    """Buffers are capped at 2**32-1 floats (16 GiB), so exhaust the device with several."""
    held = []
    try:
        with pytest.raises(MemoryError) as ei:
            for _ in range(64):
                held.append(tl.Buffer.alloc(2**32 - 1))
        msg = str(ei.value)
        assert "requested 17179869180 bytes" in msg, msg
        assert "free" in msg and "live" in msg, msg
    finally:
        for b in held:
            b.release()
        tl.empty_cache()
    # the library is still usable afterwards
    np.testing.assert_array_equal(tl.Buffer.from_numpy(np.ones(3)).to_numpy(), np.ones(3))


def test_cuda_sync_mode_runs_ops():
    code = ("import numpy as np, torchlean as tl\n"
            "t = tl.Tape(); x = t.leaf(np.arange(10.0) - 4.5)\n"
            "y = t.sum(t.relu(t.mul(x, x)))\n"
            "g = t.backward(y)[x].to_numpy()\n"
            "print(float(t.value(y).to_numpy()), g.tolist())\n")
    r = _run_python(code, TORCHLEAN_CUDA_SYNC="1")
    assert r.returncode == 0, r.stderr
    total, grads = r.stdout.split(" ", 1)
    assert float(total) == float(np.sum((np.arange(10.0) - 4.5) ** 2))
    assert eval(grads) == list(2 * (np.arange(10.0) - 4.5))


def test_cache_cap_limits_cached_bytes():
    code = ("import torchlean as tl\n"
            "bs = [tl.Buffer.alloc(16 << 18) for _ in range(8)]\n"
            "[b.release() for b in bs]\n"
            "tl.synchronize(); s = tl.memory_stats()\n"
            "print(s['cache_cap_bytes'], s['cached_bytes'])\n")
    cap = 4 * MiB
    r = _run_python(code, TORCHLEAN_CUDA_CACHE_CAP_BYTES=str(cap))
    assert r.returncode == 0, r.stderr
    got_cap, cached = map(int, r.stdout.split())
    assert got_cap == cap
    assert cached <= cap + 16 * MiB  # at most the cap plus one pool block granule
    for bad in ("12abc", "-5", " 7", "1e9"):   # junk is an import error, not "no cap"
        r = _run_python("import torchlean as tl; print(tl.memory_stats()['cache_cap_bytes'])",
                        TORCHLEAN_CUDA_CACHE_CAP_BYTES=bad)
        assert r.returncode != 0 and "TORCHLEAN_CUDA_CACHE_CAP_BYTES" in r.stderr, (bad, r.stderr)


def test_sticky_error_poisons_and_fails_fast():
    """A kernel reading a bogus device pointer is an illegal address: DeviceError, and every
    later call fails fast with the first message (in a subprocess: the context is lost)."""
    code = ("import numpy as np, torchlean as tl\n"
            "from torchlean.buffer import Buffer, AnyBuffer\n"
            "out = tl._ffi.new('tl_buf *')\n"
            "assert tl._lib.tl_buf_wrap(0xdead00000000, 1 << 20, out) == 0\n"
            "bad = AnyBuffer((1 << 20,), Buffer(out[0], 1 << 20), owns=False)\n"
            "msgs = []\n"
            "try:\n"
            "    y = tl.ops.relu(bad); tl.synchronize()\n"
            "except tl.DeviceError as e:\n"
            "    msgs.append(str(e))\n"
            "for f in (lambda: tl.Buffer.from_numpy(np.ones(4)), tl.synchronize,\n"
            "          lambda: tl.ops.relu(tl.AnyBuffer((1,), tl.Buffer.alloc(1)))):\n"
            "    try:\n"
            "        f()\n"
            "    except tl.DeviceError as e:\n"
            "        msgs.append(str(e))\n"
            "print(len(msgs)); print('\\n'.join(msgs))\n")
    if "relu" not in BY_NAME:
        pytest.skip("needs the relu kernel")
    r = _run_python(code)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "4", r.stdout
    first = lines[1]
    assert "cudaErrorIllegalAddress" in first or "cudaErrorLaunchFailure" in first, first
    cause = first.split(" (the CUDA context")[0]
    for later in lines[2:]:
        assert "unusable" in later and cause in later, (first, later)


def test_tf32_flag_round_trip():
    lib = tl._lib
    try:
        assert lib.tl_set_allow_tf32(1) == 1
        assert lib.tl_set_allow_tf32(0) == 0
        if "matmul" in BY_NAME:
            rng = np.random.default_rng(0)
            a = rng.uniform(-1, 1, (256, 512)).astype(np.float32)
            b = rng.uniform(-1, 1, (512, 128)).astype(np.float32)
            want = a.astype(np.float64) @ b.astype(np.float64)
            A, B = tl.AnyBuffer.from_numpy(a), tl.AnyBuffer.from_numpy(b)
            strict = tl.ops.matmul(A, B).to_numpy()
            np.testing.assert_allclose(strict, want, rtol=1e-4, atol=1e-4)
            lib.tl_set_allow_tf32(1)
            fast = tl.ops.matmul(A, B).to_numpy()
            np.testing.assert_allclose(fast, want, rtol=5e-2, atol=5e-2)
            lib.tl_set_allow_tf32(0)
            again = tl.ops.matmul(A, B).to_numpy()
            np.testing.assert_array_equal(again, strict)  # strict mode is re-applied
    finally:
        lib.tl_set_allow_tf32(0)


def test_data_ptr_is_a_device_pointer():
    b = tl.Buffer.from_numpy(np.ones(8))
    p = b.data_ptr()
    assert p != 0 and p % 16 == 0
    b.release()


def test_kernel_scratch_counts_in_peak_and_is_returned():
    """Kernel scratch raises peak_bytes while the op runs and is gone from live_bytes (and never
    counted as a buffer) once it returns: exact conv_grouped_backward keeps its per-sample
    kernel gradient partials (weights x samples floats) in scratch before summing the samples."""
    was = tl.is_exact()
    tl.set_exact(True)
    try:
        _scratch_of_exact_conv_grouped_backward()
    finally:
        tl.set_exact(was)


def _scratch_of_exact_conv_grouped_backward():
    rng = np.random.default_rng(0)
    n, c, hw = 64, 16, 32
    x = tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, (n, c, hw, hw)).astype(np.float32))
    w = tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, (c, 1, 3, 3)).astype(np.float32))
    g = tl.AnyBuffer.from_numpy(rng.uniform(-1, 1, (n, c, hw, hw)).astype(np.float32))
    tl.synchronize()
    tl.reset_peak_memory_stats()
    before = tl.memory_stats()
    outs = tl.ops.conv_grouped_backward(w, x, g, padding=1, groups=c)
    tl.synchronize()
    s = tl.memory_stats()
    out_bytes = (c * 9 + c + n * c * hw * hw) * 4
    part_bytes = c * 9 * n * 4
    assert s["live_bytes"] - before["live_bytes"] == out_bytes
    assert s["live_buffers"] - before["live_buffers"] == 3
    assert s["peak_bytes"] - before["live_bytes"] >= out_bytes + part_bytes
    for t in (x, w, g) + tuple(outs):
        t.release()
