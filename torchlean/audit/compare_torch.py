"""compare-torch: a PyTorch script run under torch and under torchlean, module by module.

The script runs twice, in two processes: once with torch, once with `torch`, `torch.nn`,
`torch.nn.functional` and `torch.optim` bound to torchlean's modules. At the first forward call
the torch run saves every parameter and buffer of the outermost module by name and the
torchlean run loads them, so both start from the same weights; the script's own data pipeline
(seeded NumPy, say) gives both the same batches. Each run traces every module's output in call
order and, at each optimizer step, every parameter's gradient, for the first --steps steps,
then stops. The first module whose output (or parameter gradient) differs beyond
|a - b| <= atol + rtol |b| is named: where a port parts from the original. Random draws inside
the model (dropout, randn) differ between the two libraries: turn them off to compare.
"""
from __future__ import annotations

import gc
import importlib.util
import os
import pickle
import runpy
import subprocess
import sys
import tempfile

import numpy as np

ALIASES = ("torch", "torch.nn", "torch.nn.functional", "torch.optim")


def _arrays(x) -> list:
    """The float arrays of a module's output (a tensor, or tuples/lists/dicts of them)."""
    if isinstance(x, (tuple, list)):
        return [a for v in x for a in _arrays(v)]
    if isinstance(x, dict):
        return [a for k in sorted(x) for a in _arrays(x[k])]
    if isinstance(x, np.ndarray):
        return [x.astype(np.float64)]
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "cpu"):
        x = x.cpu()
    if hasattr(x, "numpy"):
        return [np.asarray(x.numpy(), dtype=np.float64)]
    return []


class Trace:
    """One run's module outputs and gradients per step; saved when --steps steps are done."""

    def __init__(self, side, workdir, steps, module_cls):
        self.side, self.workdir, self.steps, self.module_cls = side, workdir, steps, module_cls
        self.root, self.names = None, {}
        self.calls: list = [[]]      # per step: [(module name, type, arrays)]
        self.grads: list = []        # per step: {parameter name: gradient}

    def _find_root(self, module) -> None:
        """The outermost live module holding `module`; its names are the comparison's names."""
        best = module
        for m in gc.get_objects():
            if isinstance(m, self.module_cls) and any(c is best for _, c in m.named_modules()):
                best = m
        self.root = best
        self.names = {id(m): (k or type(m).__name__) for k, m in best.named_modules()}
        path = os.path.join(self.workdir, "weights.pkl")
        if self.side == "torch":
            state = {k: _arrays(v)[0] for k, v in list(best.named_parameters())
                     + list(best.named_buffers())}
            with open(path, "wb") as f:
                pickle.dump(state, f)
            return
        with open(path, "rb") as f:
            state = pickle.load(f)
        mine = dict(list(best.named_parameters()) + list(best.named_buffers()))
        missing = sorted(set(state) ^ set(mine))
        if missing:
            raise SystemExit(f"compare-torch: parameter names differ between torch and "
                             f"torchlean: {missing[:8]}")
        for k, v in state.items():
            mine[k].set(v.astype(np.float32))

    def pre_forward(self, module):
        if self.root is None:
            self._find_root(module)

    def forward(self, module, output):
        name = self.names.get(id(module))
        if name is not None:
            self.calls[-1].append((name, type(module).__name__, _arrays(output)))

    def step(self):
        self.grads.append({k: _arrays(p.grad)[0] for k, p in self.root.named_parameters()
                           if p.grad is not None} if self.root is not None else {})
        if len(self.grads) == self.steps:
            self.save()
            os._exit(0)
        self.calls.append([])

    def save(self):
        with open(os.path.join(self.workdir, f"{self.side}.pkl"), "wb") as f:
            pickle.dump({"calls": self.calls, "grads": self.grads}, f)


def _run_side(side: str, workdir: str, steps: int, argv: list) -> None:
    """Run the script in this process with the traces installed (the child's entry)."""
    if side == "torchlean":
        from torchlean import nn as tl_nn, optim as tl_optim
        from torchlean.nn import functional as tl_functional
        face = sys.modules["torchlean"]   # the package itself (imported first): `torch`
        sys.modules.update(dict(zip(ALIASES, (face, tl_nn, tl_functional, tl_optim))))
        trace = Trace(side, workdir, steps, tl_nn.Module)
        call = tl_nn.Module.__call__

        def traced_call(self, *a, **kw):
            trace.pre_forward(self)
            out = call(self, *a, **kw)
            trace.forward(self, out)
            return out
        tl_nn.Module.__call__ = traced_call
        tl_optim.register_optimizer_step_post_hook(lambda o, a, k: trace.step())
    else:
        import torch
        from torch.nn.modules.module import (register_module_forward_hook,
                                             register_module_forward_pre_hook)
        from torch.optim.optimizer import register_optimizer_step_post_hook
        trace = Trace(side, workdir, steps, torch.nn.Module)
        register_module_forward_pre_hook(lambda m, i: trace.pre_forward(m))
        register_module_forward_hook(lambda m, i, o: trace.forward(m, o))
        register_optimizer_step_post_hook(lambda o, a, k: trace.step())
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    trace.save()


def _first_difference(a: dict, b: dict, rtol: float, atol: float) -> list[str]:
    def close(x, y):
        return x.shape == y.shape and bool(np.all(np.abs(x - y) <= atol + rtol * np.abs(y)))

    for s in range(max(len(a["calls"]), len(b["calls"]))):
        ca = a["calls"][s] if s < len(a["calls"]) else []
        cb = b["calls"][s] if s < len(b["calls"]) else []
        for k, (x, y) in enumerate(zip(cb, ca)):
            if x[0] != y[0]:
                return [f"step {s}, module call {k}: torch ran {x[0]!r} ({x[1]}), torchlean "
                        f"ran {y[0]!r} ({y[1]}): the programs call modules in different orders"]
            for j, (tx, lx) in enumerate(zip(x[2], y[2])):
                if not close(lx, tx):
                    err = (f"shape {lx.shape} vs torch's {tx.shape}" if lx.shape != tx.shape
                           else f"max |difference| {np.max(np.abs(lx - tx)):.3g}")
                    return [f"first difference: step {s}, module {x[0]!r} ({x[1]}), output {j}: "
                            f"{err} (tolerance {atol:g} + {rtol:g} |torch|)"]
        if len(ca) != len(cb):
            return [f"step {s}: torch made {len(cb)} module calls, torchlean {len(ca)}"]
        ga = a["grads"][s] if s < len(a["grads"]) else {}
        gb = b["grads"][s] if s < len(b["grads"]) else {}
        for name in gb:
            if name not in ga or not close(ga[name], gb[name]):
                module = name.rsplit(".", 1)[0] if "." in name else name
                return [f"first difference: step {s}, the gradient of {name!r} (module "
                        f"{module!r}); every module output of the step agreed"]
    return []


def compare_torch(command: list, steps: int = 2, rtol: float = 1e-4, atol: float = 1e-5) -> int:
    """Run `command` (python script.py ARGS) both ways; print the first difference. Exit
    status 0 when everything agrees within the tolerance, 1 at a difference, 2 when it cannot
    run (no torch, no script, a run failed)."""
    if importlib.util.find_spec("torch") is None:
        print("compare-torch: PyTorch is not installed in this Python; it is needed to run the "
              "script under torch", file=sys.stderr)
        return 2
    if len(command) < 2 or not command[1].endswith(".py") or not os.path.isfile(command[1]):
        print("compare-torch: expected `-- python script.py ARGS` naming an existing script, got "
              f"{' '.join(command) or 'nothing'}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as d:
        traces = {}
        for side in ("torch", "torchlean"):
            r = subprocess.run([command[0], "-m", "torchlean.audit.compare_torch", side, d,
                                str(steps), *command[1:]], capture_output=True, text=True)
            path = os.path.join(d, f"{side}.pkl")
            if r.returncode != 0 or not os.path.exists(path):
                print(f"compare-torch: the {side} run failed (exit {r.returncode}):\n"
                      + r.stderr[-2000:], file=sys.stderr)
                return 2
            with open(path, "rb") as f:
                traces[side] = pickle.load(f)
    lines = _first_difference(traces["torchlean"], traces["torch"], rtol, atol)
    if lines:
        print("\n".join(lines))
        return 1
    calls = sum(len(c) for c in traces["torch"]["calls"])
    print(f"agree within tolerance: {calls} module calls, {len(traces['torch']['grads'])} steps")
    return 0


if __name__ == "__main__":
    _run_side(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:])
