"""Both backends' row kernels of every per-row "normalize" op, generated from its `normalize:`.

An op with `normalize:` (a list of steps "name = expr") works on `rows` x `cols` values (its
args `i64 rows` and `i64 cols`); each buffer holds one value per element (length rows*cols),
per column (cols) or per row (rows), as its `lengths` says. A step's expression calls tlf_ and
tlm_ functions (the formula, in native/common/formulas/normalize.h) over buffers, earlier
steps, the op's f64 args (rounded to float32 once), `n` (float32(cols)) and `inv_n`
(float32(1 / cols)). Three kinds of step:

  s = sum(e)       a row statistic: the sum of e over the row's elements;
  out = colsum(e)  a column output: the sum of e over the rows (e reads no row statistic);
  v = e            a row value if e reads only row values, else an element value (inlined
                   where it is read); stored when v is an output buffer.

Element outputs come after every sum: the first is the scratch of the stub's sum terms and of
the column sums' terms. The schedules are fixed here, written once for every such op:

  native/generated/normalize_stub.inc  (native/stub/normalize.c) one parallel loop over the
      rows; every sum by rule 4 of tl_math.h (tl_rule4_sum, tl_stub_axis_sum) in every mode;
  native/generated/normalize_cuda.inc  (native/cuda/normalize.cu) a block per row, one
      kernel template: exact mode sums by rule 4 (tl_exact_block_reduce), the default mode by
      each thread's strided chain then tl_block_sum (tl_row_sum, reduce_util.cuh); column sums
      by tl_cuda_axis_sum (rule 4 in exact mode).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from codegen.schema import Op, RegistryError, where

KINDS = {"rows*cols": "elem", "cols": "col", "rows": "row"}
BUILTINS = {"n": "n_f", "inv_n": "inv_n_f"}


@dataclass
class Step:
    target: str
    kind: str  # "sum", "colsum", "row", "elem"
    expr: ast.expr
    stored: bool = False  # target is an output buffer


@dataclass
class Spec:
    op: Op
    kinds: dict  # buffer -> elem/col/row
    outs: list
    params: list  # f64 args
    steps: list = field(default_factory=list)
    scratch: str = ""


def _err(path, op, msg):
    return RegistryError(f"{where(path)}:{op.line}: {op.name}: {msg}")


def parse_normalize(op: Op, path) -> Spec:
    """The checked steps of an op's `normalize:`."""
    bad = lambda m: _err(path, op, f"normalize: {m}")  # noqa: E731
    argnames = [a.name for a in op.args]
    if not {"rows", "cols"} <= set(argnames) or op.kernel or op.inplace or op.mask_attrs:
        raise bad("needs args 'i64 rows' and 'i64 cols' (no kernel, inplace or mask)")
    others = [a for a in op.args if a.ctype != "f64" and a.name not in ("rows", "cols")]
    if others:
        raise bad(f"args other than rows, cols and f64 scalars: {', '.join(a.name for a in others)}")
    outs = [o for o, _ in op.outputs]
    kinds = {}
    for b in op.inputs + outs:
        k = KINDS.get(str(op.lengths.get(b, "")).replace(" ", ""))
        if k is None:
            raise bad(f"buffer '{b}' needs lengths 'rows*cols', 'cols' or 'rows'")
        kinds[b] = k
    spec = Spec(op, kinds, outs, [a.name for a in op.args if a.ctype == "f64"])
    level: dict[str, str] = {}   # step name -> "row" / "elem"
    uses_stat: dict[str, bool] = {}  # element value -> reads a row statistic
    read: set[str] = set()

    def check(e, inside):
        """level of e ("row"/"elem") and whether it reads a row value of a step"""
        if isinstance(e, ast.Name):
            n = e.id
            if n in op.inputs:
                read.add(n)
                return ("row" if kinds[n] == "row" else "elem"), False
            if n in level:
                lv = level[n]
                return lv, (lv == "row") or uses_stat.get(n, False)
            if n in spec.params or n in BUILTINS:
                return "row", False
            raise bad(f"'{n}' in {inside!r} is no input, earlier step, f64 arg, n or inv_n")
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and not e.keywords \
                and e.func.id.startswith(("tlf_", "tlm_")):
            parts = [check(a, inside) for a in e.args]
            return ("elem" if any(p[0] == "elem" for p in parts) else "row"), any(p[1] for p in parts)
        raise bad(f"{inside!r}: expressions are calls of tlf_/tlm_ functions on names")

    for text in op.normalize:
        try:
            node = ast.parse(str(text), mode="exec").body
        except SyntaxError:
            node = None
        if not (node and len(node) == 1 and isinstance(node[0], ast.Assign) and len(node[0].targets) == 1
                and isinstance(node[0].targets[0], ast.Name)):
            raise bad(f"a step reads 'name = expr', got {text!r}")
        t, e = node[0].targets[0].id, node[0].value
        if t in level or t in op.inputs or t in BUILTINS or t in spec.params:
            raise bad(f"step {text!r} assigns '{t}' again (or an input, arg, n or inv_n)")
        red = e.func.id if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) \
            and e.func.id in ("sum", "colsum") else ""
        if red:
            if len(e.args) != 1 or e.keywords:
                raise bad(f"{red} takes one expression: {text!r}")
            lv, stat = check(e.args[0], text)
            if lv != "elem":
                raise bad(f"{red} of a row value: {text!r}")
            if red == "colsum":
                if kinds.get(t) != "col" or t not in outs:
                    raise bad(f"colsum's target must be a column output: {text!r}")
                if stat:
                    raise bad(f"a column sum reads no row statistic: {text!r}")
            elif t in kinds:
                raise bad(f"sum's target is a row statistic, not a buffer: {text!r}")
            spec.steps.append(Step(t, red, e.args[0], t in outs))
            level[t] = "row"
            continue
        lv, stat = check(e, text)
        if t in kinds:
            if t not in outs or (kinds[t] == "row") != (lv == "row") or kinds[t] == "col":
                raise bad(f"'{t}' is a {kinds[t]} buffer; {text!r} is a {lv} value")
        level[t], uses_stat[t] = lv, stat
        spec.steps.append(Step(t, lv, e, t in outs))
    done = [s.target for s in spec.steps if s.stored]
    missing = [o for o in outs if o not in done]
    if missing:
        raise bad(f"output(s) {', '.join(missing)} never assigned")
    unread = [i for i in op.inputs if i not in read]
    if unread:
        raise bad(f"input(s) {', '.join(unread)} never read")
    elem_outs = [i for i, s in enumerate(spec.steps) if s.stored and s.kind == "elem"]
    sums = [i for i, s in enumerate(spec.steps) if s.kind in ("sum", "colsum")]
    if sums and (not elem_outs or min(elem_outs) < max(sums)):
        raise bad("element outputs come after every sum (the first is the sums' scratch)")
    if elem_outs:
        spec.scratch = spec.steps[elem_outs[0]].target
    return spec


def _c(e: ast.expr, spec: Spec, env: dict) -> str:
    """C text of e at element (r, j) of the row: buffers by their kind, steps by env"""
    if isinstance(e, ast.Name):
        n = e.id
        if n in env:
            return env[n]
        if n in spec.kinds:
            k = spec.kinds[n]
            return f"{n}_p[{'r * cols + j' if k == 'elem' else 'j' if k == 'col' else 'r'}]"
        return BUILTINS.get(n, f"f_{n}")
    return f"{e.func.id}({', '.join(_c(a, spec, env) for a in e.args)})"


def _walk(spec: Spec, backend: str):
    """(colsums [(target, term)], row lines, element lines) of one backend"""
    env, colsums, row_lines, elem_lines = {}, [], [], []
    for s in spec.steps:
        if s.kind == "colsum":
            colsums.append((s.target, _c(s.expr, spec, env)))
        elif s.kind == "sum":
            term = _c(s.expr, spec, env)
            if backend == "stub":
                row_lines.append(f"for (int64_t j = 0; j < cols; j++) t[j] = {term};")
                row_lines.append(f"const float v_{s.target} = tl_rule4_sum(t, cols);")
            else:
                row_lines.append(f"const float v_{s.target} = tl_row_sum<EXACT>([=](int64_t j) {{ return {term}; }}, "
                            "cols, part);")
            env[s.target] = f"v_{s.target}"
        elif s.kind == "row":
            row_lines.append(f"const float v_{s.target} = {_c(s.expr, spec, env)};")
            if s.stored:
                store = f"{s.target}_p[r] = v_{s.target};"
                row_lines.append(store if backend == "stub" else f"if (threadIdx.x == 0) {store}")
            env[s.target] = f"v_{s.target}"
        elif s.stored:  # later steps read the value, not the output just written
            elem_lines.append(f"const float e_{s.target} = {_c(s.expr, spec, env)};")
            elem_lines.append(f"{s.target}_p[r * cols + j] = e_{s.target};")
            env[s.target] = f"e_{s.target}"
        else:
            env[s.target] = _c(s.expr, spec, env)
    return colsums, row_lines, elem_lines


def _pointers(spec: Spec) -> list[tuple[str, str]]:
    """(name, const or not) of every buffer, inputs first"""
    return [(b, "const ") for b in spec.op.inputs] + [(b, "") for b in spec.outs]


def _scalars(spec: Spec) -> list[str]:
    return ["const float n_f = (float)cols, inv_n_f = (float)(1.0 / (double)cols);"] + \
        [f"const float f_{p} = (float){p};" for p in spec.params]


def stub_body(spec: Spec) -> str:
    op = spec.op
    colsums, row_lines, elem_lines = _walk(spec, "stub")
    L = [f"int tlk_{op.name}({', '.join(['const char *op'] + op.c_params())}) {{"]
    L += [f"    {c}float *{b}_p = {b}->data;" for b, c in _pointers(spec)]
    L += [f"    {s}" for s in _scalars(spec)]
    L.append("    (void)n_f; (void)inv_n_f;")
    par = "#pragma omp parallel for schedule(static) if (rows * cols > TL_PAR_MIN)"
    for target, term in colsums:
        L += [par, "    for (int64_t r = 0; r < rows; r++)",
              f"        for (int64_t j = 0; j < cols; j++) {spec.scratch}_p[r * cols + j] = {term};",
              f"    TL_TRY(tl_stub_axis_sum(op, {spec.scratch}_p, {target}_p, 1, rows, cols));"]
    if row_lines or elem_lines:
        L += [par, "    for (int64_t r = 0; r < rows; r++) {"]
        if any(s.kind == "sum" for s in spec.steps):
            L.append(f"        float *t = {spec.scratch}_p + r * cols;  /* the sums' terms, until the outputs */")
        L += [f"        {s}" for s in row_lines]
        if elem_lines:
            L += ["        for (int64_t j = 0; j < cols; j++) {"]
            L += [f"            {s}" for s in elem_lines] + ["        }"]
        L.append("    }")
    L += ["    return TL_OK;", "}"]
    return "\n".join(L)


def cuda_body(spec: Spec) -> tuple[str, str]:
    """(the kernels, the tlk_ body)"""
    op = spec.op
    colsums, row_lines, elem_lines = _walk(spec, "cuda")
    ptrs = [f"{c}float *__restrict__ {b}_p" for b, c in _pointers(spec)]
    kparams = ", ".join(ptrs + ["int64_t rows", "int64_t cols", "float n_f", "float inv_n_f"]
                        + [f"float f_{p}" for p in spec.params] + ["float *gpart"])
    args = ", ".join([f"{b}->data" for b, _ in _pointers(spec)]
                     + ["rows", "cols", "(float)cols", "(float)(1.0 / (double)cols)"]
                     + [f"(float){p}" for p in spec.params])
    K = []
    for k, (target, term) in enumerate(colsums):
        K += [f"__global__ void cols_{op.name}_{k}({kparams}) {{",
              "    TL_GRID_STRIDE(i, rows * cols) {",
              "        const int64_t r = i / cols, j = i - r * cols;",
              f"        {spec.scratch}_p[i] = {term};", "    }", "}", ""]
    if row_lines or elem_lines:
        K += ["template <bool EXACT>", f"__global__ void rows_{op.name}({kparams}) {{",
              "    extern __shared__ float tl_rows_smem[];",
              "    float *part = EXACT ? tl_exact_part(tl_rows_smem, gpart, cols) : nullptr;",
              "    const int64_t r = blockIdx.x;", "    (void)part; (void)rows; (void)n_f; (void)inv_n_f;"]
        K += [f"    {s}" for s in row_lines]
        if elem_lines:
            K += ["    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {"] + \
                 [f"        {s}" for s in elem_lines] + ["    }"]
        K += ["}", ""]
    H = [f"extern \"C\" int tlk_{op.name}({', '.join(['const char *op'] + op.c_params())}) {{",
         "    cudaStream_t st = tl_stream();"]
    if colsums:  # no rows: the column sums are 0
        H += ["    if (rows == 0) {"]
        H += [f"        TL_CUDA_TRY(op, cudaMemsetAsync({t}->data, 0, sizeof(float) * cols, st));" for t, _ in colsums]
        H += ["        return TL_OK;", "    }"]
    else:
        H.append("    if (rows == 0) return TL_OK;")
    if row_lines or elem_lines:
        H += ["    if (rows > TL_MAX_GRID_X)",
              "        return tl_fail(TL_E_SHAPE, \"%s: %lld rows exceed the CUDA grid limit\", op, (long long)rows);"]
    for k, (target, _) in enumerate(colsums):
        H += [f"    cols_{op.name}_{k}<<<tl_blocks(rows * cols), TL_THREADS, 0, st>>>({args}, nullptr);",
              "    TL_LAUNCHED(op);",
              f"    TL_TRY(tl_cuda_axis_sum(op, {spec.scratch}->data, {target}->data, 1, rows, cols, 0));"]
    if row_lines or elem_lines:
        H += ["    if (tl_exact()) {", "        TlExactParts ex;", "        TL_TRY(ex.setup(op, rows, cols));",
              f"        rows_{op.name}<true><<<(unsigned)rows, tl_exact_threads(cols), ex.smem, st>>>("
              f"{args}, ex.gpart);",
              "        return ex.finish(op);", "    }",
              f"    rows_{op.name}<false><<<(unsigned)rows, tl_rows_threads(cols), 0, st>>>({args}, nullptr);",
              "    TL_LAUNCHED(op);"]
    H += ["    return TL_OK;", "}"]
    return "\n".join(K), "\n".join(H)


def render_normalize(ops: list[Op], path, gen_line: str) -> dict[str, str]:
    """{relative path: text} of the generated normalize kernels of both backends."""
    specs = [parse_normalize(o, path) for o in ops if o.normalize]
    heads = "".join(f"#include \"generated/{f}_kernels.h\"\n" for f in sorted({s.op.family for s in specs}))
    heads = "#include \"formulas/normalize.h\"\n" + heads
    stub = [stub_body(s) for s in specs]
    cuda = [cuda_body(s) for s in specs]
    return {
        "native/generated/normalize_stub.inc": (
            gen_line + "/* normalize_stub.inc: the stub bodies of every ops.yaml `normalize:` op\n"
            " * (codegen/normalize.py), included by native/stub/normalize.c: a parallel loop over rows,\n"
            " * each row's sums by rule 4 in every mode. */\n" + heads + "\n" + "\n\n".join(stub) + "\n"),
        "native/generated/normalize_cuda.inc": (
            gen_line + "/* normalize_cuda.inc: the CUDA bodies of every ops.yaml `normalize:` op\n"
            " * (codegen/normalize.py), included by native/cuda/normalize.cu: a block per row, sums by\n"
            " * rule 4 in exact mode (tl_exact_block_reduce) or tl_block_sum otherwise (tl_row_sum). */\n"
            + heads + "\nnamespace {\n\n" + "\n".join(k for k, _ in cuda) + "}  // namespace\n\n"
            + "\n\n".join(h for _, h in cuda) + "\n"),
    }
