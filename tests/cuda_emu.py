"""CUDA kernels compiled for the CPU (tests/native/*_emu.cpp, TL_CUDA_EMU): the library built
with make and loaded through cffi, so tests can run the device code's arithmetic here."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import cffi
import pytest

ROOT = Path(__file__).resolve().parent.parent


def build_emu(lib: str, what: str, cdef: str):
    """(ffi, lib) of build/`lib` made by make; `what` names the kernels it checks (for the
    failure without a C++ compiler), `cdef` declares what the tests call."""
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.fail(f"no C++ compiler: {what} cannot be checked on the CPU")
    path = ROOT / "build" / lib
    r = subprocess.run(["make", "-s", str(path.relative_to(ROOT))], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    return ffi, ffi.dlopen(str(path))
