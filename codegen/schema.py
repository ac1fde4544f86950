"""The registry's record types and constants, shared by the parser (registry.py) and the C entry
builder (entry.py), so neither imports the other back."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ATTR_TYPES = {"float", "int", "bool", "shape", "ints", "index", "mask", "key", "array", "buffers"}
CTYPES = {"i64": "int64_t", "f64": "double", "u64": "uint64_t", "i64[]": "const int64_t *",
          "geom": "const int64_t *", "f64[]": "const double *", "f64out[]": "double *"}
# passed as pointer + length; `geom` is an i64[] conv/pool geometry the entry layer parses
ARRAY_CTYPES = {"i64[]", "geom", "f64[]", "f64out[]"}
ATTR_CHECKS = {"finite", "positive", "nonneg", "finite_nonzero", "finite_nonneg", "prob"}
ENTRY_KEYS = {"name", "doc", "family", "tape", "inputs", "attrs", "outputs", "args", "broadcast",
              "view", "inplace", "vjp", "determinism", "deterministic_path", "test",
              "lengths", "requires", "kernel", "broadcast_kernel", "recompute", "formula",
              "own_schedule", "normalize", "hands_back"}
ATTR_KEYS = {"type", "default", "check", "doc"}
TEST_KEYS = {"ref", "cases", "domain", "fwd", "vjp", "parity", "skip_vjp", "note", "integer_inputs"}
TOL_KEYS = {"rtol", "atol"}
NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
ARG_RE = re.compile(r"^\s*(i64\[\]|f64out\[\]|f64\[\]|geom|i64|f64|u64)\s+([a-z_][a-z0-9_]*)\s*=\s*(.+?)\s*$")
RESERVED = {"grad", "self", "out", "needs"}


class RegistryError(ValueError):
    """A schema violation, reported as one line 'ops.yaml:LINE: message'."""


def where(path) -> str:
    """A registry path as errors show it: relative to the repository when inside it."""
    p = Path(path)
    try:
        return str(p.resolve().relative_to(ROOT))
    except (ValueError, OSError):
        return str(p)


@dataclass
class Attr:
    name: str
    type: str
    default: Any = None
    has_default: bool = False
    check: str | None = None
    doc: str = ""


@dataclass
class Arg:
    ctype: str  # i64 f64 u64 i64[] f64[] f64out[]
    name: str
    expr: str


@dataclass
class Vjp:
    targets: list[str]  # input names this expression produces gradients for
    expr: str


@dataclass
class Op:
    name: str
    doc: str
    family: str
    line: int
    tape: bool = True
    inputs: list[str] = field(default_factory=list)
    attrs: list[Attr] = field(default_factory=list)
    outputs: list[tuple[str, str]] = field(default_factory=list)
    args: list[Arg] = field(default_factory=list)
    broadcast: bool = False
    broadcast_kernel: str = ""  # "<op>(attr=value, ...)" for differing input shapes
    view: str | None = None
    inplace: list[str] = field(default_factory=list)
    vjps: list[Vjp] = field(default_factory=list)
    recompute: str = ""  # expression giving the value again from what the VJP keeps
    determinism: str = "none"
    deterministic_path: str = ""
    test: dict = field(default_factory=dict)
    lengths: dict = field(default_factory=dict)  # buffer/array name -> length expression
    requires: list = field(default_factory=list)  # conditions on scalar C args
    kernel: str = ""  # "name" or "name(k=v, ...)"; "" = the op's own name
    formula: str = ""  # "tlf_<name>(args)": a pure map both backends' bodies are generated for
    own_schedule: list = field(default_factory=list)  # backends whose map body is hand-written
    normalize: list = field(default_factory=list)  # per-row steps both backends' kernels are generated for
    hands_back: list = field(default_factory=list)  # residuals no VJP reads that a caller may take

    @property
    def symbol(self) -> str:
        return f"tl_{self.name}"

    @property
    def has_kernel(self) -> bool:
        return self.view is None

    @property
    def host_outputs(self) -> list[str]:
        """Names of f64out[] args: host float64 arrays the ops function returns."""
        return [a.name for a in self.args if a.ctype == "f64out[]"]

    @property
    def mask_attrs(self) -> list[Attr]:
        return [a for a in self.attrs if a.type == "mask"]

    def c_params(self) -> list[str]:
        """The C parameter list: input buffers, mask buffers, output buffers, scalar args."""
        ps = [f"tl_buf {n}" for n in self.inputs]
        ps += [f"tl_buf {a.name}" for a in self.mask_attrs]
        ps += [f"tl_buf {n}" for n, _ in self.outputs if n not in self.inplace]
        for a in self.args:
            if a.ctype in ARRAY_CTYPES:
                ps += [f"{CTYPES[a.ctype]}{a.name}", f"int64_t {a.name}_len"]
            else:
                ps.append(f"{CTYPES[a.ctype]} {a.name}")
        return ps

    def vjp_names(self) -> set[str]:
        """Input and output names that some VJP expression reads (what the tape must keep)."""
        names: set[str] = set()
        for v in self.vjps:
            for node in ast.walk(ast.parse(v.expr, mode="eval")):
                if isinstance(node, ast.Name):
                    names.add(node.id)
        return names

    def recompute_names(self) -> set[str]:
        """Names the recompute expression reads (the node keeps them too)."""
        if not self.recompute:
            return set()
        tree = ast.parse(self.recompute, mode="eval")
        callees = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in callees}

    def vjp_shape_only_names(self) -> set[str]:
        """Names every VJP expression reads only as `shape(name)`: the tape keeps their shape,
        not their buffer (a reshape's gradient needs no activation, as in PyTorch)."""
        in_shape, elsewhere = set(), set()
        for v in self.vjps:
            tree = ast.parse(v.expr, mode="eval")
            wrapped = set()
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                        and node.func.id == "shape" and len(node.args) == 1
                        and not node.keywords and isinstance(node.args[0], ast.Name)):
                    wrapped.add(id(node.args[0]))
                    in_shape.add(node.args[0].id)
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and id(node) not in wrapped:
                    elsewhere.add(node.id)
        return in_shape - elsewhere
