"""torchlean CUDA vs PyTorch on the same GPU, in one process: `make bench-cuda`.

Timing. PyTorch rows are timed with CUDA events on torch's stream. torchlean queues its work on
its own stream, so its rows are timed with time.perf_counter around a loop of calls that ends
with torchlean.synchronize() (the wall time of the whole loop divided by its length, so host
overhead is included where the GPU cannot hide it). Every row is warmed up first, then the
median of several repeats is reported. Data is random float32. GEMMs and convolutions run with
TF32 off on both sides (strict FP32). A row whose op is not in the registry, or that fails, is
listed under "skipped" with the reason.

Prints the table, and writes it to --out when given (`make bench-cuda`: bench/results/cuda.md).
"""
from __future__ import annotations

import argparse
import datetime
import math
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TORCHLEAN_BACKEND", "cuda")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchlean as tl  # noqa: E402
from codegen.registry import parse_registry  # noqa: E402

OPS = {o.name: o for o in parse_registry()}
N_BIG = 1 << 26
REPEATS = 7
TARGET_S = 0.05  # aim for ~50 ms per timed repeat
DEV = torch.device("cuda")
rows: list[dict] = []
skipped: list[str] = []


# ---------------------------------------------------------------------------- timing

def _release(out):
    if out is None:
        return
    if isinstance(out, (list, tuple)):
        for o in out:
            _release(o)
    elif isinstance(out, dict):
        for o in out.values():
            _release(o)
    elif hasattr(out, "release"):
        out.release()


def _iters_for(seconds_per_call: float, lo=1, hi=500) -> int:
    return int(min(hi, max(lo, math.ceil(TARGET_S / max(seconds_per_call, 1e-7)))))


def time_tl(fn) -> float:
    """Median milliseconds per call of fn (whose result is released inside the loop)."""
    for _ in range(3):
        _release(fn())
    tl.synchronize()
    t0 = time.perf_counter()
    _release(fn())
    tl.synchronize()
    iters = _iters_for(time.perf_counter() - t0)
    times = []
    for _ in range(REPEATS):
        tl.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            _release(fn())
        tl.synchronize()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times) * 1e3


def time_torch(fn) -> float:
    """Median milliseconds per call of fn measured with CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    e.synchronize()
    iters = _iters_for(s.elapsed_time(e) / 1e3)
    times = []
    for _ in range(REPEATS):
        s.record()
        for _ in range(iters):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / iters)
    return statistics.median(times)


def row(name, tl_ms, torch_ms, nbytes=None, note=""):
    r = {"name": name, "tl": tl_ms, "torch": torch_ms, "note": note,
         "ratio": tl_ms / torch_ms if torch_ms else float("nan")}
    if nbytes:
        r["tl_gbs"] = nbytes / (tl_ms * 1e-3) / 1e9
        r["torch_gbs"] = nbytes / (torch_ms * 1e-3) / 1e9
    rows.append(r)
    print(f"  {name}: torchlean {tl_ms:.4f} ms, torch {torch_ms:.4f} ms, "
          f"ratio {r['ratio']:.2f} {note}", flush=True)
    return r


def needs(*names):
    missing = [n for n in names if n not in OPS]
    if missing:
        raise LookupError(f"op {', '.join(missing)} not in the registry")


SECTIONS: list = []


def bench(title):
    """Decorator: register a benchmark section; run_sections() turns a missing op or a failure
    into a note under "skipped" instead of stopping the table."""
    def deco(fn):
        SECTIONS.append((title, fn))
        return fn
    return deco


def run_sections(only=()):
    for title, fn in SECTIONS:
        if only and not any(w in title for w in only):
            continue
        print(f"[{title}]", flush=True)
        try:
            fn()
        except LookupError as e:
            skipped.append(f"{title}: {e}")
        except Exception as e:  # a broken row must not stop the table
            skipped.append(f"{title}: failed: {type(e).__name__}: {str(e)[:200]}")
            traceback.print_exc()
        finally:
            try:
                tl.synchronize()
            except Exception as e:  # a sticky error: report it, stop timing torchlean
                skipped.append(f"{title}: torchlean synchronize failed: {e}")
                break
            torch.cuda.synchronize()


def rand(shape, seed=0, lo=-1.0, hi=1.0):
    rng = np.random.default_rng(seed)
    return (rng.random(shape, dtype=np.float32) * np.float32(hi - lo) + np.float32(lo))


def both(shape, seed=0, **kw):
    a = rand(shape, seed, **kw)
    return tl.AnyBuffer.from_numpy(a), torch.from_numpy(a).to(DEV)


# ---------------------------------------------------------------------------- rows

COPY_GBS = {}
BYTES = N_BIG * 4
X = Y = XT = YT = M2 = M2T = None


def setup():
    global X, Y, XT, YT, M2, M2T
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    tl.set_deterministic(False)
    tl._lib.tl_set_allow_tf32(0)
    X, XT = both((N_BIG,), 1)
    Y, YT = both((N_BIG,), 2)
    M2, M2T = both((8192, 8192), 3)


@bench("copy")
def _copy():
    r = row("copy 2^26 (d2d clone)", time_tl(lambda: X.copy()), time_torch(lambda: XT.clone()),
            2 * BYTES)
    COPY_GBS["tl"], COPY_GBS["torch"] = r["tl_gbs"], r["torch_gbs"]


def _frac(r):
    if COPY_GBS:
        r["note"] = (f"{r['tl_gbs'] / COPY_GBS['tl']:.2f} of copy BW "
                     f"(torch {r['torch_gbs'] / COPY_GBS['torch']:.2f})")


@bench("add")
def _add():
    needs("add")
    _frac(row("add 2^26", time_tl(lambda: tl.ops.add(X, Y)), time_torch(lambda: XT + YT),
              3 * BYTES))


@bench("exp")
def _exp():
    needs("exp")
    _frac(row("exp 2^26", time_tl(lambda: tl.ops.exp(X)), time_torch(lambda: torch.exp(XT)),
              2 * BYTES))


@bench("sum")
def _sum():
    needs("sum")
    tsum = time_torch(lambda: XT.sum())
    tl.set_deterministic(False)
    row("sum 2^26 (default)", time_tl(lambda: tl.ops.sum(X)), tsum, BYTES)
    tl.set_deterministic(True)
    row("sum 2^26 (deterministic)", time_tl(lambda: tl.ops.sum(X)), tsum, BYTES)
    tl.set_deterministic(False)


@bench("reduce_sum")
def _reduce_sum():
    needs("reduce_sum")
    for axis in (0, 1):
        tt = time_torch(lambda: M2T.sum(dim=axis))
        for det in (False, True):
            tl.set_deterministic(det)
            row(f"reduce_sum 8192x8192 axis={axis} ({'deterministic' if det else 'default'})",
                time_tl(lambda: tl.ops.reduce_sum(M2, axis=axis)), tt, BYTES)
    tl.set_deterministic(False)


@bench("sum_to")
def _sum_to():
    needs("sum_to")
    tt = time_torch(lambda: M2T.sum(dim=0))
    for det in (False, True):
        tl.set_deterministic(det)
        row(f"sum_to 8192x8192 -> 8192 ({'deterministic' if det else 'default'})",
            time_tl(lambda: tl.ops.sum_to(M2, shape=(8192,))), tt, BYTES)
    tl.set_deterministic(False)


@bench("softmax")
def _softmax():
    needs("softmax")
    S, ST = both((16384, 4096), 4)
    r = row("softmax rows 16384x4096", time_tl(lambda: tl.ops.softmax(S)),
            time_torch(lambda: torch.softmax(ST, dim=-1)), 2 * BYTES)
    if COPY_GBS:
        r["note"] = (f"{r['tl_gbs'] / COPY_GBS['tl']:.2f} of copy BW "
                     f"(torch {r['torch_gbs'] / COPY_GBS['torch']:.2f})")
    S.release()
    # register rows of float4 (1024, 256 columns) and of single floats (1001: odd), and a GPT-2
    # vocabulary row (50257 columns: past the register rows, the strided schedule)
    for rows, cols in ((65536, 1024), (65536, 256), (65536, 1001), (4096, 50257)):
        S, ST = both((rows, cols), 4)
        row(f"softmax rows {rows}x{cols}", time_tl(lambda: tl.ops.softmax(S)),
            time_torch(lambda: torch.softmax(ST, dim=-1)), 2 * rows * cols * 4)
        S.release()
    S, ST = both((65536, 1024), 4)
    row("log_softmax rows 65536x1024", time_tl(lambda: tl.ops.log_softmax(S)),
        time_torch(lambda: torch.log_softmax(ST, dim=-1)), 2 * 65536 * 1024 * 4)
    Y, YT = tl.ops.softmax(S), torch.softmax(ST, dim=-1)
    G, GT = both((65536, 1024), 6)
    row("softmax backward 65536x1024", time_tl(lambda: tl.ops.softmax_backward(Y, G)),
        time_torch(lambda: torch._softmax_backward_data(GT, YT, -1, torch.float32)),
        3 * 65536 * 1024 * 4)
    for t in (S, Y, G):
        t.release()
    # masked softmax, a causal mask broadcast over 64 (1024, 1024) score matrices (uploaded once)
    from torchlean._opsupport import DeviceMask
    S, ST = both((64, 1024, 1024), 9)
    causal = np.tril(np.ones((1024, 1024), bool))
    dm, causalT = DeviceMask(causal), torch.from_numpy(causal).to(DEV)
    row("masked_softmax rows 65536x1024 (causal mask)",
        time_tl(lambda: tl.ops.masked_softmax(S, mask=dm)),
        time_torch(lambda: torch.softmax(ST.masked_fill(~causalT, float("-inf")), dim=-1)),
        2 * 65536 * 1024 * 4)
    S.release()
    dm.buf.release()
    # the fused language-model loss (forward: row statistics only) against torch's cross_entropy
    for rows, cols in ((16384, 8192), (4096, 50257)):
        S, ST = both((rows, cols), 7)
        lab = np.random.default_rng(8).integers(0, cols, rows)
        labT = torch.from_numpy(lab).to(DEV)
        row(f"cross_entropy_rows {rows}x{cols}",
            time_tl(lambda: tl.ops.cross_entropy_rows(S, labels=lab)),
            time_torch(lambda: torch.nn.functional.cross_entropy(ST, labT, reduction="none")),
            rows * cols * 4)
        S.release()


@bench("matmul")
def _matmul():
    needs("matmul")
    A, AT = both((4096, 4096), 5)
    B, BT = both((4096, 4096), 6)
    r = row("matmul 4096^2 fp32 (TF32 off)", time_tl(lambda: tl.ops.matmul(A, B)),
            time_torch(lambda: AT @ BT))
    fl = 2 * 4096**3
    r["note"] = f"{fl / (r['tl'] * 1e-3) / 1e12:.1f} TFLOP/s (torch {fl / (r['torch'] * 1e-3) / 1e12:.1f})"
    A.release()
    B.release()


@bench("tape op host overhead")
def _overhead():
    needs("add")
    n = 2000
    x1, y1 = rand((1,), 7), rand((1,), 8)
    # torchlean: one recorded tape op on 1-element leaves
    t = tl.Tape()
    a, b = t.leaf(x1), t.leaf(y1)
    for _ in range(50):
        t.add(a, b)
    tl.synchronize()
    best = []
    for _ in range(REPEATS):
        t.release()
        t = tl.Tape()
        a, b = t.leaf(x1), t.leaf(y1)
        tl.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            t.add(a, b)
        tl.synchronize()
        best.append((time.perf_counter() - t0) / n)
    t.release()
    xt = torch.from_numpy(x1).to(DEV).requires_grad_(True)
    yt = torch.from_numpy(y1).to(DEV).requires_grad_(True)
    tb = []
    for _ in range(REPEATS):
        outs = []
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n):
            outs.append(xt + yt)
        torch.cuda.synchronize()
        tb.append((time.perf_counter() - t0) / n)
        del outs
    r = row("tape add, 1 element (host overhead)", statistics.median(best) * 1e3,
            statistics.median(tb) * 1e3)
    r["note"] = f"{r['tl'] * 1e3:.1f} us vs torch eager {r['torch'] * 1e3:.1f} us per op (autograd recorded)"
    # where the host time goes: the bare C call (launch + checks) on a preallocated output,
    # one pool allocation + free, and the buffer-level op (checks, allocation, call)
    a, b = tl.AnyBuffer.from_numpy(x1), tl.AnyBuffer.from_numpy(y1)
    y = tl.AnyBuffer.from_numpy(x1)
    lib, ha, hb, hy = tl._lib, a.handle, b.handle, y.handle

    def per_call(fn):
        fn()
        tl.synchronize()
        ts = []
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            tl.synchronize()
            ts.append((time.perf_counter() - t0) / n * 1e6)
        return statistics.median(ts)

    c_call = per_call(lambda: lib.tl_add(ha, hb, hy, 1))
    alloc = per_call(lambda: lib.tl_buf_destroy(lib.tl_buf_new(1)))
    op = per_call(lambda: tl.ops.add(a, b).release())
    r["note"] += (f"; breakdown: C call {c_call:.1f} us, pool alloc+free {alloc:.1f} us, "
                  f"ops.add incl. alloc {op:.1f} us")
    _release([a, b, y])


def _attrs_of(opname):
    return {a.name for a in OPS[opname].attrs}


# (N, C_in, C_out, H, kernel, stride, padding): the first row is the long-standing one, then the
# four convolutions of the VGG-style CIFAR model (conv 64-64-pool-128-128-pool, batch 128), a 1x1
# and a stride-2 3x3. The input's gradient is computed on both sides (torchlean's conv backward
# always computes it; the torch input requires grad so cuDNN does the same work).
CONV_ROWS = [
    (64, 64, 64, 32, 3, 1, 1),
    (128, 3, 64, 32, 3, 1, 1),
    (128, 64, 64, 32, 3, 1, 1),
    (128, 64, 128, 16, 3, 1, 1),
    (128, 128, 128, 16, 3, 1, 1),
    (128, 128, 256, 16, 1, 1, 0),
    (128, 64, 128, 32, 3, 2, 1),
]


@bench("conv2d fwd+bwd")
def _conv():
    needs("conv2d")
    # on CUDA, conv_igemm.cu's implicit GEMMs unless TORCHLEAN_CONV_IGEMM=0 (im2col + cuBLAS)
    path = "im2col" if os.environ.get("TORCHLEAN_CONV_IGEMM") == "0" else "implicit GEMM"
    for i, (N, Ci, Co, H, k, st, pd) in enumerate(CONV_ROWS):
        x, xt = both((N, Ci, H, H), 9 + 10 * i)
        w, wt = both((Co, Ci, k, k), 10 + 10 * i, lo=-0.1, hi=0.1)
        bias, bt = both((Co,), 11 + 10 * i)
        OH = (H + 2 * pd - k) // st + 1
        g, gt = both((N, Co, OH, OH), 12 + 10 * i)
        for z in (xt, wt, bt):
            z.requires_grad_(True)

        def tl_step():
            t = tl.Tape()
            ik, ib, ix = t.leaf(w), t.leaf(bias), t.leaf(x)
            out = t.conv2d(ik, ib, ix, stride=st, padding=pd)
            _release(t.backward(out, seed=g, wrt=[ik, ib, ix]))
            t.release()

        def torch_step():
            y = F.conv2d(xt, wt, bt, stride=st, padding=pd)
            y.backward(gt)
            xt.grad = wt.grad = bt.grad = None

        shape = f"{k}x{k}" + (f" s{st}" if st != 1 else "") + (f" p{pd}" if pd != 1 else "")
        t_default = time_tl(tl_step)
        tl.set_deterministic(True)
        t_det = time_tl(tl_step)
        tl.set_deterministic(False)
        row(f"conv2d fwd+bwd N{N} {Ci}->{Co} {H}x{H} {shape}", t_default, time_torch(torch_step),
            note=f"{path} vs cuDNN, TF32 off; deterministic/default {t_det / t_default:.2f}")
        _release([x, w, bias, g])


# (N, C_in, C_out, H, kernel, stride, padding) of transposed convolutions (kernel (C_in, C_out,
# k, k)): a DCGAN-style 4x4 stride-2 upsampling, a U-Net 2x2 stride-2 one and a stride-1 3x3
CONV_TRANSPOSE_ROWS = [
    (128, 128, 64, 16, 4, 2, 1),
    (64, 128, 64, 16, 2, 2, 0),
    (64, 64, 64, 32, 3, 1, 1),
]


@bench("conv_transpose2d fwd+bwd")
def _conv_transpose():
    needs("conv_transpose2d")
    # on CUDA, the implicit GEMMs of the swapped convolution unless TORCHLEAN_CONV_IGEMM=0
    path = "im2col" if os.environ.get("TORCHLEAN_CONV_IGEMM") == "0" else "implicit GEMM"
    for i, (N, Ci, Co, H, k, st, pd) in enumerate(CONV_TRANSPOSE_ROWS):
        OH = (H - 1) * st - 2 * pd + k
        x, xt = both((N, Ci, H, H), 19 + 10 * i)
        w, wt = both((Ci, Co, k, k), 20 + 10 * i, lo=-0.1, hi=0.1)
        bias, bt = both((Co,), 21 + 10 * i)
        g, gt = both((N, Co, OH, OH), 22 + 10 * i)
        for z in (xt, wt, bt):
            z.requires_grad_(True)

        def tl_step():
            t = tl.Tape()
            ik, ib, ix = t.leaf(w), t.leaf(bias), t.leaf(x)
            out = t.conv_transpose2d(ik, ib, ix, stride=st, padding=pd)
            _release(t.backward(out, seed=g, wrt=[ik, ib, ix]))
            t.release()

        def torch_step():
            y = F.conv_transpose2d(xt, wt, bt, stride=st, padding=pd)
            y.backward(gt)
            xt.grad = wt.grad = bt.grad = None

        shape = f"{k}x{k}" + (f" s{st}" if st != 1 else "") + (f" p{pd}" if pd != 1 else "")
        row(f"conv_transpose2d fwd+bwd N{N} {Ci}->{Co} {H}x{H} {shape}", time_tl(tl_step),
            time_torch(torch_step), note=f"{path} vs cuDNN, TF32 off")
        _release([x, w, bias, g])


@bench("attention fwd+bwd")
def _attention():
    needs("multi_head_attention")
    # (B, H, n, hd, causal, forward-only row too): the transformer shape of the first table and
    # the common LLM shape (head dim 128), each plain and causal (torch: SDPA's is_causal)
    for shape in [(8, 8, 1024, 64, False, True), (8, 8, 1024, 64, True, False),
                  (4, 16, 2048, 128, False, True), (4, 16, 2048, 128, True, False)]:
        _attention_rows(*shape)


def _attention_rows(B, Hh, n, hd, causal, fwd_row):
    d = Hh * hd
    x, xt = both((B, n, d), 13)
    Ws = [both((d, d), 14 + i, lo=-0.05, hi=0.05) for i in range(4)]
    g, gt = both((B, n, d), 18)
    attrs = _attrs_of("multi_head_attention")
    kw = {"num_heads": Hh}
    if "use_flash" in attrs:
        kw["use_flash"] = True
    if causal:
        if "causal" not in attrs:
            raise LookupError("multi_head_attention has no causal attr")
        kw["causal"] = True
    xt.requires_grad_(True)
    for _, wt in Ws:
        wt.requires_grad_(True)
    label = f"B{B} H{Hh} n{n} hd{hd}{' causal' if causal else ''} (with projections)"
    note = f"vs F.scaled_dot_product_attention fp32{' is_causal' if causal else ''}"

    def tl_step():
        t = tl.Tape()
        ids = [t.leaf(w) for w, _ in Ws] + [t.leaf(x)]
        out = t.multi_head_attention(*ids, **kw)
        _release(t.backward(out, seed=g, wrt=ids))
        t.release()

    def torch_out():
        q, k, v = (xt @ Ws[i][1] for i in range(3))
        q, k, v = (z.view(B, n, Hh, hd).transpose(1, 2) for z in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return o.transpose(1, 2).reshape(B, n, d) @ Ws[3][1]

    def torch_step():
        torch_out().backward(gt)
        xt.grad = None
        for _, wt in Ws:
            wt.grad = None

    row(f"attention fwd+bwd {label}", time_tl(tl_step), time_torch(torch_step), note=note)

    def tl_fwd():
        t = tl.Tape()
        ids = [t.leaf(w, requires_grad=False) for w, _ in Ws] + [t.leaf(x, requires_grad=False)]
        t.multi_head_attention(*ids, **kw)
        t.release()

    def torch_fwd():
        with torch.no_grad():
            return torch_out()

    if fwd_row:
        row(f"attention fwd only {label}", time_tl(tl_fwd), time_torch(torch_fwd), note=note)
    _release([x, g] + [w for w, _ in Ws])


@bench("layer_norm fwd+bwd")
def _layer_norm():
    needs("layer_norm")
    R, D = 8192, 1024
    x, xt = both((R, D), 19)
    gm, gmt = both((D,), 20)
    bt_, btt = both((D,), 21)
    g, gt = both((R, D), 22)
    for z in (xt, gmt, btt):
        z.requires_grad_(True)

    def tl_step():
        t = tl.Tape()
        ids = [t.leaf(x), t.leaf(gm), t.leaf(bt_)]
        out = t.layer_norm(*ids)
        _release(t.backward(out, seed=g, wrt=ids))
        t.release()

    def torch_step():
        F.layer_norm(xt, (D,), gmt, btt, eps=1e-5).backward(gt)
        xt.grad = gmt.grad = btt.grad = None

    row(f"layer_norm fwd+bwd {R}x{D}", time_tl(tl_step), time_torch(torch_step))
    # forward alone as a bandwidth figure: x read once, y and the saved xhat written
    xd = xt.detach()
    r = row(f"layer_norm fwd {R}x{D}", time_tl(lambda: tl.ops.layer_norm(x, gm, bt_)),
            time_torch(lambda: F.layer_norm(xd, (D,), gmt.detach(), btt.detach(), eps=1e-5)),
            3 * R * D * 4)
    if COPY_GBS:
        r["note"] = (f"{r['tl_gbs'] / COPY_GBS['tl']:.2f} of copy BW counting x, y and xhat "
                     f"(torch moves only x and y: {2 * r['torch_gbs'] / 3 / COPY_GBS['torch']:.2f})")
    _release([x, gm, bt_, g])


# ---------------------------------------------------------------------------- table

def fmt_table() -> str:
    name = torch.cuda.get_device_name(0)
    props = torch.cuda.get_device_properties(0)
    lines = [
        "# torchlean CUDA vs PyTorch",
        "",
        f"Device: {name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}; {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC.",
        "",
        "torchlean: wall time of a loop of calls ended by torchlean.synchronize() (host overhead "
        "included); torch: CUDA events. Medians of "
        f"{REPEATS} repeats after warm-up, random float32 data, TF32 off on both sides. "
        "ratio = torchlean / torch (lower is better for torchlean).",
        "",
        "| benchmark | torchlean ms | torch ms | ratio | torchlean GB/s | torch GB/s | note |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        gbs = (f"{r['tl_gbs']:.0f} | {r['torch_gbs']:.0f}" if "tl_gbs" in r else " | ")
        lines.append(f"| {r['name']} | {r['tl']:.4f} | {r['torch']:.4f} | {r['ratio']:.2f} | "
                     f"{gbs} | {r['note']} |")
    if skipped:
        lines += ["", "Skipped:", ""] + [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.environ.get("BENCH_OUT"),
                   help="also write the table to this file (default: $BENCH_OUT, else none)")
    p.add_argument("--only", default=os.environ.get("BENCH_ONLY", ""),
                   help="comma-separated words: run the sections whose title holds one "
                        "(default: $BENCH_ONLY, else all)")
    args = p.parse_args(argv)
    assert tl.backend() == "cuda", f"bench_cuda needs the CUDA backend, got {tl.backend()}"
    setup()
    run_sections([w for w in args.only.split(",") if w])
    _release([X, Y, M2])
    text = fmt_table()
    print(text)
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)


if __name__ == "__main__":
    main()
