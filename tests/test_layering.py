"""Layers below the generated ops never import them (or anything above them): the loader,
buffers, errors, the capture state, the op support helpers and the shape rules."""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "torchlean"
LOW = ["errors.py", "_loader.py", "_capture.py", "buffer.py", "_opsupport.py"] + sorted(
    str(p.relative_to(PKG)) for p in (PKG / "shapes").glob("*.py"))
# what each low module may import from torchlean (the loader reads the generated cffi data)
ALLOWED = {"torchlean.errors", "torchlean._loader", "torchlean._capture", "torchlean.buffer",
           "torchlean.shapes",
           "torchlean._generated.cdef"}


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            mod = node.module or ""
            if mod == "torchlean" or mod == "torchlean._generated":
                yield from (f"{mod}.{a.name}" for a in node.names)
            else:
                yield mod


@pytest.mark.parametrize("name", LOW)
def test_low_layers_import_nothing_above_them(name):
    bad = sorted(m for m in _imports(PKG / name)
                 if m.startswith("torchlean") and m not in ALLOWED)
    assert bad == [], f"{name} imports {bad}"


def _face_names(tree):
    """Names a module takes from the package face `torchlean` (not its submodules)."""
    subs = {p.stem for p in PKG.glob("*.py")} | {p.name for p in PKG.iterdir() if p.is_dir()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name == "torchlean")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "torchlean":
            yield from (a.name for a in node.names if a.name not in subs)


@pytest.mark.parametrize("path", sorted(str(p.relative_to(PKG)) for p in PKG.rglob("*.py")
                                        if p.name != "__init__.py" or p.parent != PKG))
def test_no_module_imports_the_package_face(path):
    """Flags, synchronize and friends come from torchlean.runtime (and the other submodules):
    an import of the face from inside the package runs back up through everything."""
    bad = sorted(set(_face_names(ast.parse((PKG / path).read_text()))))
    assert bad == [], f"{path} imports {bad} from the package face; import the submodule instead"
