"""The small digest batch's CUDA kernel (native/cuda/audit_small.cuh: one block per buffer, the
table passed by value) runs on the CPU through the CUDA emulation (tests/native/cuda_emu) and
must give the definition's digests (test_audit.digest_numpy) and the loaded library's, for
buffers around the block's size and the batch's limits, in both thread schedules (a missing
barrier in the block sum reads a sum not written yet in one of them)."""

import numpy as np
import pytest

from torchlean.audit.digests import digest_many
from torchlean.buffer import AnyBuffer

from test_audit import SPECIAL, digest_numpy
from cuda_emu import build_emu

cffi = pytest.importorskip("cffi")


@pytest.fixture(scope="module")
def emu():
    return build_emu("audit_emu.so", "the CUDA digest kernel", "int emu_digest_small(const unsigned long long *ptr, const long long *n, "
             "long long count, float *rows, int reverse);")


def _digests(ffi, lib, bits, reverse):
    """The emulated kernel's digests of the uint32 arrays `bits` (None: not a small batch)."""
    ptr = ffi.new("unsigned long long[]", [b.ctypes.data for b in bits])
    n = ffi.new("long long[]", [b.size for b in bits])
    rows = np.zeros((len(bits), 4), np.float32)
    if lib.emu_digest_small(ptr, n, len(bits), ffi.cast("float *", rows.ctypes.data), reverse):
        return None
    w = rows.astype(np.uint64)
    return (w[:, 0] | w[:, 1] << np.uint64(16) | w[:, 2] << np.uint64(32)
            | w[:, 3] << np.uint64(48)).tolist()


@pytest.mark.parametrize("reverse", [0, 1])
def test_small_batch_kernel_gives_the_definition_and_the_library(emu, reverse):
    ffi, lib = emu
    rng = np.random.default_rng(reverse)
    sizes = [0, 1, 2, 255, 256, 257, 511, 4097, 1 << 16]
    bits = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for n in sizes]
    bits.append(np.resize(SPECIAL, 1000).astype(np.uint32))   # NaNs, infinities, signed zeros
    want = [digest_numpy(b) for b in bits]
    assert _digests(ffi, lib, bits, reverse) == want
    assert digest_many([AnyBuffer.from_numpy(b.view(np.float32)) for b in bits]) == want


def test_small_batch_kernel_limits(emu):
    """64 buffers is the most one launch takes, 2^16 elements the most a buffer may hold: one
    more of either is refused (audit.cu digests it with the chunked kernel instead)."""
    ffi, lib = emu
    rng = np.random.default_rng(9)
    bits = [rng.integers(0, 1 << 32, k % 300, dtype=np.uint64).astype(np.uint32)
            for k in range(65)]
    assert _digests(ffi, lib, bits[:64], 0) == [digest_numpy(b) for b in bits[:64]]
    assert _digests(ffi, lib, bits, 0) is None
    big = rng.integers(0, 1 << 32, (1 << 16) + 1, dtype=np.uint64).astype(np.uint32)
    assert _digests(ffi, lib, [bits[1], big], 0) is None
