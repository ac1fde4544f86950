"""In-place arithmetic against its out-of-place twin: microseconds per call on the loaded backend
(x + y vs x.add_(y), x * c vs x.mul_(c)), small and large. TORCHLEAN_BACKEND=stub python bench/bench_inplace.py"""
import timeit, numpy as np, torchlean as tl
from torchlean.session import Session
s = Session()
for n in (1000, 1_000_003):
    t = s.tensor(np.random.rand(n).astype(np.float32)); o = s.tensor(np.random.rand(n).astype(np.float32))
    reps = 2000 if n < 10000 else 100
    oop = min(timeit.repeat(lambda: t + o, number=reps, repeat=5)) / reps
    ip = min(timeit.repeat(lambda: t.add_(o), number=reps, repeat=5)) / reps
    ipm = min(timeit.repeat(lambda: t.mul_(1.0), number=reps, repeat=5)) / reps
    oopm = min(timeit.repeat(lambda: t * 1.0, number=reps, repeat=5)) / reps
    print(f"n={n}: x + y {oop*1e6:.1f} us, x.add_(y) {ip*1e6:.1f} us; x * c {oopm*1e6:.1f} us, x.mul_(c) {ipm*1e6:.1f} us")
