"""Render the generated files from ops.yaml.

    python -m codegen.gen            write the generated files (only those that changed)
    python -m codegen.gen --check    exit 1 and print a diff when any file is out of step

Outputs (all checked in, all starting with a "generated" line):
    native/include/torchlean_ops.h   every kernel prototype with its doc line (for readers and
                                     external C callers; the libraries do not include it)
    native/include/ops/<family>_ops.h            the family's prototypes (no docs)
    native/generated/<family>_kernels.h       the hidden tlk_ kernel bodies a backend writes
    native/generated/<family>_entry.c         the exported tl_ entries: argument contract
    native/generated/registry_hash.h          TL_REGISTRY_HASH (the ABI hash) for runtime.c
    torchlean/_abi/cdef.py           the cffi declarations (ABI core + ops), identity constants
                                     (a package of its own: the loader below the ops reads it)
    torchlean/_generated/ops.py      one buffer-level function per registry entry
    torchlean/_generated/tape_ops.py one Tape method per tape op, with its VJP

All logic lives here in plain Python; the Jinja templates in codegen/templates only lay text out.
"""
from __future__ import annotations

import argparse
import ast
import difflib
import re
import sys
from pathlib import Path

import jinja2

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from codegen.entry import build_entries, entry_source, kernel_decls
    from codegen.maps import render_maps
    from codegen.normalize import render_normalize
    from codegen.registry import (ROOT, Op, RegistryError, broadcast_kernel_call, load_shape_helpers,
                                  parse_registry, registry_hash)
else:
    from .entry import build_entries, entry_source, kernel_decls
    from .maps import render_maps
    from .normalize import render_normalize
    from .registry import (ROOT, Op, RegistryError, broadcast_kernel_call, load_shape_helpers, parse_registry,
                           registry_hash)

TEMPLATES = Path(__file__).resolve().parent / "templates"
ATTR_PY_TYPES = {"float": "float", "int": "int", "bool": "bool", "shape": "tuple", "ints": "object",
                 "index": "object", "mask": "object", "key": "int", "array": "object",
                 "buffers": "object"}


# ------------------------------------------------------------------ expression lowering
class _Rename(ast.NodeTransformer):
    """Rewrite a shape/arg expression: inputs -> <name>_s, outputs -> <name>_shape,
    helper calls -> S.<fn>."""

    def __init__(self, inputs, outputs=()):
        self.inputs = set(inputs)
        self.outputs = set(outputs)

    def visit_Call(self, node):
        self.generic_visit(node)
        node.func = ast.Attribute(value=ast.Name("S", ast.Load()), attr=node.func.id, ctx=ast.Load())
        return node

    def visit_Name(self, node):
        if node.id in self.inputs:
            return ast.Name(f"{node.id}_s", ast.Load())
        if node.id in self.outputs:
            return ast.Name(f"{node.id}_shape", ast.Load())
        return node


def shape_expr(expr: str, inputs, outputs=()) -> str:
    tree = ast.parse(expr, mode="eval")
    # keep callee names intact while renaming argument names
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            node.func._callee = True
    tree = _RenameKeepCallee(inputs, outputs).visit(tree)
    tree = _Shortcuts().visit(tree)
    tree.body = _equal_shape_shortcut(tree.body, {f"{n}_s" for n in inputs})
    return ast.unparse(tree)


def _helper_call(node, name, nargs=None):
    """Is `node` a call S.<name>(...) whose arguments are all plain names (nargs of them)?"""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == name and not node.keywords
            and all(isinstance(a, ast.Name) for a in node.args)
            and (nargs is None or len(node.args) in nargs))


class _Shortcuts(ast.NodeTransformer):
    """S.numel(s) is math.prod(s): call it directly (one Python frame less per op call)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if _helper_call(node, "numel", (1,)):
            return ast.Call(ast.Name("_prod", ast.Load()), node.args, [])
        return node


def _equal_shape_shortcut(body, input_shapes):
    """The commonest output rules, `same(x[, y])` and `broadcast(a, b)`, return the input shape
    itself when the inputs agree: emit that test inline and call the rule only otherwise (it
    then raises or broadcasts). Exact because AnyBuffer shapes are always tuples of ints."""
    if not (_helper_call(body, "same", (1, 2, 3)) or _helper_call(body, "broadcast", (2,))):
        return body
    if any(a.id not in input_shapes for a in body.args):
        return body
    first = body.args[0]
    if len(body.args) == 1:
        return first
    test = ast.Compare(ast.Name(first.id, ast.Load()), [ast.Eq()] * (len(body.args) - 1),
                       [ast.Name(a.id, ast.Load()) for a in body.args[1:]])
    return ast.IfExp(test, ast.Name(first.id, ast.Load()), body)


class _RenameKeepCallee(_Rename):
    def visit_Name(self, node):
        if getattr(node, "_callee", False):
            return node
        return super().visit_Name(node)


class _Lowerer:
    """Turn a nested VJP expression into statements, releasing each temporary after its use."""

    def __init__(self, op_names, helper_names):
        self.op_names = op_names
        self.helpers = helper_names
        self.lines: list[str] = []
        self.n = 0

    def tmp(self):
        self.n += 1
        return f"_t{self.n}"

    def value(self, node) -> tuple[str, bool]:
        """Return (python expression, is_temporary_buffer)."""
        if isinstance(node, ast.Call) and node.func.id in self.op_names:
            args, temps = [], []
            for a in node.args:
                code, is_tmp = self.value(a)
                args.append(code)
                if is_tmp:
                    temps.append(code)
            for kw in node.keywords:
                code, is_tmp = self.value(kw.value)
                if is_tmp:
                    raise ValueError("a registry op result cannot be passed as an attr")
                args.append(f"{kw.arg}={code}")
            t = self.tmp()
            self.lines.append(f"{t} = _ops.{node.func.id}({', '.join(args)})")
            for tt in temps:
                self.lines.append(f"{tt}.release()")
            return t, True
        if isinstance(node, ast.Call):  # shape helper: plain Python, evaluated inline
            return "S." + ast.unparse(node), False
        return ast.unparse(node), False


def lower_vjp(expr: str, op_names, helper_names) -> tuple[list[str], str, bool]:
    low = _Lowerer(op_names, helper_names)
    code, is_tmp = low.value(ast.parse(expr, mode="eval").body)
    return low.lines, code, is_tmp


# ------------------------------------------------------------------ per-op view model
def attr_sig(a) -> str:
    t = ATTR_PY_TYPES[a.type]
    if a.has_default:
        return f"{a.name}: {t} = {a.default!r}"
    return f"{a.name}: {t}"


# The value tests (on `v`) of the attr checks that have a cheap inline form; see attr_fast_test.
_FAST_CHECKS = {None: "", "finite": " and _isfinite(v)", "positive": " and v > 0",
                "nonneg": " and v >= 0", "prob": " and 0.0 <= v <= 1.0",
                "finite_nonneg": " and _isfinite(v) and v >= 0"}


def attr_fast_test(a) -> str | None:
    """A condition under which _opsupport.attr would hand `a`'s value back unchanged (a plain
    float, int or bool that passes the check, or a None mask), so the generated op calls attr
    only when it fails: attr still does every conversion and raises every error. None where
    there is no such short form (shapes, arrays, keys, finite_nonzero)."""
    kinds = {"float": "float", "int": "int", "ints": "int", "bool": "bool"}
    if a.type == "mask":
        return f"{a.name} is None"
    if a.type not in kinds or a.check not in _FAST_CHECKS:
        return None
    if a.type == "bool" and a.check is not None:
        return None
    if a.type in ("int", "ints") and a.check not in (None, "positive", "nonneg"):
        return None
    test = f"v.__class__ is {kinds[a.type]}" + _FAST_CHECKS[a.check]
    return re.sub(r"\bv\b", a.name, test)


def op_model(op: Op, ops_by_name, helpers) -> dict:
    inputs = op.inputs
    outs = [n for n, _ in op.outputs if n not in op.inplace]
    m = {
        "op": op,
        "name": op.name,
        "doc": op.doc,
        "inputs": inputs,
        "attr_sig": [attr_sig(a) for a in op.attrs],
        "attrs": op.attrs,
        "attr_fast": {a.name: attr_fast_test(a) for a in op.attrs},
        "out_shapes": [(n, shape_expr(e, inputs)) for n, e in op.outputs],
        "alloc_outs": outs,
        "args": [(a.name, a.ctype, shape_expr(a.expr, inputs, [n for n, _ in op.outputs]))
                 for a in op.args],
        "c_call": [],
        "returns": [n for n, _ in op.outputs] + [f"_a_{n}" for n in op.host_outputs],
    }
    m["memo"] = shape_memo(op.name, inputs, m["out_shapes"], m["args"])
    call = [f"{n}.handle" for n in inputs]
    call += [f"_m_{a.name}" for a in op.mask_attrs]
    call += [f"{n}.handle" for n in outs]
    for a in op.args:
        if a.ctype in ("i64[]", "geom"):
            call += [f"_a_{a.name}", f"len(_a_{a.name})"]
        elif a.ctype in ("f64[]", "f64out[]"):
            call += [f"f64_ptr(_a_{a.name})", f"_a_{a.name}.size"]
        else:
            call.append(f"_a_{a.name}")
    m["c_call"] = call
    m["broadcast_call"] = ""
    if op.broadcast_kernel:
        fn, kw = broadcast_kernel_call(op)
        m["broadcast_call"] = f"{fn}({', '.join(inputs + [f'{k}={v}' for k, v in kw.items()])})"
        m["broadcast_shapes"] = ", ".join(f"{n}_s" for n in inputs)
    # the fast input check; `live` (the slow path) then names the bad input
    tests = [f"{n}.__class__ is AnyBuffer and {n}.buf.live" for n in inputs]
    m["live_test"] = " and ".join(tests)
    if len(m["live_test"]) > 100 - len("    if not ():"):
        m["live_test"] = "\n            and ".join(tests)  # one input per line
    sig = ["self"] + [f"{n}: int" for n in inputs]
    if op.attrs or op.hands_back:
        sig += ["*"] + m["attr_sig"]
    if op.hands_back:
        sig.append("hand_back: list | None = None")
    m["tape_sig"] = ", ".join(sig)
    # tape side
    saved_names = (op.vjp_names() | op.recompute_names()) - {"grad"}
    m["saved_inputs"] = [n for n in inputs if n in saved_names]
    m["saved_outputs"] = [n for n, _ in op.outputs[1:] if n in saved_names]
    m["drop_outputs"] = [n for n, _ in op.outputs[1:] if n not in saved_names]
    m["primary_saved"] = bool(op.outputs) and op.outputs[0][0] in saved_names
    m["saved_attrs"] = [a.name for a in op.attrs if a.name in saved_names]
    vjps = []
    for v in op.vjps:
        lines, result, is_tmp = lower_vjp(v.expr, set(ops_by_name), helpers)
        idx = [inputs.index(t) for t in v.targets]
        vjps.append({"targets": v.targets, "idx": idx, "lines": lines, "result": result,
                     "fresh": is_tmp, "lhs": ", ".join(f"out[{i}]" for i in idx)})
    m["vjps"] = vjps
    m["overwrites_grad"] = any(_passes_grad_inplace(v.expr, ops_by_name) for v in op.vjps)
    m["recompute"] = None
    if op.recompute:
        lines, result, is_tmp = lower_vjp(op.recompute, set(ops_by_name), helpers)
        m["recompute"] = {"lines": lines, "result": result if is_tmp else result + ".copy()",
                          "names": sorted(op.recompute_names() & (set(inputs) | saved_names))}
    # a broadcast op sums each input's gradient back to that input's shape inside its VJP, as
    # soon as it is computed: one full-size temporary at a time, not one per input
    m["sum_back"] = op.broadcast and all(len(v.targets) == 1 for v in op.vjps)
    m["needs_cond"] = [" or ".join(f"needs[{i}]" for i in v["idx"]) for v in vjps]
    # the Tape method: positional arguments, one dict of what the VJP reads, nothing else built
    m["ops_call"] = ", ".join([f"_{n}" for n in inputs] + [f"{a.name}={a.name}" for a in op.attrs])
    shape_only = op.vjp_shape_only_names() - op.recompute_names()
    saved = [f'"{n}": _{n}.shape' if n in shape_only else f'"{n}": _{n}'
             for n in m["saved_inputs"]]
    saved += [f'"{n}": {n}' for n in m["saved_attrs"]]
    saved += [f'"{n}": _r_{n}' for n in m["saved_outputs"]]
    if m["primary_saved"]:
        saved.append(f'"{m["returns"][0]}": _out')
    if m["sum_back"] and op.vjps:
        saved.append('"input_shapes": ' + tuple_src([f"_{n}.shape" for n in inputs]))
    rec = [f'"{op.name}"', "_out", tuple_src(inputs), f"_vjp_{op.name}" if op.vjps else "None",
           "{" + ", ".join(saved) + "}", str(op.broadcast)]
    m["residual_vars"] = [f"_r_{n}" for n in m["returns"][1:]]
    # hands_back residuals go to the caller's list when it gives one, else they are dropped
    m["hand_back"] = tuple_src([f"_r_{n}" for n in op.hands_back]) if op.hands_back else ""
    if m["residual_vars"]:
        drop = tuple_src([f"_r_{n}" for n in m["drop_outputs"]])
        if op.hands_back:
            rest = tuple_src([f"_r_{n}" for n in m["drop_outputs"] if n not in op.hands_back])
            drop = f"{drop} if hand_back is None else {rest}"
        rec += ["keep=" + tuple_src([f"_r_{n}" for n in m["saved_outputs"]]), "drop=" + drop]
        if op.recompute:
            rec.append(f"recompute=_recompute_{op.name}")
        m["record"] = wrap_call("return self._record_residuals", rec, 8)
    elif op.recompute:
        m["record"] = wrap_call("return self._record", rec + [f"recompute=_recompute_{op.name}"], 8)
    else:
        m["record"] = wrap_call("return self._record", rec, 8)
    return m


def _rule_calls(tree) -> int:
    """Shape-rule calls (S.<fn>) an expression always makes: those in the fallback branch of
    an equal-shape shortcut (`a_s if a_s == b_s else S.rule(...)`) are left out."""
    if isinstance(tree, ast.IfExp):
        return _rule_calls(tree.test) + _rule_calls(tree.body)
    n = int(isinstance(tree, ast.Call) and isinstance(tree.func, ast.Attribute)
            and isinstance(tree.func.value, ast.Name) and tree.func.value.id == "S")
    return n + sum(_rule_calls(c) for c in ast.iter_child_nodes(tree))


def shape_memo(name, inputs, out_shapes, args):
    """What an op remembers of its shape rules per input shapes (None: nothing worth it).

    The output shapes and scalar kernel arguments computed from the input shapes alone (no
    attr, no array argument) are pure functions of those shapes: the op computes them once per
    distinct input shapes and looks them up after (one dict lookup instead of the rules' Python
    frames). Worth it when they call at least one rule unconditionally. The first call with
    some shapes runs every rule in the registry's order, so errors are raised as before."""
    if not inputs:
        return None
    known = {f"{i}_s" for i in inputs} | {"S", "_prod"}
    memo, calls = [], 0
    for var, expr, ctype in ([(f"{n}_shape", e, None) for n, e in out_shapes]
                             + [(f"_a_{n}", e, t) for n, t, e in args]):
        tree = ast.parse(expr, mode="eval").body
        names = {x.id for x in ast.walk(tree) if isinstance(x, ast.Name)}
        if ctype in ("i64[]", "geom", "f64[]", "f64out[]") or not names <= known:
            continue
        if isinstance(tree, (ast.Name, ast.Constant)):
            known.add(var)   # a copy of an input's shape or a constant: as cheap as a lookup
            continue
        memo.append(var)
        known.add(var)
        calls += _rule_calls(tree)
    if not calls:
        return None
    key = f"{inputs[0]}_s" if len(inputs) == 1 else "(" + ", ".join(f"{i}_s" for i in inputs) + ")"
    return {"dict": f"_shapes_{name}", "key": key, "vars": memo,
            "stored": tuple_src(memo), "unpack": ", ".join(memo) + ("," if len(memo) == 1 else "")}


def _passes_grad_inplace(expr: str, ops_by_name) -> bool:
    """Does the VJP expression hand `grad` to an op that updates that input in place?"""
    for node in ast.walk(ast.parse(expr, mode="eval")):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ops_by_name:
            callee = ops_by_name[node.func.id]
            for name, arg in zip(callee.inputs, node.args):
                if isinstance(arg, ast.Name) and arg.id == "grad" and name in callee.inplace:
                    return True
    return False


def wrap_call(callee: str, args: list[str], indent: int, width: int = 100) -> str:
    """`callee(args)` packed into lines of at most `width` columns (continuations aligned)."""
    lines, cur = [], " " * indent + callee + "("
    pad = " " * len(cur)
    for k, a in enumerate(args):
        piece = a + (", " if k < len(args) - 1 else ")")
        if len(cur) + len(piece.rstrip()) > width and not cur.endswith("("):
            lines.append(cur.rstrip())
            cur = pad
        cur += piece
    lines.append(cur)
    return "\n".join(lines)[indent:]


def tuple_src(items) -> str:
    """Python source of a tuple display: (), (a,), (a, b)."""
    items = list(items)
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(items) + ")"


# ------------------------------------------------------------------ rendering
def c_header_decl(op: Op) -> str:
    return f"TL_API int {op.symbol}({', '.join(op.c_params()) or 'void'});"


def render_all(registry_path: Path = ROOT / "ops.yaml") -> dict[Path, str]:
    text = registry_path.read_text()
    ops = parse_registry(registry_path, text)
    h = registry_hash(ops)
    helpers = {n for n in dir(load_shape_helpers()) if not n.startswith("_")}
    by_name = {o.name: o for o in ops}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)),
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    kernels = [o for o in ops if o.has_kernel]
    families: dict[str, list[Op]] = {}
    for o in kernels:
        families.setdefault(o.family, []).append(o)
    models = [op_model(o, by_name, helpers) for o in ops]
    core = (ROOT / "native" / "include" / "torchlean_abi.h").read_text()
    core_cdef = core.split("/* CDEF-BEGIN */")[1].split("/* CDEF-END */")[0]
    core_cdef = re.sub(r"/\*.*?\*/", "", core_cdef, flags=re.S).replace("TL_API ", "")
    op_cdef = "\n".join(c_header_decl(o).replace("TL_API ", "") for o in kernels)
    ctx = {"hash": h, "ops": ops, "kernels": kernels, "families": families, "models": models,
           "decl": c_header_decl, "core_cdef": core_cdef.strip(), "op_cdef": op_cdef,
           "tape_models": [m for m in models if m["op"].tape],
           "det_ops": [o for o in ops if o.determinism == "atomic"]}
    out = {}
    for tpl, dest in [("torchlean_ops.h.j2", "native/include/torchlean_ops.h"),
                      ("cdef.py.j2", "torchlean/_abi/cdef.py"),
                      ("ops.py.j2", "torchlean/_generated/ops.py"),
                      ("tape_ops.py.j2", "torchlean/_generated/tape_ops.py")]:
        out[ROOT / dest] = env.get_template(tpl).render(**ctx)
    out[ROOT / "torchlean/_generated/__init__.py"] = (
        f"# @generated by codegen/gen.py from ops.yaml (registry {h}); do not edit.\n"
        '"""The buffer-level ops and the Tape methods of every registry entry."""\n')
    out[ROOT / "torchlean/_abi/__init__.py"] = (
        f"# @generated by codegen/gen.py from ops.yaml (registry {h}); do not edit.\n"
        '"""The C ABI as cffi reads it; torchlean._loader opens the library against it."""\n')
    out.update(render_native(ops, h, registry_path))
    return out


GEN_C = "/* @generated by codegen/gen.py from ops.yaml; do not edit. */\n"


def render_native(ops: list[Op], h: str, registry_path: Path) -> dict[Path, str]:
    """Per-family C files. None of them carries docs or the hash, so a doc-only registry edit
    rewrites none of them and `make stub` has nothing to rebuild; a new op changes its own
    family's files only."""
    entries = build_entries(ops, registry_path)
    fams: dict[str, list] = {}
    for e in entries:
        fams.setdefault(e.op.family, []).append(e)
    out = {}
    for fam, es in fams.items():
        guard = f"TL_OPS_{fam.upper()}_H"
        out[ROOT / f"native/include/ops/{fam}_ops.h"] = (
            GEN_C + f"/* {fam}_ops.h: the exported {fam} kernels (see torchlean_ops.h). */\n"
            f"#ifndef {guard}\n#define {guard}\n\n#include \"torchlean_abi.h\"\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
            + "\n".join(c_header_decl(e.op) for e in es)
            + "\n\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n")
        kguard = f"TL_KERNELS_{fam.upper()}_H"
        out[ROOT / f"native/generated/{fam}_kernels.h"] = (
            GEN_C + f"/* {fam}_kernels.h: the {fam} kernel bodies each backend implements\n"
            f" * (native/stub/{fam}.c, native/cuda/{fam}.cu). They run after the generated entry\n"
            f" * ({fam}_entry.c) has checked every handle, size and length; `op` names the entry. */\n"
            f"#ifndef {kguard}\n#define {kguard}\n\n#include \"contract.h\"\n\n"
            "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
            + "\n".join(kernel_decls(es))
            + "\n\n#ifdef __cplusplus\n}\n#endif\n\n#endif\n")
        out[ROOT / f"native/generated/{fam}_entry.c"] = (
            GEN_C + f"/* {fam}_entry.c: the argument contract of every {fam} kernel, then its body. */\n"
            "#include <math.h>\n"
            f"#include \"ops/{fam}_ops.h\"\n#include \"{fam}_kernels.h\"\n\n"
            + "\n\n".join(entry_source(e) for e in es) + "\n")
    out.update({ROOT / p: t for p, t in render_maps(ops, registry_path, GEN_C).items()})
    out.update({ROOT / p: t for p, t in render_normalize(ops, registry_path, GEN_C).items()})
    out[ROOT / "native/generated/registry_hash.h"] = (
        GEN_C + "/* The hash of the C ABI the registry describes; the loader compares it. */\n"
        f"#define TL_REGISTRY_HASH \"{h}\"\n#define TL_OP_KERNELS {len(entries)}\n")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--check", action="store_true", help="fail if generated files are stale")
    p.add_argument("--registry", default=str(ROOT / "ops.yaml"))
    a = p.parse_args(argv)
    try:
        files = render_all(Path(a.registry))
    except RegistryError as e:  # one line, ops.yaml:LINE: what is wrong
        print(e, file=sys.stderr)
        return 2
    stale = []
    for path, content in files.items():
        old = path.read_text() if path.exists() else None
        if old == content:
            continue
        if a.check:
            stale.append(path)
            sys.stdout.writelines(difflib.unified_diff(
                (old or "").splitlines(True), content.splitlines(True),
                f"a/{path.relative_to(ROOT)}", f"b/{path.relative_to(ROOT)}", n=2))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            print(f"gen: wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"\ngen-check: {len(stale)} generated file(s) out of step with ops.yaml; run `make gen`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
