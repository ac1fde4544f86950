"""Print the dependencies pyproject.toml declares (the package's own, plus those of the extras
named on the command line), one per line, for `pip install`. `make test` and `make demo` install
these, not torchlean itself: they run the checkout, so a `pip install .` (and the CUDA library
it built) stays as it is.

    python3 tools/requirements.py test      # numpy, cffi, ... pytest, hypothesis, ...
"""
import sys
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:      # Python 3.10: the TOML reader pip carries
    from pip._vendor import tomli as tomllib

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise SystemExit(f"pyproject.toml has no extra {unknown[0]!r}; it has {sorted(optional)}")
    reqs = list(project["dependencies"])
    for e in extras:
        reqs += [r for r in optional[e] if r not in reqs]
    return reqs


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1:])))
