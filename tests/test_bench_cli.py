"""The benchmark scripts are safe to poke at: `--help` prints usage and runs nothing, and no
script writes a results file unless asked for one (--out FILE, or a file named on the command
line), so the committed tables under bench/results/ change only on purpose."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p for p in (ROOT / "bench").glob("*.py") if "__main__" in p.read_text())


def _has_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _snapshot():
    return {p: p.stat().st_mtime_ns for p in (ROOT / "bench").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_help_prints_usage_and_writes_nothing(script):
    before = _snapshot()
    # the checkout's torchlean, installed or not (the scripts run from bench/)
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = dict(os.environ, TORCHLEAN_BACKEND="stub", PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=path)
    r = subprocess.run([sys.executable, str(script), "--help"], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=120)
    if r.returncode and "No module named 'torch'" in r.stderr and not _has_torch():
        pytest.skip(f"{script.name} compares with PyTorch, which is not installed here")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage:"), r.stdout[:300]
    after = _snapshot()
    changed = sorted(str(p) for p in set(before) | set(after) if before.get(p) != after.get(p))
    assert not changed, f"{script.name} --help changed files under bench/: {changed}"


def _writes(tree):
    """Whether the script writes a file: open(..., "w"/"a"), .write_text, np.save*."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in ("write_text", "write_bytes", "savez", "save", "savez_compressed"):
            return True
        if name == "open" and len(node.args) > 1 and isinstance(node.args[1], ast.Constant) \
                and str(node.args[1].value)[:1] in "wa":
            return True
    return False


def _out_defaults(tree):
    """The defaults of every `add_argument("--out", ...)` (None where there is none)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" \
                and node.args and isinstance(node.args[0], ast.Constant) \
                and node.args[0].value == "--out":
            kw = {k.arg: k.value for k in node.keywords}
            yield kw.get("default")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_results_are_written_only_where_asked(script):
    tree = ast.parse(script.read_text())
    if not _writes(tree):
        return
    defaults = list(_out_defaults(tree))
    positional_file = "nargs=" in script.read_text() or "required=True" in script.read_text()
    assert defaults or positional_file, f"{script.name} writes a file but takes no --out"
    for d in defaults:
        ok = d is None or (isinstance(d, ast.Constant) and d.value is None) or (
            isinstance(d, ast.Call) and ast.unparse(d).startswith("os.environ.get("))
        assert ok, f"{script.name}: --out defaults to {ast.unparse(d)}; default to None"
