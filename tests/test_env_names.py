"""Every environment variable torchlean reads is listed in runtime.ENV with what it does, and
ENV lists nothing that no code reads: a new switch cannot ship undocumented."""
import re
from pathlib import Path

from torchlean import runtime

ROOT = Path(__file__).resolve().parent.parent
# a variable named as a C or Python string literal
NAME = re.compile(r"""["'](TORCHLEAN_[A-Z0-9_]+|OMP_NUM_THREADS)["']""")


def _read_names(paths):
    """{variable: files naming it}"""
    found = {}
    for p in paths:
        for m in NAME.finditer(p.read_text()):
            found.setdefault(m.group(1), set()).add(str(p.relative_to(ROOT)))
    return found


def _code_names():
    native = [p for p in (ROOT / "native").rglob("*") if p.suffix in (".c", ".h", ".cu", ".cuh")]
    py = list((ROOT / "torchlean").rglob("*.py")) + [ROOT / "setup.py", ROOT / "tests" / "conftest.py"]
    return _read_names(native + py)


def test_every_variable_read_is_in_env():
    missing = {n: where for n, where in _code_names().items() if n not in runtime.ENV}
    assert not missing, f"add these to torchlean/runtime.py ENV (and docs): {missing}"


def test_env_names_only_variables_the_code_reads():
    read = _code_names()
    # runtime.py itself names every key in ENV: count only other files
    read = {n for n, where in read.items() if where - {"torchlean/runtime.py"}} | {
        n for n in read if _mentions_outside_env(n)}
    stale = sorted(set(runtime.ENV) - read)
    assert not stale, f"ENV lists variables nothing reads: {stale}"


def _mentions_outside_env(name):
    text = (ROOT / "torchlean" / "runtime.py").read_text()
    env_block = text[text.index("ENV = {"):text.index("\n}\n", text.index("ENV = {"))]
    return name in text.replace(env_block, "")


def test_every_entry_says_who_reads_it_and_what_it_does():
    readers = {"install", "loader", "flag", "bytes", "seconds", "choice", "path", "stub", "cuda",
               "bench", "tests"}
    for name, (reader, what) in runtime.ENV.items():
        assert reader in readers and len(what) > 10, name
    bench = {n for n, (r, _) in runtime.ENV.items() if r == "bench"}
    header = (ROOT / "native" / "cuda" / "bench_switches.h").read_text()
    assert bench == set(re.findall(r"\b(TORCHLEAN_[A-Z0-9_]+)\s", header))
