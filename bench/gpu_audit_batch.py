"""digest_batch on the GPU against the stub: the batched digests of buffers of many sizes
(around the CUDA body's chunk of 4096 elements, empty, large), in two orders, must equal the
single-buffer digest and the stub's digests of the same bits (computed here by the NumPy form of
the definition, tests/test_audit.py). Prints one line per check; exit 1 on any mismatch.

    TORCHLEAN_BACKEND=cuda python3 bench/gpu_audit_batch.py
"""
import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import torchlean as tl  # noqa: E402
from torchlean import audit  # noqa: E402
from torchlean.buffer import AnyBuffer  # noqa: E402
from test_audit import digest_numpy  # noqa: E402

SIZES = [0, 1, 2, 7, 255, 256, 4095, 4096, 4097, 8192, 12289, 65537, (1 << 20) + 3, 1 << 24]


def main() -> int:
    rng = np.random.default_rng(0)
    bits = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for n in SIZES]
    bufs = [AnyBuffer.from_numpy(b.view(np.float32)) for b in bits]
    want = [digest_numpy(b) for b in bits]
    bad = 0
    got = audit.digest_many(bufs)
    single = [audit.digest(b) for b in bufs]
    order = list(rng.permutation(len(bufs))) * 2
    shuffled = audit.digest_many([bufs[k] for k in order])
    many = audit.digest_many([bufs[k % 5] for k in range(3000)])
    for name, ok in (("batch = definition", got == want), ("single = definition", single == want),
                     ("shuffled batch", shuffled == [want[k] for k in order]),
                     ("3000 small buffers", many == [want[k % 5] for k in range(3000)])):
        print(f"{tl.backend()}: {name}: {'ok' if ok else 'MISMATCH'}")
        bad += not ok
    return 1 if bad else 0


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    sys.exit(main())
