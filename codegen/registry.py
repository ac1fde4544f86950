"""Parse and validate ops.yaml into typed records.

ops.yaml is the single description of every kernel and tape op. This module reads it strictly:
every key is popped and checked, an unknown key is an error with file:line, and the small
expression language used for shapes, kernel arguments and VJPs is checked here (every call
must name a registry op or a shape helper, with a sane arity), so a typo fails at generation
time instead of at run time. Generation (gen.py) only formats what this module produced.

Entry schema (see the header of ops.yaml for the prose version):

  name:        snake_case; C symbol tl_<name>; Tape method and ops function <name>
  doc:         one-paragraph docstring
  family:      native/stub/<family>.c and native/cuda/<family>.cu hold the kernel
  tape:        true (default) = a Tape method is generated; false = kernel-only
  inputs:      list of tensor input names (node ids on the tape, buffers in C)
  attrs:       {name: {type, default?, check?}}; type in float int bool shape ints index mask
               array (a real NumPy array, converted to C-contiguous float64; host-only kernels)
               buffers (a sequence of live AnyBuffers, passed to an i64[] arg as their handles;
               the caller's sequence keeps them alive for the call)
  outputs:     {name: shape-expression}; the first output is the op's value, the others are
               residuals a VJP may read (released at once when no VJP reads them)
  args:        ["<ctype> <name> = <expression>"] scalar kernel arguments after the buffers;
               ctype in i64 f64 u64 i64[] f64[] f64out[]. Host float64 arrays (tape: false
               kernels such as dgemm): f64[] passes `const double *name, int64_t name_len`
               from a float64 NumPy array (an `array` attr); f64out[] passes `double *name,
               int64_t name_len` for a zero-filled host array of the shape the expression
               gives, and the ops function returns those arrays (outputs may then be {})
  broadcast:   true = inputs are broadcast (NumPy rules) to the output shape before the kernel
  broadcast_kernel: "<op>(attr=value, ...)" (with broadcast): when the input shapes differ,
               call that tape: false op on the same inputs instead, which reads them in place
               through broadcast strides (no full-size copies of the inputs)
  view:        <input name> = no kernel; the output aliases that input's buffer (reshape)
  inplace:     [input names] the kernel updates these buffers in place (optimizer steps)
  vjp:         {"x": expr, "a, b": expr-returning-a-tuple}; "grad" is the upstream cotangent
  recompute:   expr (the vjp language, no grad) giving the op's value again from what the node
               keeps for its VJP: a Session may then free the value while only VJPs still need
               it and recompute it (same kernels, same bits) just before the first of them runs
  determinism: none | atomic; atomic needs deterministic_path (the fixed-order algorithm)
  lengths:     {buffer or array name: length expression} the generated C entry checks before the
               kernel runs (see codegen/entry.py); default when absent and an arg `n` exists:
               every buffer holds n elements
  requires:    ["<condition>"] further conditions on the scalar C args, checked in C
  kernel:      "<name>" or "<name>(const=value, ...)": the hidden tlk_<name> body this entry
               calls; entries naming one kernel share its body (2-D forms, permutations)
  formula:     "tlf_<name>(<inputs and f64 args>)": a pure elementwise map whose formula lives
               in native/common/formulas/<family>.h; codegen/maps.py emits both backends' bodies
  own_schedule: [stub] or [cuda]: that backend hand-writes the map's body (same formula)
  normalize:   ["s = sum(e)", "out = colsum(e)", "v = e", ...]: a per-row op (args rows, cols)
               whose row statistics and map call native/common/formulas/normalize.h;
               codegen/normalize.py emits both backends' kernels (exact and default schedules)
  hands_back:  [residual names] outputs no VJP reads that the Tape method hands to a caller
               who asks (keyword `hand_back=list`: appended there, the caller releases them)
               instead of releasing them (BatchNorm's batch mean and variance)
  test:        cases/domain/tolerances for the registry-driven test suite
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from pathlib import Path

import yaml

from codegen.schema import (ARG_RE, ATTR_CHECKS, ATTR_KEYS, ATTR_TYPES, ENTRY_KEYS, NAME_RE,
                            RESERVED, ROOT, TEST_KEYS, TOL_KEYS, Arg, Attr, Op, RegistryError,
                            Vjp, where)
from codegen.entry import build_entries  # the C entry contract: lengths, requires, kernel
from codegen.maps import parse_formula  # formula maps: both backends' loops
from codegen.normalize import parse_normalize  # per-row normalize ops: both backends' kernels


class _LineLoader(yaml.SafeLoader):
    """A YAML loader that remembers the line of every mapping (for error messages)."""


def _construct_mapping(loader, node, deep=False):
    mapping = LineDict(loader.construct_mapping(node, deep=deep))
    mapping.line = node.start_mark.line + 1
    return mapping


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class LineDict(dict):
    line = 0


def load_shape_helpers():
    """The shape rule package (torchlean/shapes/), loaded by path so no native library loads."""
    pkg = ROOT / "torchlean" / "shapes"
    spec = importlib.util.spec_from_file_location("_tl_shapes", pkg / "__init__.py",
                                                  submodule_search_locations=[str(pkg)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its modules import each other relatively
    spec.loader.exec_module(mod)
    return mod


def broadcast_kernel_call(op: Op, path=None) -> tuple[str, dict]:
    """(op name, {attr: Python source of its value}) of an op's broadcast_kernel."""
    try:
        call = ast.parse(op.broadcast_kernel, mode="eval").body
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args
                and all(isinstance(k.value, ast.Constant) for k in call.keywords)):
            raise SyntaxError
    except SyntaxError:
        raise _err(path, op.line, f"{op.name}: broadcast_kernel must read '<op>(attr=constant, "
                   f"...)', got {op.broadcast_kernel!r}") from None
    return call.func.id, {k.arg: ast.unparse(k.value) for k in call.keywords}


def _err(path, line, msg):
    return RegistryError(f"{where(path)}:{line}: {msg}")


def _pop(d: LineDict, key, default=None):
    return d.pop(key) if key in d else default


def _expr_calls(expr: str, path, line, what) -> ast.Expression:
    try:
        return ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise _err(path, line, f"{what}: cannot parse expression {expr!r}: {e.msg}") from None


def parse_registry(path: Path | str = ROOT / "ops.yaml", text: str | None = None) -> list[Op]:
    """Read and validate a registry file; raise RegistryError with file:line on any problem."""
    path = Path(path)
    text = path.read_text() if text is None else text
    try:
        doc = yaml.load(text, Loader=_LineLoader)
    except yaml.YAMLError as e:
        raise RegistryError(f"{where(path)}: invalid YAML: {e}") from None
    if not isinstance(doc, dict) or "ops" not in doc:
        raise RegistryError(f"{where(path)}:1: the registry must be a mapping with an 'ops' list")
    unknown = set(doc) - {"ops", "version"}
    if unknown:
        raise _err(path, doc.line, f"unknown top-level key(s): {', '.join(sorted(unknown))}")
    ops: list[Op] = []
    seen: dict[str, int] = {}
    for raw in doc["ops"] or []:
        if not isinstance(raw, LineDict):
            raise RegistryError(f"{where(path)}: every entry of 'ops' must be a mapping, got {raw!r}")
        op = _parse_entry(raw, path)
        if op.name in seen:
            raise _err(path, op.line, f"op '{op.name}' is defined twice (first at line {seen[op.name]})")
        seen[op.name] = op.line
        ops.append(op)
    _check_expressions(ops, path)
    build_entries(ops, path)
    return ops


def _parse_entry(raw: LineDict, path) -> Op:
    line = raw.line
    raw = LineDict(raw)
    raw.line = line
    unknown = set(raw) - ENTRY_KEYS
    if unknown:
        raise _err(path, line, f"unknown key(s) {', '.join(sorted(unknown))} in op "
                   f"'{raw.get('name', '?')}'; allowed: {', '.join(sorted(ENTRY_KEYS))}")
    for req in ("name", "doc", "family", "outputs"):
        if req not in raw:
            raise _err(path, line, f"op '{raw.get('name', '?')}' is missing required key '{req}'")
    name = raw["name"]
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _err(path, line, f"op name {name!r} must be snake_case")
    op = Op(name=name, doc=str(raw["doc"]).strip(), family=str(raw["family"]), line=line)
    op.tape = bool(_pop(raw, "tape", True))
    op.inputs = list(_pop(raw, "inputs", []) or [])
    for n in op.inputs:
        if not isinstance(n, str) or not NAME_RE.match(n) or n in RESERVED:
            raise _err(path, line, f"{name}: input name {n!r} is not a valid identifier")
    attrs = _pop(raw, "attrs", {}) or {}
    if not isinstance(attrs, dict):
        raise _err(path, line, f"{name}: attrs must be a mapping name -> {{type, default, check}}")
    for an, spec in attrs.items():
        aline = getattr(spec, "line", line)
        if not isinstance(spec, dict):
            raise _err(path, aline, f"{name}: attr '{an}' must be a mapping with a 'type'")
        bad = set(spec) - ATTR_KEYS
        if bad:
            raise _err(path, aline, f"{name}: unknown key(s) {', '.join(sorted(bad))} in attr '{an}'")
        if spec.get("type") not in ATTR_TYPES:
            raise _err(path, aline, f"{name}: attr '{an}' has type {spec.get('type')!r}; "
                       f"expected one of {', '.join(sorted(ATTR_TYPES))}")
        if an in op.inputs or an in RESERVED or not NAME_RE.match(an):
            raise _err(path, aline, f"{name}: attr name '{an}' clashes with an input or reserved name")
        if spec.get("check") is not None and spec["check"] not in ATTR_CHECKS:
            raise _err(path, aline, f"{name}: attr '{an}' has unknown check {spec['check']!r}; "
                       f"expected one of {', '.join(sorted(ATTR_CHECKS))}")
        op.attrs.append(Attr(an, spec["type"], spec.get("default"), "default" in spec,
                             spec.get("check"), str(spec.get("doc", ""))))
    for a in _pop(raw, "args", []) or []:
        m = ARG_RE.match(str(a))
        if not m:
            raise _err(path, line, f"{name}: kernel arg {a!r} must read "
                       "'<i64|f64|u64|i64[]|geom|f64[]|f64out[]> name = expr'")
        op.args.append(Arg(m.group(1), m.group(2), m.group(3)))
    outs = raw["outputs"]
    if not isinstance(outs, dict) or (not outs and not op.host_outputs):
        raise _err(path, line, f"{name}: outputs must be a non-empty mapping name -> shape rule")
    if op.host_outputs and op.tape:
        raise _err(path, line, f"{name}: f64out[] host outputs are only allowed with tape: false")
    op.outputs = [(str(k), str(v)) for k, v in outs.items()]
    op.broadcast = bool(_pop(raw, "broadcast", False))
    op.broadcast_kernel = str(_pop(raw, "broadcast_kernel", "") or "")
    if op.broadcast_kernel and not op.broadcast:
        raise _err(path, line, f"{name}: broadcast_kernel needs broadcast: true")
    op.view = _pop(raw, "view")
    if op.view is not None and op.view not in op.inputs:
        raise _err(path, line, f"{name}: view must name an input, got {op.view!r}")
    op.inplace = list(_pop(raw, "inplace", []) or [])
    for n in op.inplace:
        if n not in op.inputs:
            raise _err(path, line, f"{name}: inplace name {n!r} is not an input")
    vjp = _pop(raw, "vjp", {}) or {}
    if not isinstance(vjp, dict):
        raise _err(path, line, f"{name}: vjp must map input names to expressions")
    covered: set[str] = set()
    for key, expr in vjp.items():
        targets = [t.strip() for t in str(key).split(",")]
        for t in targets:
            if t not in op.inputs:
                raise _err(path, line, f"{name}: vjp names '{t}', which is not an input of {name} "
                           f"(inputs: {', '.join(op.inputs) or 'none'})")
            if t in covered:
                raise _err(path, line, f"{name}: vjp for input '{t}' is given twice")
            covered.add(t)
        op.vjps.append(Vjp(targets, str(expr)))
    op.recompute = str(_pop(raw, "recompute", "") or "")
    op.hands_back = [str(n) for n in (_pop(raw, "hands_back", []) or [])]
    if op.hands_back and not op.tape:
        raise _err(path, line, f"{name}: hands_back needs a tape op")
    if any(a.name == "hand_back" for a in op.attrs):
        raise _err(path, line, f"{name}: attr name 'hand_back' is taken by hands_back")
    for n in op.hands_back:
        if n not in [o for o, _ in op.outputs[1:]] or n in (op.vjp_names() |
                                                            op.recompute_names()):
            raise _err(path, line, f"{name}: hands_back names {n!r}, which is not a residual "
                       "output that no vjp or recompute reads")
    if op.recompute and not op.vjps:
        raise _err(path, line, f"{name}: recompute needs a vjp (it serves the VJPs of consumers)")
    op.determinism = str(_pop(raw, "determinism", "none"))
    op.deterministic_path = str(_pop(raw, "deterministic_path", "") or "")
    if op.determinism not in ("none", "atomic"):
        raise _err(path, line, f"{name}: determinism must be 'none' or 'atomic', got {op.determinism!r}")
    if op.determinism == "atomic" and not op.deterministic_path:
        raise _err(path, line, f"{name}: determinism 'atomic' needs a deterministic_path "
                   "describing the fixed-order algorithm used when deterministic mode is on")
    lengths = _pop(raw, "lengths", {}) or {}
    if not isinstance(lengths, dict):
        raise _err(path, line, f"{name}: lengths must map buffer names to length expressions")
    op.lengths = {str(k): str(v) for k, v in lengths.items()}
    requires = _pop(raw, "requires", []) or []
    if not isinstance(requires, list):
        raise _err(path, line, f"{name}: requires must be a list of conditions")
    op.requires = [str(r) for r in requires]
    op.kernel = str(_pop(raw, "kernel", "") or "")
    op.formula = str(_pop(raw, "formula", "") or "")
    op.own_schedule = list(_pop(raw, "own_schedule", []) or [])
    op.normalize = [str(t) for t in (_pop(raw, "normalize", []) or [])]
    if op.formula and op.normalize:
        raise _err(path, line, f"{name}: give formula or normalize, not both")
    if op.formula:
        parse_formula(op, path)
    elif op.normalize:
        parse_normalize(op, path)
    elif op.own_schedule:
        raise _err(path, line, f"{name}: own_schedule needs a formula")
    test = _pop(raw, "test", None)
    if op.tape and test is None:
        raise _err(path, line, f"{name}: tape op needs a 'test' block (cases and tolerances)")
    if test is not None:
        bad = set(test) - TEST_KEYS
        if bad:
            raise _err(path, getattr(test, "line", line),
                       f"{name}: unknown key(s) {', '.join(sorted(bad))} in test")
        for tk in ("fwd", "vjp", "parity"):
            tol = test.get(tk)
            if tol is not None and (not isinstance(tol, dict) or set(tol) - TOL_KEYS):
                raise _err(path, getattr(test, "line", line),
                           f"{name}: test.{tk} must be {{rtol, atol}}, got {tol!r}")
        if op.tape and "fwd" not in test:
            raise _err(path, getattr(test, "line", line), f"{name}: test needs a 'fwd' tolerance")
        if op.tape and op.vjps and "vjp" not in test and not test.get("skip_vjp"):
            raise _err(path, getattr(test, "line", line), f"{name}: test needs a 'vjp' tolerance")
        op.test = dict(test)
    return op


def _check_expressions(ops: list[Op], path):
    """Every call in a shape, arg or VJP expression must be a registry op or a shape helper."""
    helpers = load_shape_helpers()
    by_name = {o.name: o for o in ops}
    for op in ops:
        if op.broadcast_kernel:
            fn, kw = broadcast_kernel_call(op, path)
            callee = by_name.get(fn)
            if callee is None or callee.tape or len(callee.inputs) != len(op.inputs) \
                    or set(kw) - {a.name for a in callee.attrs}:
                raise _err(path, op.line, f"{op.name}: broadcast_kernel {op.broadcast_kernel!r} "
                           f"must call a tape: false op taking {len(op.inputs)} inputs and "
                           "the attrs given")
        scope = set(op.inputs) | {a.name for a in op.attrs}
        for oname, expr in op.outputs:
            _check_helper_expr(expr, scope, helpers, path, op, f"output '{oname}'")
        oscope = scope | {n for n, _ in op.outputs}
        for a in op.args:
            _check_helper_expr(a.expr, oscope, helpers, path, op, f"arg '{a.name}'")
        vscope = scope | {n for n, _ in op.outputs} | {"grad"}
        if op.recompute:
            _expr_calls(op.recompute, path, op.line, f"{op.name}: recompute")
            bad = op.recompute_names() - (scope | {n for n, _ in op.outputs[1:]})
            if bad or "grad" in op.recompute or op.outputs[0][0] in op.vjp_names():
                raise _err(path, op.line, f"{op.name}: recompute may read inputs, attrs and "
                           "residual outputs only, and only for an op whose VJP does not read "
                           f"its value; got {op.recompute!r}")
        for v in op.vjps:
            tree = _expr_calls(v.expr, path, op.line, f"{op.name}: vjp")
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id not in vscope and not _is_callee(tree, node):
                    raise _err(path, op.line, f"{op.name}: vjp uses unknown name '{node.id}' "
                               f"(known: {', '.join(sorted(vscope))})")
                if isinstance(node, ast.Call):
                    if not isinstance(node.func, ast.Name):
                        raise _err(path, op.line, f"{op.name}: vjp calls must be plain names")
                    fn = node.func.id
                    if fn in by_name:
                        callee = by_name[fn]
                        if len(node.args) != len(callee.inputs):
                            raise _err(path, op.line, f"{op.name}: vjp calls {fn} with "
                                       f"{len(node.args)} positional args; {fn} takes "
                                       f"{len(callee.inputs)} ({', '.join(callee.inputs)})")
                        known = {a.name for a in callee.attrs}
                        for kw in node.keywords:
                            if kw.arg not in known:
                                raise _err(path, op.line, f"{op.name}: vjp passes unknown "
                                           f"attr '{kw.arg}' to {fn}")
                    elif not hasattr(helpers, fn):
                        raise _err(path, op.line, f"{op.name}: vjp calls '{fn}', which is neither "
                                   "a registry op nor a helper in torchlean/shapes/")
            if len(v.targets) > 1 and not isinstance(tree.body, ast.Call):
                raise _err(path, op.line, f"{op.name}: a multi-input vjp must be one call")
        _check_attrs_used(op, path)


def _names_in(expr: str) -> set[str]:
    return {n.id for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Name)}


def _check_attrs_used(op: Op, path):
    """An attr that no output rule, kernel arg or VJP reads is a typo or dead: refuse it."""
    used: set[str] = set()
    for expr in [e for _, e in op.outputs] + [a.expr for a in op.args] + [v.expr for v in op.vjps]:
        used |= _names_in(expr)
    for a in op.attrs:
        if a.type != "mask" and a.name not in used:
            raise _err(path, op.line, f"{op.name}: attr '{a.name}' is unused (no output rule, "
                       "kernel arg or vjp reads it)")


def _is_callee(tree, name_node) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.func is name_node:
            return True
    return False


def _check_helper_expr(expr, scope, helpers, path, op, what):
    tree = _expr_calls(expr, path, op.line, f"{op.name}: {what}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or not hasattr(helpers, node.func.id):
                fn = getattr(node.func, "id", ast.unparse(node.func))
                raise _err(path, op.line, f"{op.name}: {what} calls '{fn}', which is not a "
                           "helper in torchlean/shapes/ (define it in torchlean/shapes/<family>.py "
                           "and export it from torchlean/shapes/__init__.py)")
        elif isinstance(node, ast.Name) and not _is_callee(tree, node) and node.id not in scope:
            raise _err(path, op.line, f"{op.name}: {what} uses unknown name '{node.id}' "
                       f"(known: {', '.join(sorted(scope))})")


def registry_hash(ops: list[Op]) -> str:
    """Short hash of the C ABI the registry describes (symbol names, parameter lists in order),
    compiled into each library and checked at load. Docs, tests and tolerances are not part of
    it, so editing them neither rebuilds the libraries nor makes a built library stale."""
    abi = "\n".join(f"{o.symbol}({', '.join(o.c_params())})" for o in ops if o.has_kernel)
    return hashlib.sha256(abi.encode()).hexdigest()[:16]
