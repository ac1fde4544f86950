"""Both backends' loops of every pure elementwise map, generated from its `formula:`.

An op whose entry reads `formula: "tlf_name(x, g, c)"` is a map: every buffer holds `n` floats,
there is one output, and output element i is tlf_name of the inputs' elements i and the op's
f64 args rounded to float32 once. The formula itself is written once, in
native/common/formulas/<family>.h (host and device code). This module emits, per family:

  native/generated/<family>_maps_stub.inc  the stub bodies: one loop per op, under the
      schedule native/stub/<family>.c defines before including it (TL_MAP_LOOP, TL_MAP_ATTR);
  native/generated/<family>_maps_cuda.inc  the CUDA bodies: a functor per op run by the
      launchers native/cuda/<family>.cu defines (launch1..launch4: float4 maps, grid stride).

`own_schedule: [stub]` (or [cuda]) keeps that backend's body hand-written over the same formula
(the stub's blocked exact log/sigmoid), so only the other backend's body is generated.
"""
from __future__ import annotations

import ast

from codegen.schema import ROOT, Op, RegistryError, where

BACKENDS = ("stub", "cuda")


def _err(path, op, msg):
    return RegistryError(f"{where(path)}:{op.line}: {op.name}: {msg}")


def parse_formula(op: Op, path) -> tuple[str, list[str]]:
    """(function, argument names) of a map's formula, checked against the op's signature."""
    try:
        call = ast.parse(op.formula, mode="eval").body
    except SyntaxError:
        call = None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords
            and call.func.id.startswith("tlf_") and all(isinstance(a, ast.Name) for a in call.args)):
        raise _err(path, op, f"formula must read 'tlf_<name>(<inputs and f64 args>)', got {op.formula!r}")
    names = [a.id for a in call.args]
    params = [a.name for a in op.args if a.ctype == "f64"]
    others = [a for a in op.args if a.ctype != "f64" and not (a.ctype == "i64" and a.name == "n")]
    outs = [o for o, _ in op.outputs if o not in op.inplace]
    if op.lengths or others or op.mask_attrs or op.inplace or len(outs) != 1 \
            or "n" not in [a.name for a in op.args] or not 1 <= len(op.inputs) <= 4 or op.kernel:
        raise _err(path, op, "a formula map takes 1 to 4 inputs and one output of n elements each "
                   "(args: 'i64 n' and f64 scalars only; no lengths, kernel, inplace or mask)")
    for n in names:
        if n not in op.inputs and n not in params:
            raise _err(path, op, f"formula argument '{n}' is neither an input "
                       f"({', '.join(op.inputs)}) nor an f64 arg ({', '.join(params) or 'none'})")
    missing = [n for n in op.inputs if n not in names]
    if missing:
        raise _err(path, op, f"formula {op.formula!r} does not read input(s) {', '.join(missing)}")
    bad = [b for b in op.own_schedule if b not in BACKENDS]
    if bad or len(op.own_schedule) >= len(BACKENDS):
        raise _err(path, op, f"own_schedule lists at most one of {', '.join(BACKENDS)}, got {op.own_schedule}")
    return call.func.id, names


def _signature(op: Op) -> str:
    return f"int tlk_{op.name}({', '.join(['const char *op'] + op.c_params())})"


def stub_body(op: Op, path) -> str:
    fn, names = parse_formula(op, path)
    out = [o for o, _ in op.outputs][0]
    lines = [f"TL_MAP_ATTR {_signature(op)} {{"]
    for k, x in enumerate(op.inputs):
        lines.append(f"    const float *X{k} = {x}->data;")
    lines.append(f"    float *Y = {out}->data;")
    params = [a.name for a in op.args if a.ctype == "f64" and a.name in names]
    for p in params:
        lines.append(f"    const float P_{p} = (float){p};")
    args = [f"X{op.inputs.index(n)}[i]" if n in op.inputs else f"P_{n}" for n in names]
    lines.append(f"    TL_MAP_LOOP(n) Y[i] = {fn}({', '.join(args)});")
    lines += ["    return TL_OK;", "}"]
    return "\n".join(lines)


def cuda_body(op: Op, path) -> tuple[str, str]:
    """(the functor, the tlk_ body)"""
    fn, names = parse_formula(op, path)
    out = [o for o, _ in op.outputs][0]
    params = [a.name for a in op.args if a.ctype == "f64" and a.name in names]
    fields = "".join(f"float {p}; " for p in params)
    ins = ", ".join(f"float {x}" for x in op.inputs)
    functor = (f"struct Map_{op.name} {{ {fields}__device__ float operator()({ins}) const "
               f"{{ return {fn}({', '.join(names)}); }} }};")
    init = ", ".join(f"(float){p}" for p in params)
    bufs = ", ".join(op.inputs + [out])
    body = (f"{_signature(op)} {{\n    return launch{len(op.inputs)}(op, {bufs}, n, Map_{op.name}{{{init}}});\n}}")
    return functor, body


def render_maps(ops: list[Op], path, gen_line: str) -> dict[str, str]:
    """{relative path: text} of every family's generated map bodies."""
    fams: dict[str, list[Op]] = {}
    for o in ops:
        if o.formula:
            parse_formula(o, path)
            fams.setdefault(o.family, []).append(o)
    out = {}
    for fam, fops in fams.items():
        for backend, ext in zip(BACKENDS, (".c", ".cu")):
            src = ROOT / "native" / backend / f"{fam}{ext}"
            inc = f'#include "generated/{fam}_maps_{backend}.inc"'
            if not src.exists() or inc not in src.read_text():
                raise _err(path, fops[0], f"family {fam} has formula maps, so "
                           f"native/{backend}/{fam}{ext} must define its schedule and {inc}")
        head = (f"#include \"formulas/{fam}.h\"\n\n")
        stub = [stub_body(o, path) for o in fops if "stub" not in o.own_schedule]
        out[f"native/generated/{fam}_maps_stub.inc"] = (
            gen_line + f"/* {fam}_maps_stub.inc: the stub bodies of the {fam} maps ops.yaml gives a\n"
            f" * `formula:`, in the schedule native/stub/{fam}.c defines (TL_MAP_LOOP, TL_MAP_ATTR)\n"
            " * before including this file. */\n" + head + "\n\n".join(stub) + "\n")
        cu = [cuda_body(o, path) for o in fops if "cuda" not in o.own_schedule]
        out[f"native/generated/{fam}_maps_cuda.inc"] = (
            gen_line + f"/* {fam}_maps_cuda.inc: the CUDA bodies of the {fam} maps ops.yaml gives a\n"
            f" * `formula:`, one functor each, run by the launchers native/cuda/{fam}.cu defines\n"
            " * (launch1..launch4) before including this file. Functors of own_schedule: [cuda] ops\n"
            " * are emitted too, for the hand-written body. */\n" + head
            + "namespace {\n\n" + "\n".join(cuda_body(o, path)[0] for o in fops) + "\n\n}  // namespace\n\n"
            + "extern \"C\" {\n\n" + "\n\n".join(b for _, b in cu) + "\n\n}  // extern \"C\"\n")
    return out
