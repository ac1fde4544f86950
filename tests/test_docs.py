"""README.md and docs/*.md say only what is true.

- Every command of a ```bash block is checked: a block marked `<!-- run -->` on the line before
  it is run (cheap commands, on the stub, with a deadline); any other command must name things
  that exist: Makefile targets, scripts and every flag given to them (the script's --help lists
  it), test files, pyproject extras, and environment variables that torchlean.runtime.ENV lists.
- A ```python block marked `<!-- run -->` is run; a `print(...)  # text` line in it promises
  `text` in the output.
- Every relative link resolves, every docs page is linked from the README, and the README keeps
  the marked places where sections are inserted.
- Every percentage in the README, docs/install.md and docs/examples.md stands in a paragraph (or
  table row) that names the command (a `python3 ...` or `make ...` span) and the machine.
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(r"(<!-- run -->\n)?```(\w*)\n(.*?)```", re.S)
SECTIONS = ("data-parallel", "coming-from-pytorch", "threads", "checking-a-run", "operator-catalog",
            "integer-tensors")
# variables a command line may set that are not torchlean's
FOREIGN_VARS = {"PYTHONPATH", "PATH", "CUDA_VISIBLE_DEVICES", "NCCL_NVLS_ENABLE", "CUDA_HOME", "NVCC"}
# commands that set the scene and are not checked
SCENE = {"git", "cd", ".", "source"}


def blocks(page: Path, lang: str):
    """(marked to run, text, line) of every fenced block of `lang` in the page."""
    text = page.read_text()
    for m in FENCE.finditer(text):
        if m.group(2) == lang:
            yield bool(m.group(1)), m.group(3), text.count("\n", 0, m.start(3)) + 1


def commands(block: str) -> list[str]:
    """The block's command lines: continuations joined, comments and blank lines dropped."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(line)
    return out


def all_bash(run: bool):
    for page in PAGES:
        for marked, text, line in blocks(page, "bash"):
            if marked == run:
                for cmd in commands(text):
                    yield pytest.param(cmd, id=f"{page.name}:{line}:{cmd[:40]}")


@functools.cache
def make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_./%-]+):", text, re.M))


@functools.cache
def script_help(script: str) -> str:
    env = dict(os.environ, TORCHLEAN_BACKEND="stub")
    r = subprocess.run([sys.executable, script, "--help"], cwd=str(ROOT), env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{script} --help failed: {r.stderr[-500:]}"
    return r.stdout


def check_env(words: list[str]) -> list[str]:
    """Drop leading VAR=value words, checking each VAR is one torchlean documents."""
    from torchlean import runtime
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        var = words.pop(0).split("=", 1)[0]
        assert var in runtime.ENV or var in FOREIGN_VARS, f"{var} is not in runtime.ENV"
    return words


def check_python(words: list[str]):
    """`python3 script.py --flags`, `python3 -m pytest files`, `python3 -m venv`, `-c`."""
    args = words[1:]
    if args[:2] == ["-m", "venv"] or args[:1] == ["-c"]:
        return
    if args[:2] == ["-m", "pytest"]:
        for a in args[2:]:
            if a.startswith("tests/"):
                assert (ROOT / a.split("::")[0]).exists(), f"{a} does not exist"
        return
    if args[:2] == ["-m", "pip"]:
        return check_pip(args[1:])
    script = args[0]
    assert (ROOT / script).is_file(), f"{script} does not exist"
    help_text = script_help(script)
    for a in args[1:]:
        if a.startswith("--"):
            flag = a.split("=", 1)[0]
            assert flag in help_text, f"{script} has no {flag} (its --help does not list it)"


def check_pip(words: list[str]):
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for a in words[1:]:
        m = re.match(r"^\.\[([a-z,]+)\]$", a.strip("'\""))
        if m:
            for e in m.group(1).split(","):
                assert e in extras, f"pyproject.toml has no extra {e!r}"


def check_command(cmd: str):
    first = cmd.split("|")[0]
    words = check_env(shlex.split(first))
    assert words, cmd
    head = words[0]
    if head in SCENE:
        return
    if head == "make":
        for t in words[1:]:
            if t.startswith("-") or "=" in t:
                continue
            assert t in make_targets() or f"{t.split('-')[0]}-%" in make_targets() \
                or (ROOT / t).exists() or t.startswith("build/"), f"no Makefile target {t!r}"
        return
    if head in ("python", "python3"):
        return check_python(words)
    if head == "pip":
        return check_pip(words)
    if head in ("mpirun", "mpiexec", "srun"):
        i = next(i for i, w in enumerate(words) if w in ("python", "python3"))
        return check_python(words[i:])
    raise AssertionError(f"test_docs does not know how to check {head!r}: teach it, or mark "
                         "the block `<!-- run -->` if it is cheap")


@pytest.mark.parametrize("cmd", list(all_bash(run=False)))
def test_documented_command_names_what_exists(cmd):
    check_command(cmd)


@pytest.mark.parametrize("cmd", list(all_bash(run=True)))
def test_cheap_documented_command_runs(cmd):
    check_command(cmd)
    env = dict(os.environ, TORCHLEAN_BACKEND="stub",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = subprocess.run(["bash", "-c", cmd], cwd=str(ROOT), env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"{cmd}\n{r.stdout[-1000:]}\n{r.stderr[-2000:]}"


def _python_blocks():
    for page in PAGES:
        for marked, text, line in blocks(page, "python"):
            if marked:
                yield pytest.param(text, id=f"{page.name}:{line}")


@pytest.mark.parametrize("code", list(_python_blocks()))
def test_documented_python_runs_and_prints_what_it_says(code, tmp_path):
    env = dict(os.environ, TORCHLEAN_BACKEND="stub",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path), env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    for promised in re.findall(r"^\s*print\(.*\)\s+#\s*(.+)$", code, re.M):
        assert promised.strip() in r.stdout, f"promised {promised!r}, printed {r.stdout!r}"


def test_links_resolve_and_every_page_is_linked():
    readme = (ROOT / "README.md").read_text()
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links to missing {target}"
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme, f"README does not link docs/{page.name}"


def test_readme_is_short_and_keeps_its_section_places():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 260
    for s in SECTIONS:
        assert f"<!-- section: {s} -->" in text, f"README lost the place for {s}"


MACHINE = re.compile(r"stub|CPU|cores?\b|H100|H200|GPU", re.I)
COMMAND = re.compile(r"`(python3?\s[^`]+|make\s[^`]+|[A-Z_]+=\S+\s+python3?\s[^`]+)`")


@pytest.mark.parametrize("name", ["README.md", "docs/install.md", "docs/examples.md"])
def test_every_figure_names_its_command_and_machine(name):
    text = (ROOT / name).read_text()
    text = FENCE.sub("", text)
    for para in re.split(r"\n\s*\n|\n(?=\|)", text):
        if re.search(r"\d+(\.\d+)?%", para):
            assert COMMAND.search(para) or "`bench/" in para, f"{name}: no command for: {para[:200]}"
            assert MACHINE.search(para), f"{name}: no machine for: {para[:200]}"
