"""The package's layers: lower modules never import higher ones, and no import circle exists.

The graph is read from the source with `ast` (no module is imported): every `import` and
`from ... import` in torchlean/**/*.py, at module level and inside functions alike (a lazy
import that goes upward is still an upward import). Imports under `if TYPE_CHECKING:` are left
out: they never run and only name types for annotations.

LAYERS below is the intended house, bottom to top. A module may import modules of its own layer
and of the layers below it. A module that no layer names fails the test: say where it lives.

KNOWN_UPWARD and KNOWN_CIRCLES are what the code still does against that plan. THESE LISTS MAY
ONLY SHRINK: a new upward import or circle fails, and so does an entry the code no longer needs
(delete it, so the list stays the true debt).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "torchlean"

# bottom to top; an entry names a module and every module below it ("nn.modules" covers
# torchlean.nn.modules.*), "" is the package face torchlean/__init__.py alone
LAYERS = [
    # facts and plans that import nothing of torchlean
    # (_abi: the generated cffi declarations of the C ABI, which the loader reads)
    ["errors", "dtypes", "exact_arith", "api_hints", "indexing", "shapes", "_abi",
     "_generated", "current", "return_types", "int_values", "int_shape_ops", "grad_mode"],
    ["_loader"],                                  # opens the native library
    ["_capture"],                                 # graph-capture state
    ["buffer"],                                   # native memory and status codes
    ["runtime"],                                  # switches, environment, synchronize
    ["devices"],                                  # device names, mapped onto the backend
    ["random"],                                   # generator state
    ["cuda_device"],                              # torch.cuda's device queries
    ["_opsupport"],                               # checks shared by the generated ops
    ["inplace"],                                  # kernels writing into a buffer it holds
    ["_generated.ops", "dgemm"],                  # one Python function per kernel
    ["_generated.tape_ops"],
    ["tape_nodes", "saved_versions"],             # the tape's records, saved-value versions
    ["tape_lifetimes"],                           # when the tape frees values and records
    ["tape"],                                     # the autograd tape
    ["int_operators"],                            # IntTensor's operators and promotion
    ["int_tensor"],
    ["int_join"],
    ["composite_shape"],                          # shape and indexing ops composed
    ["composite_reduce"],                         # reductions composed
    ["composite"],                                # ops composed from registry ops
    ["mutation"],                                 # in-place methods, x[idx] = v
    ["tensor_composed"],                          # Tensor's methods over composite
    ["tensor"],
    ["views"],                                    # view methods, bound onto Tensor
    ["parameter"],                                # a Tensor that is a leaf of no Session
    ["session"],
    ["cuda_graph"],                               # graph_step: a step replayed as a CUDA graph
    ["factories", "functions", "interop", "data", "cuda", "utils"],
    # torch's namespaces, filled by the catalog at import
    ["special", "linalg", "fft", "masked", "signal"],
    # collectives (nn builds data parallel and synchronised batch norm on them)
    ["distributed.errors", "distributed.launch", "distributed.agree", "distributed.cuda_runtime",
     "distributed.work", "distributed.store", "distributed.mpi_comm", "distributed.tcp_comm",
     "distributed.nccl_comm"],
    ["distributed.group"],
    ["distributed.reduce", "distributed.sampler", "distributed.torch_names"],
    ["distributed"],
    ["nn.arg_checks"],                            # argument checks shared by nn
    ["nn.functional_base"],                       # what the functional forms share
    ["nn.functional_attention", "nn.functional_pool2d"],
    ["nn.fused", "nn.init", "nn.loss_functions", "nn.functional_core"],
    ["nn.padding", "nn.resample"],
    ["nn.functional"],
    ["nn.checkpoint", "nn.utils"],
    ["nn.modules"],
    ["nn.parallel"],
    ["nn"],
    ["optim", "serialization"],
    ["audit"],                                    # checks of a finished run
    ["catalog"],                                  # binds PyTorch's operator catalog
    [""],                                         # import torchlean
]

# (importer, imported) pairs that go upward today. May only shrink.
KNOWN_UPWARD: set = set()

# import circles today, as module sets. May only shrink.
KNOWN_CIRCLES: list = []


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING",
                                                                    "typing.TYPE_CHECKING"):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path = PKG) -> dict[str, dict[str, int]]:
    """{module: {imported module: first line}} for the package at `root` (names relative to
    the package: "" is its __init__, "nn.functional" ...)."""
    top = root.name
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}

    def resolve(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in files.items():
        pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        out = graph.setdefault(mod, {})
        for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                # `from pkg import sub` imports the submodule; `from mod import name`, the module
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in files else src
                           for a in node.names]
            else:
                continue
            for t in targets:
                if t.split(".")[0] != top:
                    continue
                r = resolve(t)
                if r and r != mod:
                    out.setdefault(r, node.lineno)
    prefix = len(top) + 1
    short = lambda m: m[prefix:]                                      # noqa: E731
    return {short(m): {short(t): ln for t, ln in out.items()} for m, out in graph.items()}


def layer_of(mod: str, layers=LAYERS) -> int | None:
    """Index of the layer whose longest entry covers `mod`; None when no entry does."""
    best, best_len = None, -1
    for i, entries in enumerate(layers):
        for e in entries:
            covers = mod == e if e == "" else (mod == e or mod.startswith(e + "."))
            if covers and len(e) > best_len:
                best, best_len = i, len(e)
    return best


def upward_imports(graph, layers=LAYERS) -> set[tuple[str, str]]:
    return {(m, t) for m, out in graph.items() for t in out
            if layer_of(t, layers) > layer_of(m, layers)}


def circles(graph) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on, stack, found, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop(); on.discard(w); comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(comp)
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_module_has_a_layer(graph):
    missing = sorted(m or "torchlean" for m in graph if layer_of(m) is None)
    assert not missing, (f"no layer in tests/test_layering.py LAYERS covers {missing}: add "
                         "each where it belongs (it may import only its layer and those below)")


def test_no_new_upward_import(graph):
    new = sorted(upward_imports(graph) - KNOWN_UPWARD)
    assert not new, "upward imports (lower layer -> higher layer): " + "; ".join(
        f"torchlean.{m} (line {graph[m][t]}) imports torchlean.{t}" for m, t in new)
    assert len(upward_imports(graph)) <= len(KNOWN_UPWARD)


def test_known_upward_list_only_shrinks(graph):
    gone = sorted(KNOWN_UPWARD - upward_imports(graph))
    assert not gone, f"{gone} no longer import upward: delete them from KNOWN_UPWARD"


def test_no_new_import_circle(graph):
    now = circles(graph)
    new = [sorted(c) for c in now if not any(c <= k for k in KNOWN_CIRCLES)]
    assert not new, f"import circles: {new}"
    assert len(now) <= len(KNOWN_CIRCLES)


def test_known_circle_list_only_shrinks(graph):
    now = circles(graph)
    stale = [sorted(k) for k in KNOWN_CIRCLES if k not in now]
    assert not stale, f"{stale} is no longer a circle as written: shrink or delete it in KNOWN_CIRCLES"


def test_checker_finds_a_planted_circle_and_upward_import(tmp_path):
    """The checker itself: a lazy import inside a function closing a circle, an upward import
    and a TYPE_CHECKING import that must not count."""
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from toy import high\n")
    (pkg / "low.py").write_text("import os\n\ndef f():\n    from toy.high import g\n    return g\n")
    (pkg / "high.py").write_text("from . import low\nfrom typing import TYPE_CHECKING\n"
                                 "if TYPE_CHECKING:\n    from toy.sub.leaf import T\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "leaf.py").write_text("from ..low import f\n")
    g = import_graph(pkg)
    assert g == {"": {"high": 1}, "high": {"low": 1}, "low": {"high": 4}, "sub": {},
                 "sub.leaf": {"low": 1}}
    layers = [["low", "sub"], ["high"], [""]]
    assert upward_imports(g, layers) == {("low", "high")}
    assert circles(g) == [{"low", "high"}]
    assert layer_of("sub.leaf", layers) == 0 and layer_of("nowhere", layers) is None
