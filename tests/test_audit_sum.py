"""The stub's digest sum (native/stub/digest_sum.h: 32-bit vector multiplies under AVX-512 or
AVX2, the formula's loop elsewhere) gives the definition's digests: the header built for each ISA
this host runs against the formula's loop, and the loaded library against the NumPy definition
(test_audit.digest_numpy) over sizes around the vectors' widths, NaN, infinity and -0 bits, one
buffer and batches, one thread and two."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from torchlean.audit.digests import digest_many
from torchlean.buffer import AnyBuffer

from test_audit import SPECIAL, device_digest, digest_numpy

ROOT = Path(__file__).resolve().parent.parent
X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "i386")
# the vector path the build picks with these flags added to -march=native (x86: each narrower
# ISA the host also runs; elsewhere the build's own)
ISAS = ([("native", []), ("avx2", ["-mno-avx512f"]), ("scalar", ["-mno-avx512f", "-mno-avx2"])]
        if X86 else [("native", [])])
SIZES = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65, 127, 128, 129, 1023, 1025,
         4099, 32767, 32769, 65537, (1 << 18) + 3]


@pytest.mark.parametrize("isa,flags", ISAS, ids=[i for i, _ in ISAS])
def test_vector_sum_is_the_formulas_sum(tmp_path, isa, flags):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.fail("no C compiler: the stub's digest sum cannot be checked")
    exe = tmp_path / "digest_sum_check"
    r = subprocess.run([cc, "-std=gnu11", "-O3", "-march=native", *flags, "-ffp-contract=off",
                        "-Wall", "-Wextra", "-Werror", "-Inative/include", "-Inative/common",
                        "-Inative", "-o", str(exe), "tests/native/digest_sum_check.c"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stdout + out.stderr
    if isa != "native":
        assert out.stdout.split()[1] == isa


def _bits(n: int, seed: int) -> np.ndarray:
    bits = np.random.default_rng(seed).integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    bits[::7] = np.resize(SPECIAL, bits[::7].size)    # NaNs, infinities, signed zeros
    return bits


@pytest.mark.parametrize("n", SIZES)
def test_library_digest_is_the_numpy_definition(n):
    bits = _bits(n, n)
    assert device_digest(bits) == digest_numpy(bits)


def test_library_batch_is_the_numpy_definition_on_two_threads():
    """digest_many (one digest_batch: the elements of all buffers split evenly over the threads,
    pieces starting anywhere in a vector) and single digests above the one-buffer threshold,
    run with 2 threads in a child process; the empty buffer among them."""
    sizes = [0] + SIZES
    want = [digest_numpy(_bits(n, n)) for n in sizes]
    code = ("import json, sys, numpy as np\n"
            "sys.path.insert(0, 'tests')\n"
            "from test_audit_sum import _bits, SIZES\n"
            "from torchlean.audit.digests import digest, digest_many\n"
            "from torchlean.buffer import AnyBuffer\n"
            "bufs = [AnyBuffer.from_numpy(_bits(n, n).view(np.float32)) for n in [0] + SIZES]\n"
            "print(json.dumps([digest_many(bufs), [digest(b) for b in bufs]]))\n")
    env = dict(os.environ, OMP_NUM_THREADS="2", TORCHLEAN_BACKEND="stub",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    many, single = json.loads(r.stdout.strip().splitlines()[-1])
    assert many == want and single == want
    # and here, with this process's threads
    assert digest_many([AnyBuffer.from_numpy(_bits(n, n).view(np.float32)) for n in sizes]) == want
