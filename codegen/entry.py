"""The C argument contract of every kernel, as generated code.

Each registry kernel `tl_<op>` is exported from a generated entry file
(native/generated/<family>_entry.c, compiled into both libraries) that checks the call and
only then runs the hidden body `tlk_<kernel>` that each backend implements:

  1. the backend is usable (tlb_ready: CUDA's sticky error state; always fine on the stub);
  2. every buffer handle is non-null and live, every host array non-null when non-empty;
  3. `geom` args parse into a tl_geom (native/common/contract.c), sizes overflow-checked;
  4. every buffer's expected length, from the registry's `lengths` expressions over the scalar
     args, computed with overflow-checked int64 products capped at the uint32 element limit;
  5. the registry's `requires` conditions on the scalar args;
  6. every buffer holds exactly its expected length;
  7. nothing to write (every output empty): return TL_OK without calling the body.

Length expressions: scalar i64 arg names (checked >= 0), `<array>_len`, integer constants,
`+`, `*`, `// constant`, `prod(<i64[] arg>)`, `<geom arg>.<field>` (GEOM_FIELDS) and
`a if cond else b` (`else None`: the buffer is optional and may be NULL when cond is false).
Requires conditions: comparisons, `and`/`or`/`not`, arithmetic, `isfinite(<f64 arg>)` and
`broadcastable(<i64[] dims>, <i64[] dims>)` (NumPy rules, right-aligned).

A `kernel: "name(k=v, ...)"` key lets several entries share one body; the body's parameters are
the entry's (geom arrays become `const tl_geom *`) followed by the constants, and every entry
naming a kernel must produce the same parameter list. Every body also receives the entry's op
name first, so its own errors (allocation failures, device errors) still name the op called.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from codegen.schema import CTYPES, Op, RegistryError, where

GEOM_FIELDS = {"r", "n", "cin", "cout", "in_n", "k_n", "out_n", "col_n"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">="}
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/", ast.Mod: "%"}


@dataclass
class Entry:
    """What the generated entry of one op checks and how it calls its kernel body."""
    op: Op
    kernel: str
    extras: list[tuple[str, str, str]]  # (ctype, name, C literal) constants for the body
    body_params: list[str]               # the tlk_ parameter list after `const char *op`
    body_args: list[str]                 # what the entry passes to the body
    live: list[tuple[str, str]] = field(default_factory=list)      # (buffer, condition or "")
    arrays: list[str] = field(default_factory=list)                # host/i64 arrays: non-null
    geoms: list[str] = field(default_factory=list)                 # geom args to parse
    lengths: list[tuple[str, str, str]] = field(default_factory=list)  # (buffer, C expr, cond)
    array_lengths: list[tuple[str, str]] = field(default_factory=list)  # (array, C expr)
    requires: list[tuple[str, str, str, list]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # names whose lengths decide "empty"


def _err(path, op, msg):
    return RegistryError(f"{where(path)}:{op.line}: {op.name}: {msg}")


def _parse_kernel(op: Op, path):
    if not op.kernel:
        return op.name, []
    try:
        tree = ast.parse(op.kernel, mode="eval").body
    except SyntaxError:
        raise _err(path, op, f"kernel {op.kernel!r} must read 'name' or 'name(k=v, ...)'") from None
    if isinstance(tree, ast.Name):
        return tree.id, []
    if not (isinstance(tree, ast.Call) and isinstance(tree.func, ast.Name) and not tree.args):
        raise _err(path, op, f"kernel {op.kernel!r} must read 'name' or 'name(k=v, ...)'")
    extras = []
    for kw in tree.keywords:
        v = kw.value
        if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
            v = ast.Constant(-v.operand.value) if isinstance(v.operand, ast.Constant) else v
        if not isinstance(v, ast.Constant) or type(v.value) not in (int, float):
            raise _err(path, op, f"kernel constant {kw.arg} must be an int or float literal")
        if type(v.value) is int:
            extras.append(("int64_t", kw.arg, f"{v.value}"))
        else:
            extras.append(("double", kw.arg, repr(float(v.value))))
    return tree.func.id, extras


class _Scope:
    def __init__(self, op: Op):
        self.op = op
        self.scalars = {a.name: a.ctype for a in op.args if a.ctype in ("i64", "u64", "f64")}
        self.arrays = {a.name: a.ctype for a in op.args if a.ctype in ("i64[]", "f64[]", "f64out[]")}
        self.geoms = {a.name for a in op.args if a.ctype == "geom"}
        self.lens = {f"{a.name}_len" for a in op.args if a.ctype not in ("i64", "u64", "f64")}


def _length_c(node, sc: _Scope, bad) -> str:
    """A length expression as C over the tl_lens helpers (overflow and sign checked)."""
    if isinstance(node, ast.Constant) and type(node.value) is int and node.value >= 0:
        return f"INT64_C({node.value})"
    if isinstance(node, ast.Name):
        if sc.scalars.get(node.id) == "i64" or node.id in sc.lens:
            return f'tl_lname(&L, "{node.id}", {node.id})'
        bad(f"length uses '{node.id}', which is not an i64 arg or an array length")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id in sc.geoms and node.attr in GEOM_FIELDS:
            return f"G_{node.value.id}.{node.attr}"
        bad(f"length uses '{ast.unparse(node)}'; geometry fields are "
            f"{', '.join(sorted(GEOM_FIELDS))} of a geom arg")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "prod":
        if (len(node.args) == 1 and isinstance(node.args[0], ast.Name)
                and sc.arrays.get(node.args[0].id) == "i64[]" and not node.keywords):
            a = node.args[0].id
            return f'tl_lprod(&L, "{a}", {a}, {a}_len)'
        bad("prod() takes one i64[] arg")
    if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Mult):
        fn = "tl_ladd" if isinstance(node.op, ast.Add) else "tl_lmul"
        return f"{fn}(&L, {_length_c(node.left, sc, bad)}, {_length_c(node.right, sc, bad)})"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
        if isinstance(node.right, ast.Constant) and type(node.right.value) is int and node.right.value > 0:
            return f"({_length_c(node.left, sc, bad)} / {node.right.value})"
        bad("'//' needs a positive integer constant divisor")
    if isinstance(node, ast.IfExp):
        return (f"({_cond_c(node.test, sc, bad)} ? {_length_c(node.body, sc, bad)} : "
                f"{_length_c(node.orelse, sc, bad)})")
    bad(f"cannot use '{ast.unparse(node)}' in a length expression")


def _cond_c(node, sc: _Scope, bad, names=None) -> str:
    """A condition (or plain arithmetic) over the scalar args as C; collects the names read."""
    rec = (lambda n: _cond_c(n, sc, bad, names))
    if isinstance(node, ast.Constant) and type(node.value) in (int, float) and not isinstance(node.value, bool):
        return repr(node.value)
    if isinstance(node, ast.Name):
        if node.id in sc.scalars or node.id in sc.lens:
            if names is not None and node.id not in names:
                names.append(node.id)
            return node.id
        bad(f"condition uses '{node.id}', which is not a scalar arg or an array length")
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id in sc.geoms and node.attr in GEOM_FIELDS:
        return f"G_{node.value.id}.{node.attr}"
    if isinstance(node, ast.BoolOp):
        j = " && " if isinstance(node.op, ast.And) else " || "
        return "(" + j.join(rec(v) for v in node.values) + ")"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return f"!({rec(node.operand)})"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return f"-({rec(node.operand)})"
    if isinstance(node, ast.Compare) and all(type(o) in _CMP for o in node.ops):
        parts, left = [], rec(node.left)
        for o, r in zip(node.ops, node.comparators):
            rc = rec(r)
            parts.append(f"{left} {_CMP[type(o)]} {rc}")
            left = rc
        return "(" + " && ".join(parts) + ")"
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
        return f"({rec(node.left)} {_ARITH[type(node.op)]} {rec(node.right)})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isfinite" \
            and len(node.args) == 1:
        return f"isfinite({rec(node.args[0])})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "broadcastable" and len(node.args) == 2 \
            and all(isinstance(x, ast.Name) and sc.arrays.get(x.id) == "i64[]" for x in node.args):
        x, y = (a.id for a in node.args)
        return f"tl_broadcastable({x}, {x}_len, {y}, {y}_len)"
    bad(f"cannot use '{ast.unparse(node)}' in a condition")


def _parse_expr(text: str, bad):
    try:
        return ast.parse(text, mode="eval").body
    except SyntaxError:
        bad(f"cannot parse {text!r}")


def build_entry(op: Op, path) -> Entry:
    def bad(msg):
        raise _err(path, op, msg)

    kernel, extras = _parse_kernel(op, path)
    sc = _Scope(op)
    buffers = list(op.inputs) + [a.name for a in op.mask_attrs]
    outs = [n for n, _ in op.outputs if n not in op.inplace]
    buffers += outs
    body_params, body_args = [], []
    for p in op.c_params():
        name = p.rsplit(" ", 1)[1].lstrip("*")
        if name in sc.geoms:
            body_params.append(f"const tl_geom *{name}")
            body_args.append(f"&G_{name}")
        elif name.endswith("_len") and name[:-4] in sc.geoms:
            continue
        else:
            body_params.append(p)
            body_args.append(name)
    body_params += [f"{t} {n}" for t, n, _ in extras]
    body_args += [v for _, _, v in extras]
    e = Entry(op, kernel, extras, body_params, body_args)
    known = set(buffers) | set(sc.arrays) | sc.geoms
    for name in op.lengths:
        if name not in known or name in sc.geoms:
            bad(f"lengths names '{name}', which is not a buffer or array of {op.name} "
                f"(known: {', '.join(sorted(known - sc.geoms))})")
    if not op.lengths and "n" in sc.scalars:
        lengths = {b: "n" for b in buffers}
    else:
        lengths = op.lengths
    for b in buffers:
        if b not in lengths:
            bad(f"buffer '{b}' has no expected length: add it to 'lengths'")
        tree = _parse_expr(lengths[b], bad)
        cond = ""
        if isinstance(tree, ast.IfExp) and isinstance(tree.orelse, ast.Constant) \
                and tree.orelse.value is None:
            cond = _cond_c(tree.test, sc, bad)
            tree = ast.IfExp(tree.test, tree.body, ast.Constant(0))
        e.lengths.append((b, _length_c(tree, sc, bad), cond))
        e.live.append((b, cond))
    for a, ctype in sc.arrays.items():
        e.arrays.append(a)
        if a in lengths:
            e.array_lengths.append((a, _length_c(_parse_expr(lengths[a], bad), sc, bad)))
        elif ctype != "i64[]":
            bad(f"host array '{a}' has no expected length: add it to 'lengths'")
    e.geoms = sorted(sc.geoms)
    for r in op.requires:
        names: list[str] = []
        c = _cond_c(_parse_expr(r, bad), sc, bad, names)
        fmts = []
        for n in names:
            fmt = "%g" if sc.scalars.get(n) == "f64" else (
                "%llu" if sc.scalars.get(n) == "u64" else "%lld")
            cast = {"%g": "", "%llu": "(unsigned long long)", "%lld": "(long long)"}[fmt]
            fmts.append((f"{n}={fmt}", f"{cast}{n}"))
        e.requires.append((c, r.replace('"', "'").replace('%', '%%'), ", ".join(f for f, _ in fmts),
                           [v for _, v in fmts]))
    e.outputs = outs + list(op.inplace) + op.host_outputs
    if not e.outputs:
        bad("has no output buffer or host array")
    return e


def build_entries(ops: list[Op], path) -> list[Entry]:
    """Every kernel's entry; entries sharing a body must agree on its parameter types."""
    entries = [build_entry(o, path) for o in ops if o.has_kernel]
    first: dict[str, Entry] = {}
    for e in entries:
        f = first.setdefault(e.kernel, e)
        types = [_ctype(p) for p in e.body_params]
        if types != [_ctype(p) for p in f.body_params]:
            raise _err(path, e.op, f"kernel '{e.kernel}' takes ({', '.join(f.body_params)}) as "
                       f"{f.op.name} calls it; {e.op.name} passes ({', '.join(e.body_params)})")
        if e.op.family != f.op.family:
            raise _err(path, e.op, f"kernel '{e.kernel}' lives in family {f.op.family}")
    by_op = {e.op.name: e for e in entries}
    for k in first:
        if k in by_op and by_op[k].kernel != k:
            raise _err(path, by_op[k].op, f"kernel name '{k}' is also an op that calls another "
                       f"kernel ({by_op[k].kernel})")
    return entries


def _ctype(param: str) -> str:
    return param.rsplit(" ", 1)[0].replace(" *", "*").rstrip("*") + "*" * param.count("*")


def kernel_decls(entries: list[Entry]) -> list[str]:
    """One hidden prototype per kernel body, in registry order."""
    seen, out = set(), []
    for e in entries:
        if e.kernel in seen:
            continue
        seen.add(e.kernel)
        out.append(f"TL_HIDDEN int tlk_{e.kernel}({', '.join(['const char *op'] + e.body_params)});")
    return out


def entry_source(e: Entry) -> str:
    """The C definition of one exported tl_<op>."""
    op = e.op
    ps = op.c_params() or ["void"]
    lines = [f"int {op.symbol}({', '.join(ps)}) {{",
             f'    static const char op[] = "{op.name}";',
             "    TL_TRY(tlb_ready(op));"]
    for b, cond in e.live:
        chk = f'TL_TRY(tl_check_live(op, "{b}", {b}));'
        lines.append(f"    if ({cond}) {chk}" if cond else f"    {chk}")
    for a in e.arrays:
        lines.append(f'    TL_TRY(tl_check_array(op, "{a}", {a}, {a}_len));')
    for g in e.geoms:
        lines.append(f"    tl_geom G_{g};")
        lines.append(f'    TL_TRY(tl_geom_parse(op, "{g}", {g}, {g}_len, &G_{g}));')
    lines.append("    tl_lens L = {op, \"\", TL_OK};")
    if e.array_lengths:  # arrays first: buffer lengths may read their elements
        for a, expr in e.array_lengths:
            lines.append(f'    L.what = "length of {a}"; const int64_t len_{a} = {expr};')
        lines.append("    if (L.status) return L.status;")
        for a, _ in e.array_lengths:
            lines.append(f'    TL_TRY(tl_check_array_len(op, "{a}", {a}_len, len_{a}));')
    for b, expr, _ in e.lengths:
        lines.append(f'    L.what = "length of {b}"; const int64_t len_{b} = {expr};')
    lines.append("    if (L.status) return L.status;")
    for c, text, fmt, vals in e.requires:
        got = f", got {fmt}" if fmt else ""
        args = "".join(f", {v}" for v in vals)
        lines.append(f"    if (!{c})")
        lines.append(f'        return tl_fail(TL_E_ARG, "%s: expected {text}{got}", op{args});')
    for b, _, cond in e.lengths:
        chk = f'TL_TRY(tl_check_len(op, "{b}", {b}, len_{b}));'
        lines.append(f"    if ({cond}) {chk}" if cond else f"    {chk}")
    empty = " && ".join(f"len_{n} == 0" for n in e.outputs)
    lines.append(f"    if ({empty}) return TL_OK;")
    lines.append(f"    return tlk_{e.kernel}({', '.join(['op'] + e.body_args)});")
    lines.append("}")
    return "\n".join(lines)
