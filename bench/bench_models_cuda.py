"""Issue 34's whole table in one run: torchlean default, torchlean exact and PyTorch eager side by
side on the seven models, and the micro rows (BatchNorm2d, attention, exact GEMM, captured step).

    TORCHLEAN_BACKEND=cuda python3 bench/bench_models_cuda.py --out bench/results/models-exact.md
    python3 bench/bench_models_cuda.py --quick        # toy sizes on any backend (a smoke run)

Sections (--sections, in this order; the markdown is rewritten after each, so a run cut short
keeps what it measured):
- models: MLP 784-512-512-10 b128, CNN 28x28 b64, VGG-style CIFAR b128, ResNet-style CIFAR
  with BatchNorm b128, LM d256 L4 T128 b32 AdamW, GPT-2 width d768 L6 T512 V8192 b8, FNO.
  bench_models.py's workloads (GPT: bench_gpt_step.py's sizes), one training step with the host
  batch uploaded every step, TF32 off on both sides; torchlean's default and exact modes and
  torch eager from the same initial weights on the same batches. sidebyside.measure: warm-up,
  then the median of --repeats runs of about --target-s seconds closed by a synchronisation.
  Peak: allocator peak over the timed runs minus what it held before the model was built.
- capture: whole-step capture (torchlean.cuda.graph_step) of MLP, CNN, LM vs torch's CUDA graph
  of the same step: ms/step, and host microseconds per replay (bench_graph_step.host_us:
  bursts of 10 calls before the closing synchronisation) with float batches on the device
  (torchlean's integer labels and tokens stay NumPy, uploaded per replay; torch copies both
  from device tensors) and, for torch, the bare graph.replay().
- bn: batchnorm_channel_first forward + backward at N128 C32 32x32, C64 16x16, C128 8x8, exact
  and default, vs torch's batch_norm (cuDNN); kernel time, CUDA events, medians.
- attention: the attention core (no projections) forward + backward, hd64 n512/1024/2048 and
  hd128 n2048, causal and not, exact and default vs F.scaled_dot_product_attention; time and
  peak memory of one forward + backward above the inputs.
- gemm: tl_gemm_exact vs cuBLAS SGEMM (tl_matmul_t in default mode, TF32 off) on NN, NT and TN
  layouts, a transformer layer's forward, input- and weight-gradient shapes included.
A row that fails says so in the table (the error) and the run goes on. Off CUDA the timings
are wall-clock around synchronised loops (no CUDA events) and torch runs on the CPU.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import math
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import bench_models as bm  # noqa: E402
from sidebyside import TorchSide, measure, mib, torchlean_hooks  # noqa: E402

MODELS = ["mlp", "cnn", "vgg", "resnet", "lm", "gpt", "fno"]
GPT = dict(full=dict(vocab=8192, d=768, heads=12, layers=6, T=512, batch=8),
           quick=dict(vocab=37, d=16, heads=2, layers=2, T=8, batch=2))
BN = dict(full=[(128, 32, 32), (128, 64, 16), (128, 128, 8)], quick=[(4, 3, 5), (2, 8, 4)])
ATTN = dict(full=[(b, h, n, hd, c) for b, h, n, hd in [(8, 12, 512, 64), (8, 8, 1024, 64),
                                                       (4, 8, 2048, 64), (4, 8, 2048, 128)]
                  for c in (False, True)],
            quick=[(1, 2, 16, 8, False), (1, 2, 16, 8, True)])
GEMM = dict(full={"4096^3 NN": (1, 4096, 4096, 4096, 0, 0),
                  "fwd NT 4096x768->3072": (1, 4096, 768, 3072, 0, 1),
                  "dgrad NN 4096x3072->768": (1, 4096, 3072, 768, 0, 0),
                  "wgrad TN 3072x4096->768": (1, 3072, 4096, 768, 1, 0),
                  "wgrad TN 768x4096->3072": (1, 768, 4096, 3072, 1, 0),
                  "LM wgrad TN 256x4096->256": (1, 256, 4096, 256, 1, 0),
                  "LM wgrad TN 1024x4096->256": (1, 1024, 4096, 256, 1, 0),
                  "FNO wgrad TN 64x20480->64": (1, 64, 20480, 64, 1, 0)},
            quick={"NN 33x17x9": (1, 33, 17, 9, 0, 0), "NT 33x17x9": (1, 33, 17, 9, 0, 1),
                   "TN 9x40x13": (1, 9, 40, 13, 1, 0)})
CAPTURE = ["mlp", "cnn", "lm"]
TARGET = dict(default_torch=0.8, exact_default=1.2, exact_geomean=1.1, exact_torch=1.0,
              memory=0.8, micro=1.0, gemm=0.9, host_us=15.0)


def _fmt(v, spec=".3f"):
    return "n/a" if v is None else format(v, spec)


def _ratio(a, b, limit=None):
    if a is None or not b:
        return "n/a"
    r = a / b
    return f"{r:.2f}x" + ("" if limit is None else (" ok" if r <= limit else " **MISS**"))


def _err(e) -> str:
    return f"{type(e).__name__}: {e}".replace("|", "/").replace("\n", " ")[:160]


class Clock:
    """Median milliseconds of fn(): CUDA events on each library's stream on CUDA, else a
    synchronised wall-clock loop (a smoke run's numbers)."""

    def __init__(self, tl):
        self.tl, self.side, self.ev = tl, None, None
        if tl.backend() == "cuda":
            from bench_attention_exact import Events
            self.ev = Events()

    def time_ms(self, fn, reps, warm=3):    # torchlean's stream (bench_*_exact's interface)
        if self.ev is not None:
            return self.ev.time_ms(fn, reps, warm)
        return self._wall(fn, reps, warm, self.tl.synchronize)

    def torch_ms(self, fn, reps, warm=3):
        if self.side.cuda:
            from cuda_timing import torch_median_ms
            return torch_median_ms(self.side.torch, fn, reps, warm)
        return self._wall(fn, reps, warm, self.side.sync)

    @staticmethod
    def _wall(fn, reps, warm, sync):
        for _ in range(warm):
            fn()
        sync()
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            sync()
            out.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(out)


class Run:
    """The run's state: torchlean, the torch side, the options, the sections' lines so far."""

    def __init__(self, args):
        import torchlean as tl
        self.tl, self.args = tl, args
        self.restore = bm._default_mode(tl)
        self.clock = Clock(tl)   # before torch loads: the events use torchlean's libcudart
        self.side = self.clock.side = TorchSide(tl.backend(), args.no_torch)
        self.size = "quick" if args.quick else "full"
        self.t0 = time.perf_counter()
        self.sections: list[list[str]] = []

    def left_s(self) -> float:
        return self.args.budget_s - (time.perf_counter() - self.t0)

    def timing(self) -> dict:
        a = self.args
        if a.quick:
            return dict(warmup=1, repeats=1, steps=1)
        return dict(warmup=a.warmup, repeats=a.repeats, steps=0, target_s=a.target_s,
                    budget_s=a.model_budget_s)

    def clean(self):
        gc.collect()
        self.tl.empty_cache()
        self.side.empty_cache()

    def write(self):
        text = self.header() + "\n".join(line for sec in self.sections for line in sec) + "\n"
        if self.args.out:
            Path(self.args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(self.args.out).write_text(text)
        return text

    def header(self) -> str:
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        cmd = " ".join(["python3", "bench/bench_models_cuda.py"] + sys.argv[1:])
        return (f"# Issue 34: torchlean default, exact and PyTorch eager side by side\n\n"
                f"- date: {now}; device: {self.side.device_name}; torchlean backend "
                f"{self.tl.backend()}; PyTorch: {self.side.note}; sizes: {self.size}\n"
                f"- command: `TORCHLEAN_BACKEND={self.tl.backend()} {cmd}`\n"
                f"- TF32 off on both sides; default = torchlean's default mode, exact = "
                f"torchlean.set_exact(True); targets (issue 34): default <= "
                f"{TARGET['default_torch']}x torch and peak <= {TARGET['memory']}x; exact <= "
                f"{TARGET['exact_default']}x default (geometric mean <= "
                f"{TARGET['exact_geomean']}x) and <= {TARGET['exact_torch']}x torch; BatchNorm "
                f"and attention <= 1.0x torch (attention memory too); exact GEMM >= 90% of "
                f"cuBLAS; captured step <= {TARGET['host_us']:.0f} us host time per replay.\n\n")


# ------------------------------------------------------------------------------ models
def workload(name, size, rng):
    if name == "gpt":
        w = bm.lm(dict(GPT[size]), rng)
        c = GPT[size]
        w.name, w.desc = "gpt", (f"GPT-2 width LM d={c['d']} heads={c['heads']} "
                                 f"layers={c['layers']} T={c['T']} vocab={c['vocab']}, AdamW")
        return w
    return bm.BUILDERS[name](bm.SIZES[name][size], rng)


def _tl_side(run, w, exact):
    tl = run.tl
    sync, reset, peak = torchlean_hooks(tl)
    run.clean()
    base = tl.memory_stats()["live_bytes"]
    tl.set_exact(exact)
    try:
        step, state = bm.tl_trainer(w)
        r = measure(step, sync, reset, peak, **run.timing())
    finally:
        tl.set_exact(False)
        tl.set_deterministic(False)
    r["above"] = r["peak"] - base
    del step
    run.clean()
    return r, state


def _torch_side(run, w, state):
    side = run.side
    run.clean()
    base = side.live()
    step = bm.torch_trainer(w, side, state)
    r = measure(step, side.sync, side.reset_peak, side.peak, **run.timing())
    r["above"] = None if base is None or r["peak"] is None else r["peak"] - base
    del step
    run.clean()
    return r


def section_models(run):
    lines = ["## Models: one training step (ms), peak memory above the baseline (MiB)", "",
             "| model | default ms | exact ms | torch ms | default / torch | exact / default "
             "| exact / torch | peak default / exact / torch MiB | memory default / torch "
             "| first loss default / exact / torch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    run.sections.append(lines)
    rng = np.random.default_rng(0)
    ex_over = []
    for name in run.args.models:
        if run.left_s() < 30:
            lines.append(f"| {name} | skipped: the run's time budget is spent |||||||||")
            continue
        t0 = time.perf_counter()
        res, notes = {}, []
        try:
            w = workload(name, run.size, rng)
        except Exception as e:
            lines.append(f"| {name} | failed to build: {_err(e)} |||||||||")
            continue
        state = None
        for key, exact in (("default", False), ("exact", True)):
            try:
                res[key], state = _tl_side(run, w, exact)
            except Exception as e:
                notes.append(f"{key}: {_err(e)}")
                traceback.print_exc()
        if run.side.dev is not None and state is not None:
            try:
                res["torch"] = _torch_side(run, w, state)
            except Exception as e:
                notes.append(f"torch: {_err(e)}")
                traceback.print_exc()
        ms = {k: (res[k]["step_s"] * 1e3 if k in res else None)
              for k in ("default", "exact", "torch")}
        up = {k: (res[k]["above"] if k in res else None) for k in ("default", "exact", "torch")}
        if ms["exact"] and ms["default"]:
            ex_over.append(ms["exact"] / ms["default"])
        peaks = " / ".join(_fmt(None if v is None else v / 2 ** 20, ".1f") for v in up.values())
        loss = " / ".join(_fmt(res[k]["first_loss"] if k in res else None, ".5f")
                          for k in ("default", "exact", "torch"))
        lines.append(f"| {name}{' (' + '; '.join(notes) + ')' if notes else ''} | "
                     f"{_fmt(ms['default'])} | {_fmt(ms['exact'])} | {_fmt(ms['torch'])} | "
                     f"{_ratio(ms['default'], ms['torch'], TARGET['default_torch'])} | "
                     f"{_ratio(ms['exact'], ms['default'], TARGET['exact_default'])} | "
                     f"{_ratio(ms['exact'], ms['torch'], TARGET['exact_torch'])} | {peaks} | "
                     f"{_ratio(up['default'], up['torch'], TARGET['memory'])} | {loss} |")
        print(f"[{time.perf_counter() - run.t0:6.1f} s] models {name}: {lines[-1]} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
        run.write()
    if ex_over:
        g = math.exp(sum(map(math.log, ex_over)) / len(ex_over))
        lines += ["", f"Geometric mean of exact / default over {len(ex_over)} models: "
                  f"{g:.2f}x (target <= {TARGET['exact_geomean']}x: "
                  f"{'ok' if g <= TARGET['exact_geomean'] else 'MISS'})."]
    lines.append("")


# ------------------------------------------------------------------------------ capture
def section_capture(run):
    import bench_graph_step as bg
    tl, side = run.tl, run.side
    sync = tl.synchronize
    lines = ["## Whole-step capture: torchlean graph_step vs torch's CUDA graph (default mode)",
             "", "| model | torchlean graph ms | torch graph ms | graph tl / torch | host us per "
             "replay, torchlean (numpy / device floats) | host us per replay, torch (device "
             "copies / bare replay) | captures |", "|---|---:|---:|---:|---:|---:|---:|"]
    run.sections.append(lines)
    if tl.backend() != "cuda":
        lines.insert(1, "(not CUDA: graph_step runs the step eagerly here, torch has no graph)")
    rng = np.random.default_rng(1)
    for name in CAPTURE:
        if run.left_s() < 20:
            lines.append(f"| {name} | skipped: the run's time budget is spent ||||||")
            continue
        cells, notes = {}, []
        try:
            w = workload(name, run.size, rng)
            gstep, g = bg.tl_graph_trainer(w, tl)
            cells["tl_ms"] = measure(gstep, sync, tl.reset_peak_memory_stats, lambda: None,
                                     **run.timing())["step_s"] * 1e3
            cells["tl_np"] = bg.host_us(gstep, sync)
            cells["captures"] = g.captures
            g.reset()
            dstep, dg = bg.tl_graph_trainer(w, tl, on_device=True)
            for i in range(3):
                dstep(i)
            cells["tl_dev"] = bg.host_us(dstep, sync)
            dg.reset()
            del gstep, dstep
            run.clean()
        except Exception as e:
            notes.append(f"torchlean: {_err(e)}")
            traceback.print_exc()
        if not side.cuda:
            notes.append("torch graph: needs torch on CUDA")
        else:
            try:
                _, state = bm.tl_trainer(w)
                tstep = bg.torch_graph_trainer(w, side, state)
                cells["th_ms"] = measure(tstep, side.sync, side.reset_peak, side.peak,
                                         **run.timing())["step_s"] * 1e3
                torch, dev = side.torch, side.dev
                dev_b = [(torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev))
                         for x, y in w.batches]
                sx, sy = tstep.static

                def copy_replay(i, want_loss=False):
                    x, y = dev_b[i % len(dev_b)]
                    sx.copy_(x)
                    sy.copy_(y)
                    tstep.graph.replay()
                cells["th_dev"] = bg.host_us(copy_replay, side.sync)
                cells["th_bare"] = bg.host_us(lambda i: tstep.graph.replay(), side.sync)
                del tstep
                run.clean()
            except Exception as e:
                notes.append(f"torch graph: {_err(e)}")
                traceback.print_exc()
        host = (f"{_fmt(cells.get('tl_np'), '.1f')} / {_fmt(cells.get('tl_dev'), '.1f')}"
                + ("" if "tl_dev" not in cells else
                   (" ok" if cells["tl_dev"] <= TARGET["host_us"] else " **MISS**")))
        lines.append(f"| {name}{' (' + '; '.join(notes) + ')' if notes else ''} | "
                     f"{_fmt(cells.get('tl_ms'))} | {_fmt(cells.get('th_ms'))} | "
                     f"{_ratio(cells.get('tl_ms'), cells.get('th_ms'), 1.0)} | {host} | "
                     f"{_fmt(cells.get('th_dev'), '.1f')} / {_fmt(cells.get('th_bare'), '.1f')} "
                     f"| {cells.get('captures', 'n/a')} |")
        print(f"[{time.perf_counter() - run.t0:6.1f} s] capture {name}: {lines[-1]}", flush=True)
        run.write()
    lines.append("")


# ------------------------------------------------------------------------------ BatchNorm
def section_bn(run):
    import bench_bn_exact as bn
    tl, side = run.tl, run.side
    lines = ["## BatchNorm2d forward + backward (batchnorm_channel_first), kernel ms", "",
             "| N, C, HxW | exact fwd+bwd | default fwd+bwd | torch fwd+bwd | exact / default "
             "| default / torch | exact / torch |", "|---|---:|---:|---:|---:|---:|---:|"]
    run.sections.append(lines)
    for n, c, h in BN[run.size]:
        try:
            arrs = bn.arrays(0, (n, c, h, h))
            bufs = [tl.AnyBuffer.from_numpy(a) for a in arrs]
            ef, eb = bn.time_torchlean(run.clock, bufs, True, run.args.reps)
            df, db = bn.time_torchlean(run.clock, bufs, False, run.args.reps)
            bn.release(bufs)
            th = None
            if side.dev is not None:
                torch, F = side.torch, side.torch.nn.functional
                x, ga, be, g = (torch.tensor(a, device=side.dev, requires_grad=True)
                                for a in arrs)

                def step():
                    F.batch_norm(x, None, None, ga, be, training=True,
                                 eps=1e-5).backward(g.detach())
                th = run.clock.torch_ms(step, run.args.reps, warm=5)
            e, d = ef + eb, df + db
            lines.append(f"| {n}, {c}, {h}x{h} | {e:.3f} | {d:.3f} | {_fmt(th)} | "
                         f"{_ratio(e, d)} | {_ratio(d, th, TARGET['micro'])} | "
                         f"{_ratio(e, th, TARGET['micro'])} |")
        except Exception as ex:
            lines.append(f"| {n}, {c}, {h}x{h} | failed: {_err(ex)} ||||||")
            traceback.print_exc()
        print(f"[{time.perf_counter() - run.t0:6.1f} s] bn: {lines[-1]}", flush=True)
    run.write()
    lines.append("")


# ------------------------------------------------------------------------------ attention
def _tl_attention_mib(tl, q, k, v, g, causal, exact):
    """Peak MiB of one forward + backward above what was live before (inputs excluded)."""
    from torchlean._generated import ops
    tl.set_exact(exact)
    try:
        tl.synchronize()
        base = tl.memory_stats()["live_bytes"]
        tl.reset_peak_memory_stats()
        o, lse = ops.attention(q, k, v, causal=causal)
        grads = ops.attention_backward(g, q, k, v, o, lse, causal=causal)
        tl.synchronize()
        peak = tl.memory_stats()["peak_bytes"]
        for b in (o, lse) + tuple(grads):
            b.release()
    finally:
        tl.set_exact(False)
    return (peak - base) / 2 ** 20


def section_attention(run):
    import bench_attention_exact as ba
    tl, side = run.tl, run.side
    lines = ["## Attention core forward + backward vs SDPA (B, H, n, hd): kernel ms, peak MiB "
             "of one forward + backward above the inputs", "",
             "| B, H, n, hd, causal | exact ms | default ms | SDPA ms | default / SDPA "
             "| exact / SDPA | default MiB | exact MiB | SDPA MiB | memory default / SDPA |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    run.sections.append(lines)
    rng = np.random.default_rng(0)
    for B, H, n, hd, causal in ATTN[run.size]:
        label = f"{B}, {H}, {n}, {hd}, {'causal' if causal else 'full'}"
        if run.left_s() < 15:
            lines.append(f"| {label} | skipped: the run's time budget is spent |||||||||")
            continue
        try:
            arrays = [rng.standard_normal((B * H, n, hd)).astype(np.float32) for _ in range(4)]
            q, k, v, g = (tl.AnyBuffer.from_numpy(a) for a in arrays)
            ef, eb = ba.time_torchlean(run.clock, q, k, v, g, causal, True, run.args.reps)
            df, db = ba.time_torchlean(run.clock, q, k, v, g, causal, False, run.args.reps)
            e_mib = _tl_attention_mib(tl, q, k, v, g, causal, True)
            d_mib = _tl_attention_mib(tl, q, k, v, g, causal, False)
            ba.release([q, k, v, g])
            th = th_mib = None
            if side.dev is not None:
                torch, F = side.torch, side.torch.nn.functional
                tq, tk, tv, tg = (torch.tensor(a.reshape(B, H, n, hd), device=side.dev,
                                               requires_grad=True) for a in arrays)

                def step():
                    F.scaled_dot_product_attention(tq, tk, tv, is_causal=causal).backward(
                        tg.detach())
                th = run.clock.torch_ms(step, run.args.reps)
                if side.cuda:
                    tq.grad = tk.grad = tv.grad = None
                    side.sync()
                    base = side.live()
                    side.reset_peak()
                    step()
                    side.sync()
                    th_mib = (side.peak() - base) / 2 ** 20
                del tq, tk, tv, tg
            e, d = ef + eb, df + db
            lines.append(f"| {label} | {e:.3f} | {d:.3f} | {_fmt(th)} | "
                         f"{_ratio(d, th, TARGET['micro'])} | {_ratio(e, th, TARGET['micro'])} | "
                         f"{d_mib:.1f} | {e_mib:.1f} | {_fmt(th_mib, '.1f')} | "
                         f"{_ratio(d_mib, th_mib, TARGET['micro'])} |")
        except Exception as ex:
            lines.append(f"| {label} | failed: {_err(ex)} |||||||||")
            traceback.print_exc()
        run.clean()
        print(f"[{time.perf_counter() - run.t0:6.1f} s] attention: {lines[-1]}", flush=True)
        run.write()
    lines.append("")


# ------------------------------------------------------------------------------ GEMM
def section_gemm(run):
    import bench_gemm_exact as bg
    lines = ["## Exact GEMM (tl_gemm_exact, stub bits) vs cuBLAS SGEMM (tl_matmul_t, default "
             "mode): ms per call, median of timed loops", "",
             "| shape (batch, m, k, n, layout) | exact ms | cuBLAS ms | exact / cuBLAS speed "
             "| cuBLAS TFLOP/s |", "|---|---:|---:|---:|---:|"]
    run.sections.append(lines)
    run.tl.set_exact(False)
    for name, shape in GEMM[run.size].items():
        if run.left_s() < 10:
            lines.append(f"| {name} | skipped: the run's time budget is spent ||||")
            continue
        try:
            t = bg.timing(shape, run.args.gemm_reps, cublas=True)
            b, m, k, n, _, _ = shape
            speed = t["cublas"] / t["exact"]
            lines.append(f"| {name} | {t['exact'] * 1e3:.3f} | {t['cublas'] * 1e3:.3f} | "
                         f"{speed:.0%}{' ok' if speed >= TARGET['gemm'] else ' **MISS**'} | "
                         f"{2 * b * m * k * n / t['cublas'] / 1e12:.1f} |")
        except Exception as ex:
            lines.append(f"| {name} | failed: {_err(ex)} ||||")
            traceback.print_exc()
        print(f"[{time.perf_counter() - run.t0:6.1f} s] gemm: {lines[-1]}", flush=True)
        run.write()
    lines.append("")


SECTIONS = dict(models=section_models, capture=section_capture, bn=section_bn,
                attention=section_attention, gemm=section_gemm)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="write the markdown table here (after each "
                                               "section too)")
    p.add_argument("--sections", default=",".join(SECTIONS))
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--quick", action="store_true", help="toy sizes, one timed step (smoke run)")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--target-s", type=float, default=0.2, help="length of one timed run")
    p.add_argument("--model-budget-s", type=float, default=3.0,
                   help="rough seconds per model measurement (slow steps: fewer repeats)")
    p.add_argument("--reps", type=int, default=20, help="micro rows: timed calls")
    p.add_argument("--gemm-reps", type=int, default=5)
    p.add_argument("--budget-s", type=float, default=400.0,
                   help="rows still to come once this much time is spent are skipped")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in args.models if m not in MODELS] + \
        [s for s in args.sections.split(",") if s not in SECTIONS]
    if bad:
        p.error(f"unknown model(s) or section(s) {bad}: models {MODELS}, sections {list(SECTIONS)}")
    if args.quick:
        args.reps, args.gemm_reps = 2, 1
    run = Run(args)
    print(f"torchlean {run.tl.backend()}, {run.side.note}, {run.side.device_name}", flush=True)
    for name in args.sections.split(","):
        try:
            SECTIONS[name](run)
        except Exception as e:   # a section that breaks as a whole: say so, go on
            run.sections.append([f"## {name}: failed: {_err(e)}", ""])
            traceback.print_exc()
        run.write()
    run.restore()
    text = run.write()
    print()
    print(text)
    print(f"total {time.perf_counter() - run.t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
