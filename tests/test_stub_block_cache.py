"""The stub keeps freed payloads of 64 KiB and more for the next allocation of the same size
(native/stub/memory.c): memory_stats() reports them as cached_bytes, empty_cache() frees them,
and a reused block holds what its new owner writes (no stale values leak into results)."""
import os

import numpy as np
import pytest

import torchlean as tl
from torchlean import AnyBuffer, ops

pytestmark = [
    pytest.mark.skipif(tl.backend() != "stub", reason="the stub's allocator"),
    # make sanitize's build keeps no blocks (native/stub/memory.c), so ASan sees every use of a
    # freed payload
    pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                       reason="the sanitizer build of the stub caches no blocks"),
]

MIB = 1 << 20


def test_freed_large_payload_is_cached_then_emptied():
    tl.empty_cache()
    assert tl.memory_stats()["cached_bytes"] == 0
    a = AnyBuffer.from_numpy(np.ones(MIB, np.float32))          # 4 MiB
    a.release()
    assert tl.memory_stats()["cached_bytes"] >= 4 * MIB
    tl.empty_cache()
    assert tl.memory_stats()["cached_bytes"] == 0


def test_small_payloads_are_not_cached():
    tl.empty_cache()
    a = AnyBuffer.from_numpy(np.ones(1000, np.float32))
    a.release()
    assert tl.memory_stats()["cached_bytes"] == 0


def test_reused_block_gives_fresh_results():
    tl.empty_cache()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8, 64, 64)).astype(np.float32)   # 4 MiB
    junk = AnyBuffer.from_numpy(np.full(x.size, np.nan, np.float32))
    junk.release()                                              # a NaN-filled block waits
    gam, bet = np.ones(8, np.float32), np.zeros(8, np.float32)
    y = ops.batchnorm_channel_first(AnyBuffer.from_numpy(x), AnyBuffer.from_numpy(gam),
                                    AnyBuffer.from_numpy(bet), eps=1e-5)[0].to_numpy()
    xd = x.astype(np.float64)
    m, v = xd.mean(axis=(0, 2, 3), keepdims=True), xd.var(axis=(0, 2, 3), keepdims=True)
    assert np.isfinite(y).all()
    assert np.abs(y - (xd - m) / np.sqrt(v + 1e-5)).max() < 1e-4
    g = ops.relu(AnyBuffer.from_numpy(x)).to_numpy()
    assert np.array_equal(g, np.maximum(x, 0))
    tl.empty_cache()


def test_mid_size_payloads_are_cached():
    """64 KiB to 1 MiB payloads are kept too (malloc would hand them back to the system from the
    top of its heap, and their next allocation would fault on every page)."""
    tl.empty_cache()
    a = AnyBuffer.from_numpy(np.ones(1 << 14, np.float32))       # 64 KiB
    b = AnyBuffer.from_numpy(np.ones(1 << 17, np.float32))       # 512 KiB
    a.release()
    b.release()
    assert tl.memory_stats()["cached_bytes"] == (1 << 16) + (1 << 19)
    c = AnyBuffer.from_numpy(np.full(1 << 17, 3.0, np.float32))  # takes the 512 KiB block
    assert tl.memory_stats()["cached_bytes"] == 1 << 16
    assert np.array_equal(c.to_numpy(), np.full(1 << 17, 3.0, np.float32))
    c.release()
    tl.empty_cache()
    assert tl.memory_stats()["cached_bytes"] == 0
