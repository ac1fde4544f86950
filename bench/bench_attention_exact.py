"""Exact-mode attention on CUDA against the default kernels and torch SDPA, kernel time only.

Run on a GPU machine after `make cuda`:
    TORCHLEAN_BACKEND=cuda python3 bench/bench_attention_exact.py [--reps 20] [--out FILE]
The core attention op (no projections) on random float32 q, k, v of (B*H, n, hd): forward
(ops.attention) and backward (ops.attention_backward from the forward's o and lse), in exact mode
(attention_exact.cuh, the stub's bits) and default mode (attention_tiled.cuh), and torch's
F.scaled_dot_product_attention on (B, H, n, hd) float32 when torch imports (TF32 off). Times are
CUDA events around each call on the library's own stream (torch's on torch's stream), medians
of --reps calls after warm-up. Before timing, exact mode's outputs (o, lse, dq, dk, dv) are
compared bit for bit with the stub's, opened side by side in the same process, at the GPT-width
shape and two odd ones (masked, head dim 80; causal, head dim 128); --no-parity skips that.
Prints a markdown table (and writes it to --out).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torchlean as tl  # noqa: E402
from torchlean._generated import ops  # noqa: E402
from cuda_timing import gpu_name, torch_median_ms  # noqa: E402

SHAPES = [  # (label, B, H, n, hd, causal)
    ("hd64 n1024", 8, 8, 1024, 64, False),
    ("hd64 n1024 causal", 8, 8, 1024, 64, True),
    ("GPT width: B8 H12 T512 hd64 causal", 8, 12, 512, 64, True),
    ("hd128 n1024 causal", 4, 8, 1024, 128, True),
]


class Events:
    """cudaEvent timing on the torchlean library's stream (libcudart as the library loaded it)."""

    def __init__(self):
        path = None
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if "libcudart.so" in os.path.basename(p):
                    path = p
                    break
        self.rt = ctypes.CDLL(path or "libcudart.so")
        vp = ctypes.c_void_p
        for name, args in [("cudaEventCreate", [ctypes.POINTER(vp)]), ("cudaEventRecord", [vp, vp]),
                           ("cudaEventSynchronize", [vp]),
                           ("cudaEventElapsedTime", [ctypes.POINTER(ctypes.c_float), vp, vp])]:
            getattr(self.rt, name).argtypes = args
            getattr(self.rt, name).restype = ctypes.c_int
        from torchlean._loader import ffi, lib
        self.stream = vp(int(ffi.cast("uintptr_t", lib.tl_cuda_stream())))
        self.ev = [vp(), vp()]
        for e in self.ev:
            assert self.rt.cudaEventCreate(ctypes.byref(e)) == 0

    def time_ms(self, fn, reps: int, warm: int = 3) -> float:
        for _ in range(warm):
            fn()
        tl.synchronize()
        out, ms = [], ctypes.c_float()
        for _ in range(reps):
            self.rt.cudaEventRecord(self.ev[0], self.stream)
            fn()
            self.rt.cudaEventRecord(self.ev[1], self.stream)
            assert self.rt.cudaEventSynchronize(self.ev[1]) == 0
            assert self.rt.cudaEventElapsedTime(ctypes.byref(ms), self.ev[0], self.ev[1]) == 0
            out.append(ms.value)
        return statistics.median(out)


PARITY = [  # (label, B*H, n, hd, causal, masked)
    ("GPT width, causal", 96, 512, 64, True, False),
    ("B6 n333 hd80, masked", 6, 333, 80, False, True),
    ("B4 n200 hd128, causal + mask", 4, 200, 128, True, True),
]


def _core_on(lib, ffi, arrays, mask, b, n, e, causal):
    """o, lse, dq, dk, dv of one library's exact attention core through the raw ABI"""
    def up(a):
        a = np.ascontiguousarray(a, np.float32).ravel()
        h = ffi.new("tl_buf *")
        assert lib.tl_buf_upload_f32(ffi.cast("float *", ffi.from_buffer(a)), a.size, h) == 0
        return h[0]

    def down(h, size):
        y = np.empty(size, np.float32)
        assert lib.tl_buf_download_f32(h, ffi.cast("float *", ffi.from_buffer(y)), size) == 0
        return y

    lib.tl_set_exact(1)
    q, k, v, g = (up(a) for a in arrays)
    m = up(mask) if mask is not None else ffi.NULL
    big, rows = b * n * e, b * n
    o, lse, dq, dk, dv = (up(np.zeros(size, np.float32)) for size in (big, rows, big, big, big))
    has = int(mask is not None)
    st = lib.tl_attention(q, k, v, m, o, lse, b, n, e, has, 1, int(causal))
    assert st == 0, ffi.string(lib.tl_last_error()).decode()
    st = lib.tl_attention_backward(g, q, k, v, o, lse, m, dq, dk, dv, b, n, e, has, 1, int(causal))
    assert st == 0, ffi.string(lib.tl_last_error()).decode()
    out = [down(h, size) for h, size in ((o, big), (lse, rows), (dq, big), (dk, big), (dv, big))]
    for h in (q, k, v, g, o, lse, dq, dk, dv) + ((m,) if mask is not None else ()):
        lib.tl_buf_destroy(h)
    lib.tl_set_exact(0)
    return out


def parity(lines):
    """exact CUDA against the stub, bit for bit (NaN meets NaN); returns whether all agree"""
    from torchlean._loader import ffi, lib as cuda, open_backend
    stub, _ = open_backend("stub")
    rng = np.random.default_rng(1)
    ok = True
    lines += ["| parity shape | o | lse | dq | dk | dv |", "|---|---|---|---|---|---|"]
    for label, b, n, e, causal, masked in PARITY:
        arrays = [rng.standard_normal(b * n * e).astype(np.float32) for _ in range(4)]
        mask = (rng.uniform(size=(n, n)) < 0.7).astype(np.float32) if masked else None
        got = _core_on(cuda, ffi, arrays, mask, b, n, e, causal)
        want = _core_on(stub, ffi, arrays, mask, b, n, e, causal)
        cells = []
        for x, y in zip(got, want):
            same = (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))
            ok &= bool(same.all())
            cells.append(f"{int(same.sum())}/{x.size}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    lines.append("")
    return ok


def release(bufs):
    for b in bufs:
        b.release()


def time_torchlean(ev, q, k, v, g, causal, exact, reps):
    """(forward ms, backward ms) of the core in one mode"""
    tl.set_exact(exact)
    try:
        fwd = ops.attention(q, k, v, causal=causal)
        f_ms = ev.time_ms(lambda: release(ops.attention(q, k, v, causal=causal)), reps)
        b_ms = ev.time_ms(lambda: release(ops.attention_backward(g, q, k, v, *fwd, causal=causal)),
                          reps)
        release(fwd)
    finally:
        tl.set_exact(False)
    return f_ms, b_ms


def time_torch(arrays, B, H, n, hd, causal, reps):
    """(forward ms, forward + backward ms) of torch SDPA, or None without torch"""
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    q, k, v, g = (torch.tensor(a.reshape(B, H, n, hd), device="cuda", requires_grad=True)
                  for a in arrays)
    def med(fn):
        return torch_median_ms(torch, fn, reps, warmup=3)

    fwd = med(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))

    def step():
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        y.backward(g.detach())
    return fwd, med(step)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--no-parity", action="store_true")
    args = p.parse_args()
    assert tl.backend() == "cuda", "run with TORCHLEAN_BACKEND=cuda on a GPU machine"
    ev = Events()
    lines = [f"Attention core, float32, {gpu_name()}; CUDA events, median of "
             f"{args.reps} after warm-up; ms.", ""]
    same = True if args.no_parity else parity(lines)
    tl.set_exact(False)
    tl.set_deterministic(False)   # the default rows: default mode's kernels as they ship
    lines += ["| shape | exact fwd | default fwd | torch fwd | exact bwd | default bwd | "
             "exact/default fwd+bwd | torch fwd+bwd |",
             "|---|---|---|---|---|---|---|---|"]
    rng = np.random.default_rng(0)
    for label, B, H, n, hd, causal in SHAPES:
        arrays = [rng.standard_normal((B * H, n, hd)).astype(np.float32) for _ in range(4)]
        q, k, v, g = (tl.AnyBuffer.from_numpy(a) for a in arrays)
        ef, eb = time_torchlean(ev, q, k, v, g, causal, True, args.reps)
        df, db = time_torchlean(ev, q, k, v, g, causal, False, args.reps)
        release([q, k, v, g])
        t = time_torch(arrays, B, H, n, hd, causal, args.reps)
        tf, tfb = ("n/a", "n/a") if t is None else (f"{t[0]:.3f}", f"{t[1]:.3f}")
        lines.append(f"| {label} | {ef:.3f} | {df:.3f} | {tf} | {eb:.3f} | {db:.3f} | "
                     f"{(ef + eb) / (df + db):.2f} | {tfb} |")
        print(lines[-1], flush=True)
    if not same:
        lines.append("")
        lines.append("**exact CUDA differs from the stub** (see the parity table)")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
