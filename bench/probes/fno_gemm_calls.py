"""Every exact GEMM call of one FNO training step (bench_models.py's `fno`, full sizes, exact
mode, on the stub) and the path CUDA's exact_gemm64 (native/cuda/gemm.cu) takes for each,
before and after the staged path (x64::plan in native/cuda/gemm_x64.cuh, mirrored here).

    python3 bench/probes/fno_gemm_calls.py [--quick]

The stub's tl_gemm_exact_f32 takes the same arguments as CUDA's (linalg.c and linalg.cu make
the same calls), and it is a hidden symbol, so the log comes from gdb: a breakpoint on its first
instruction reads the System V argument registers and stack slots, then continues. The second
step is logged (the first also builds the optimizer state). Pointer alignment is the stub
allocator's; CUDA's pool aligns at least as strictly, so an offset from a view shows either way.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KC, BK, BM, BN = 256, 16, 64, 64
STAGE_MIN_FMAS = 1 << 20     # gemm.cu

GDB_SCRIPT = r"""
import gdb
gdb.execute("set breakpoint pending on")
gdb.execute("set pagination off")
ARGS = ("k", "A", "lda", "sa", "B", "ldb", "sb", "C", "ldc", "sc", "accumulate")

class Log(gdb.Breakpoint):
    def stop(self):
        if not os.path.exists(os.environ["FNO_GEMM_ARM"]):
            return False
        reg = lambda r: int(gdb.parse_and_eval("$" + r))
        sp = reg("rsp")
        mem = gdb.selected_inferior().read_memory
        slot = lambda i: int.from_bytes(bytes(mem(sp + 8 * (i + 1), 8)), "little", signed=True)
        call = dict(ta=reg("esi") & 0xffffffff, tb=reg("edx") & 0xffffffff, batch=reg("rcx"),
                    m=reg("r8"), n=reg("r9"))
        call.update({a: slot(i) for i, a in enumerate(ARGS)})
        call["accumulate"] &= 0xffffffff
        call["op"] = gdb.selected_inferior().read_memory(reg("rdi"), 64).tobytes().split(b"\0")[0].decode()
        with open(os.environ["FNO_GEMM_LOG"], "a") as f:
            f.write(repr(call) + "\n")
        return False

class Loaded(gdb.Breakpoint):
    # the library loads after start; a pending breakpoint sits after the prologue, where the
    # argument registers may have moved: its first hit plants Log on the first instruction
    def stop(self):
        self.enabled = False
        Log("*tl_gemm_exact_f32")
        return False

import os
Loaded("tl_gemm_exact_f32")
gdb.execute("run")
"""


def child(quick: bool, arm: str) -> None:
    """Two exact FNO steps; the log is armed for the second."""
    sys.path.insert(0, str(ROOT / "bench"))
    import numpy as np
    import bench_models as bm
    import torchlean as tl
    tl.set_exact(True)
    w = bm.fno(bm.SIZES["fno"]["quick" if quick else "full"], np.random.default_rng(0))
    step, _ = bm.tl_trainer(w)
    step(0)
    Path(arm).touch()
    step(1)


def fits(p, ld, s, batch, mult, align):
    return p % align == 0 and ld % mult == 0 and (batch == 1 or s % mult == 0)


def pipe_before(c) -> bool:
    """exact_gemm64's condition for the tensor-core tiles before the staged path"""
    M, N, K = c["m"], c["n"], c["k"]
    pad_ok = not c["accumulate"] or K % BK == 0 or K > KC
    return (K > 0 and M % 4 == 0 and N % 4 == 0 and K % 4 == 0 and pad_ok
            and fits(c["A"], c["lda"], c["sa"], c["batch"], 4, 16)
            and fits(c["B"], c["ldb"], c["sb"], c["batch"], 4, 16)
            and fits(c["C"], c["ldc"], c["sc"], c["batch"], 2, 8))


def plan(c):
    """x64::plan (gemm_x64.cuh): (stage A, stage B, the K the tiles run over)"""
    M, N, K, acc = c["m"], c["n"], c["k"], c["accumulate"]
    pad_k = K % 4 != 0 or (acc and K % BK != 0 and K <= KC)
    kp = -(-K // BK) * BK if pad_k else K
    sa = pad_k or not fits(c["A"], c["lda"], c["sa"], c["batch"], 4, 16) or (c["ta"] and M % 4)
    sb = pad_k or not fits(c["B"], c["ldb"], c["sb"], c["batch"], 4, 16) or (not c["tb"] and N % 4)
    return bool(sa), bool(sb), kp


def path_before(c) -> str:
    split = c["batch"] == 1 and c["k"] > KC
    if pipe_before(c):
        return "pipe split" if split else "pipe"
    return "general split" if split else "general"


def path_after(c) -> str:
    """exact_gemm64 now: the tiles directly, on staged operands, or the general kernel"""
    sa, sb, kp = plan(c)
    split = c["batch"] == 1 and c["k"] > KC
    if c["k"] == 0 or ((sa or sb) and c["batch"] * c["m"] * c["n"] * kp < STAGE_MIN_FMAS):
        return "general split" if split else "general"
    staged = "+".join(x for x, s in (("A", sa), ("B", sb)) if s)
    return ("pipe split" if split else "pipe") + (f" (staged {staged}, K {kp})" if staged else "")


def describe(c) -> str:
    lay = ("T" if c["ta"] else "N") + ("T" if c["tb"] else "N")
    al = "".join(str(c[p] % 16 // 4) for p in "ABC")
    return (f"{c['op']:<18} {lay} batch {c['batch']} M {c['m']} N {c['n']} K {c['k']} "
            f"lda {c['lda']} ldb {c['ldb']} ldc {c['ldc']} acc {c['accumulate']} "
            f"A,B,C %16/4 {al}: {path_before(c)} -> {path_after(c)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--arm", default="")
    a = ap.parse_args()
    if a.child:
        return child(a.quick, a.arm)
    with tempfile.TemporaryDirectory() as d:
        log, arm, gs = Path(d, "log"), Path(d, "arm"), Path(d, "log.py")
        gs.write_text(GDB_SCRIPT)
        env = dict(os.environ, FNO_GEMM_LOG=str(log), FNO_GEMM_ARM=str(arm),
                   PYTHONPATH=str(ROOT), TORCHLEAN_BACKEND="stub")
        cmd = ["gdb", "-q", "-batch", "-x", str(gs), "--args", sys.executable, __file__, "--child",
               "--arm", str(arm)] + (["--quick"] if a.quick else [])
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        calls = [eval(line) for line in log.read_text().splitlines()]
    for c in calls:
        print(describe(c))
    off = lambda path: sum(p.startswith("general") for p in map(path, calls))  # noqa: E731
    print(f"{len(calls)} calls; on the general kernel: {off(path_before)} before the staged path, "
          f"{off(path_after)} after")


if __name__ == "__main__":
    main()
