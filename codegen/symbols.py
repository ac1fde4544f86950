"""Check that built libraries export exactly the ABI: `python -m codegen.symbols LIB...`.

The expected set is every function declared in the CDEF section of
native/include/torchlean_abi.h plus every prototype in the generated
native/include/torchlean_ops.h. Each library's exported set is what `nm -D --defined-only`
lists with the tl_ prefix. A missing symbol is a kernel someone forgot (cffi would only fail
when the op is first called); an extra one is an internal helper that leaked out of the hidden
visibility. Prints the differences and exits 1 on any mismatch.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ABI_H = ROOT / "native" / "include" / "torchlean_abi.h"
OPS_H = ROOT / "native" / "include" / "torchlean_ops.h"
_DECL = re.compile(r"\bTL_API\b[^;(]*?\b(tl_[a-z0-9_]+)\s*\(")


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared_symbols(abi_h: Path = ABI_H, ops_h: Path = OPS_H) -> set[str]:
    """Function names the headers promise (CDEF section of the ABI header + the op header)."""
    abi = abi_h.read_text()
    begin, end = abi.find("/* CDEF-BEGIN */"), abi.find("/* CDEF-END */")
    if begin < 0 or end < begin:
        raise ValueError(f"{abi_h}: CDEF-BEGIN / CDEF-END markers not found")
    names = set(_DECL.findall(_strip_comments(abi[begin:end])))
    names |= set(_DECL.findall(_strip_comments(ops_h.read_text())))
    return names


def exported_symbols(lib: Path) -> set[str]:
    """Defined dynamic symbols starting with tl_ (functions and, wrongly, data alike)."""
    res = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"nm -D --defined-only {lib} failed: {res.stderr.strip()}")
    out = set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if parts and parts[-1].startswith("tl_"):
            out.add(parts[-1].split("@")[0])
    return out


def check(lib: Path, expected: set[str] | None = None) -> tuple[set[str], set[str]]:
    """(missing, extra) for one library."""
    expected = declared_symbols() if expected is None else expected
    got = exported_symbols(Path(lib))
    return expected - got, got - expected


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m codegen.symbols LIB...", file=sys.stderr)
        return 2
    expected = declared_symbols()
    bad = False
    for lib in argv:
        if not Path(lib).is_file():
            print(f"{lib}: no such library")
            bad = True
            continue
        missing, extra = check(Path(lib), expected)
        if missing or extra:
            bad = True
            print(f"{lib}: exported tl_* symbols differ from the headers")
            for s in sorted(missing):
                print(f"  missing (declared, not exported): {s}")
            for s in sorted(extra):
                print(f"  extra (exported, not declared):   {s}")
        else:
            print(f"{lib}: ok ({len(expected)} symbols)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
