"""Whole-step capture (torchlean.cuda.graph_step, issue 24): the MLP, small CNN and LM d256
training steps of bench_models.py, torchlean eager vs torchlean graph vs PyTorch eager (and
PyTorch's own CUDA graph of the whole step), side by side in one run.

    python bench/bench_graph_step.py [--models mlp,cnn,lm] [--steps N] [--repeats R]
                                     [--quick] [--no-torch] [--out FILE]

ms/step: median of `repeats` runs of `steps` steps after warm-up, each run closed by a device
synchronisation (sidebyside.measure). host us/replay: the host time of one replayed call
(graph_step's checks, the input copies and the launch), the median of bursts of 10 calls
timed before the closing synchronisation, with the batch given as NumPy arrays (the copy of
a float batch into pinned memory included) and with float batches already on the device
(device Tensors; integer labels and tokens stay NumPy); the target applies to the latter. Targets: graph at most 0.5x torch eager, host time
under 50 us per replay. TF32 off on both sides, default (non-deterministic) modes.

--python-only (any backend, the stub included): the Python side of a replay alone, the native
tl_graph_* calls replaced by no-ops (capture runs the step once, eagerly), device-Tensor float
inputs, median microseconds per call of bursts of 200 calls; LM with 4 layers as in the full
size (54 parameters) at toy widths."""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402

from bench_models import BUILDERS, SIZES, tl_trainer, torch_trainer  # noqa: E402
from sidebyside import TorchSide, measure, torchlean_hooks  # noqa: E402

SPEED_TARGET, HOST_TARGET_US = 0.5, 50.0


def tl_graph_trainer(w, tl, on_device=False):
    """step(i, want_loss) replaying the captured step, and the graph_step object; on_device:
    the float batches are device Tensors already (no host copy of the input per call)."""
    from torchlean import nn, optim
    from torchlean.cuda import graph_step
    from torchlean.session import default_session, manual_seed
    manual_seed(0)
    model = w.build_tl()
    kind, kw = w.opt
    opt = {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW}[kind](
        model.parameters(), **kw)
    F = nn.functional

    def train_step(x, y):
        opt.zero_grad()
        out = model(x, default_session()) if w.int_input else model(x)
        if w.loss == "ce":
            loss = F.cross_entropy(out, y)
        elif w.loss == "ce_seq":
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        else:
            loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
        return loss

    g = graph_step(train_step)
    batches = w.batches
    if on_device:
        batches = [(x if x.dtype.kind in "iu" else tl.tensor(x),
                    y if y.dtype.kind in "iu" else tl.tensor(y)) for x, y in w.batches]

    def step(i, want_loss=False):
        x, y = batches[i % len(batches)]
        loss = g(x, y)
        return loss.item() if want_loss else None

    return step, g


def host_us(step, sync, bursts=7, calls=10, start=1000) -> float:
    """Median host microseconds of one call, over bursts of `calls` calls (synchronised
    between bursts, so the launch queue never fills)."""
    out, i = [], start
    for _ in range(bursts):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            step(i)
            i += 1
        out.append((time.perf_counter() - t0) / calls * 1e6)
    sync()
    return statistics.median(out)


class _NoGraphLib:
    """The loaded library with graph_step's native calls as no-ops (--python-only)."""

    def __init__(self, real):
        self._real = real
        self._keep = []    # the stand-ins of pinned staging

    def __getattr__(self, name):
        return getattr(self._real, name)

    def tl_graph_new(self, out):
        from torchlean._loader import ffi
        out[0] = ffi.cast("void *", 1)
        return 0

    def tl_graph_bind_host(self, g, host, nbytes, out):
        from torchlean._loader import ffi
        out[0] = int(ffi.cast("uintptr_t", host))
        return 0

    def tl_graph_bind_input(self, g, dst, nbytes, staged, depth, out):
        from torchlean._loader import ffi
        buf = ffi.new("char[]", ((nbytes + 255) // 256 * 256 if staged else 8) * depth)
        self._keep.append(buf)
        out[0] = buf
        return 0

    def tl_graph_bound_read(self, g, i):
        return 2

    def tl_graph_destroy(self, g):
        return None

    def _ok(self, *a):
        return 0

    tl_graph_wait_inputs = tl_graph_copy = tl_graph_begin = tl_graph_end = tl_graph_abort = _ok
    tl_graph_launch = tl_graph_set_rng = tl_graph_constants = tl_graph_persistent = _ok


def python_only(models, rounds=15, calls=200) -> list:
    """(model, median us, min us) of graph_step's Python work per replay (see --python-only)."""
    import torchlean as tl
    from torchlean import _loader, cuda_device
    _loader.lib = _NoGraphLib(_loader.lib)
    cuda_device.is_available = lambda: True   # graph_step asks cuda_device (torchlean.cuda re-exports it)
    rng = np.random.default_rng(0)
    out = []
    for name in models:
        cfg = dict(SIZES[name]["quick"])
        if name == "lm":
            cfg["layers"] = SIZES["lm"]["full"]["layers"]
        step, g = tl_graph_trainer(BUILDERS[name](cfg, rng), tl, on_device=True)
        for i in range(3):
            step(i)
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for i in range(calls):
                step(i)
            times.append((time.perf_counter() - t0) / calls * 1e6)
        assert g.captures == 1, g.recapture_reason
        out.append((name, statistics.median(times), min(times)))
        print(f"{name}: {out[-1][1]:.2f} us per replay (min {out[-1][2]:.2f}), "
              f"{len(g.graph.params)} parameters", flush=True)
    return out


def torch_graph_trainer(w, side, state):
    """PyTorch's CUDA graph of the whole step (forward, backward, capturable Adam/SGD) on
    static inputs, as torch's docs capture a step; None when it cannot be captured."""
    torch, dev = side.torch, side.dev
    F = torch.nn.functional
    model = w.build_torch(torch).to(dev)
    side.load_state(model, state, w.name)
    kind, kw = w.opt
    kw = dict(kw)
    if kind in ("adam", "adamw"):
        kw["capturable"] = True
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind](
        model.parameters(), **kw)
    x0, y0 = w.batches[0]
    sx = torch.from_numpy(x0).to(dev)
    sy = torch.from_numpy(y0).to(dev)

    def body():
        out = model(sx)
        if w.loss == "ce":
            loss = F.cross_entropy(out, sy)
        elif w.loss == "ce_seq":
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), sy.reshape(-1))
        else:
            loss = F.mse_loss(out, sy)
        loss.backward()
        opt.step()
        return loss

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        sloss = body()

    def step(i, want_loss=False):
        x, y = w.batches[i % len(w.batches)]
        sx.copy_(torch.from_numpy(x), non_blocking=False)
        sy.copy_(torch.from_numpy(y), non_blocking=False)
        graph.replay()
        return sloss.item() if want_loss else None

    step.graph, step.static = graph, (sx, sy)   # for replays from device inputs
    return step


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,cnn,lm")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="toy sizes (a CPU smoke run)")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    ap.add_argument("--python-only", action="store_true",
                    help="time only the Python side of a replay (native graph calls as no-ops)")
    a = ap.parse_args(argv)
    if a.python_only:
        return python_only([m.strip() for m in a.models.split(",") if m.strip()])
    import torchlean as tl
    if a.quick:
        a.steps, a.repeats, a.warmup = 3, 1, 3
    timing = dict(warmup=a.warmup, repeats=a.repeats, steps=a.steps)
    side = TorchSide(tl.backend(), a.no_torch)
    sync, reset, peak = torchlean_hooks(tl)
    rng = np.random.default_rng(0)
    lines = [f"Whole-step capture: backend {tl.backend()}, {side.device_name}; median of "
             f"{a.repeats} runs of {a.steps} steps after {a.warmup} warm-up steps; TF32 off",
             "",
             "| model | torchlean eager ms | torchlean graph ms | torch eager ms | torch graph ms "
             "| graph / torch eager | host us/replay (numpy / device inputs) | captures "
             "| first loss tl / graph |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for name in [m.strip() for m in a.models.split(",") if m.strip()]:
        w = BUILDERS[name](SIZES[name]["quick" if a.quick else "full"], rng)
        step, state = tl_trainer(w)
        eager = measure(step, sync, reset, peak, **timing)
        del step
        gstep, g = tl_graph_trainer(w, tl)
        graph = measure(gstep, sync, reset, peak, **timing)
        hus = host_us(gstep, sync) if tl.cuda.is_available() else float("nan")
        g.reset()
        dstep, dg = tl_graph_trainer(w, tl, on_device=True)
        for i in range(3):
            dstep(i)
        dus = host_us(dstep, sync) if tl.cuda.is_available() else float("nan")
        dg.reset()
        t_eager = t_graph = None
        if side.dev is not None:
            t_eager = measure(torch_trainer(w, side, state), side.sync, side.reset_peak,
                              side.peak, **timing)["step_s"] * 1e3
            try:
                t_graph = measure(torch_graph_trainer(w, side, state), side.sync,
                                  side.reset_peak, side.peak, **timing)["step_s"] * 1e3
            except Exception as e:   # a model torch cannot capture: say so in the table
                print(f"{name}: torch CUDA graph failed: {type(e).__name__}: {e}", flush=True)
        ge, gg = eager["step_s"] * 1e3, graph["step_s"] * 1e3
        vs = f"{gg / t_eager:.2f}x" if t_eager else "n/a"
        if t_eager:
            vs += " ok" if gg / t_eager <= SPEED_TARGET else " MISS"
        hs = f"{hus:.1f} / {dus:.1f}" + ("" if dus != dus else
                                           (" ok" if dus < HOST_TARGET_US else " MISS"))
        row = (f"| {name} | {ge:.3f} | {gg:.3f} | "
               f"{'n/a' if t_eager is None else f'{t_eager:.3f}'} | "
               f"{'n/a' if t_graph is None else f'{t_graph:.3f}'} | {vs} | {hs} | "
               f"{g.captures} | {eager['first_loss']:.5f} / {graph['first_loss']:.5f} |")
        print(row, flush=True)
        if g.captures > 1:
            print(f"{name}: captured {g.captures} times (last: {g.recapture_reason})", flush=True)
        lines.append(row)
    text = "\n".join(lines)
    print()
    print(text)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
