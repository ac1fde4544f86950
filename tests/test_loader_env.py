"""Environment variables and library loading, each in a fresh interpreter (the backend is
chosen once per process at import)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(code, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("TORCHLEAN_")}
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=e,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def foreign_so(tmp_path_factory):
    """A valid shared library that is not torchlean (no tl_ symbols)."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        pytest.fail("a C compiler is needed to build the foreign library (the stub needs one too)")
    d = tmp_path_factory.mktemp("foreign")
    src = d / "f.c"
    src.write_text("int not_torchlean(void) { return 42; }\n")
    out = d / "libforeign.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


@pytest.mark.parametrize("bad", ["12abc", "-5", " 7", "1e9", "4MiB", "99999999999999999999"])
def test_junk_cache_cap_is_an_error(bad):
    r = _run("import torchlean", TORCHLEAN_BACKEND="stub", TORCHLEAN_CUDA_CACHE_CAP_BYTES=bad)
    assert r.returncode != 0
    assert "ValueError: TORCHLEAN_CUDA_CACHE_CAP_BYTES must be a decimal number" in r.stderr
    assert repr(bad) in r.stderr, r.stderr


def test_good_cache_cap_values_import():
    for ok in ("", "0", "4194304"):
        r = _run("import torchlean; print('ok')", TORCHLEAN_BACKEND="stub",
                 TORCHLEAN_CUDA_CACHE_CAP_BYTES=ok)
        assert r.returncode == 0 and r.stdout.strip() == "ok", (ok, r.stderr)


def test_missing_lib_dir_is_an_error(tmp_path):
    missing = tmp_path / "nowhere"
    r = _run("import torchlean", TORCHLEAN_BACKEND="stub", TORCHLEAN_LIB_DIR=str(missing))
    assert r.returncode != 0
    assert "BackendError" in r.stderr and "TORCHLEAN_LIB_DIR" in r.stderr
    assert "is not a directory" in r.stderr and str(missing) in r.stderr, r.stderr


def test_alternate_deterministic_variable_is_named_in_its_error():
    r = _run("import torchlean", TORCHLEAN_BACKEND="stub",
             TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS="yes")
    assert r.returncode != 0
    assert "TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS must be unset, empty, 0 or 1, got 'yes'" \
        in r.stderr, r.stderr
    r = _run("import torchlean; print(torchlean.is_deterministic())", TORCHLEAN_BACKEND="stub",
             TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS="1")
    assert r.returncode == 0 and r.stdout.strip() == "True", r.stderr


def test_foreign_library_is_a_backend_error(tmp_path, foreign_so):
    shutil.copy(foreign_so, tmp_path / "libtorchlean_stub.so")
    r = _run("import torchlean", TORCHLEAN_BACKEND="stub", TORCHLEAN_LIB_DIR=str(tmp_path))
    assert r.returncode != 0
    assert "BackendError" in r.stderr and "is not a torchlean library" in r.stderr, r.stderr
    (tmp_path / "libtorchlean_stub.so").write_bytes(b"\x7fELF junk, not a library")
    r = _run("import torchlean", TORCHLEAN_BACKEND="stub", TORCHLEAN_LIB_DIR=str(tmp_path))
    assert r.returncode != 0
    assert "BackendError" in r.stderr and "cannot load" in r.stderr, r.stderr


@pytest.mark.parametrize("kind", ["foreign", "junk"])
def test_auto_falls_back_to_stub_with_a_warning_when_cuda_is_broken(tmp_path, foreign_so, kind):
    lib = tmp_path / "libtorchlean_cuda.so"
    if kind == "foreign":
        shutil.copy(foreign_so, lib)
    else:
        lib.write_bytes(b"not an ELF file at all")
    code = ("import warnings\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    import torchlean\n"
            "print(torchlean.backend())\n"
            "print('|'.join(str(x.message) for x in w if x.category is RuntimeWarning))\n")
    r = _run(code, TORCHLEAN_BACKEND="auto", TORCHLEAN_LIB_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    backend, msg = r.stdout.splitlines()
    assert backend == "stub"
    assert "falling back to the stub backend because the CUDA library is unusable" in msg
    assert str(lib) in msg
    assert ("is not a torchlean library" if kind == "foreign" else "cannot load") in msg


def test_cuda_without_a_gpu_says_so_in_one_line(tmp_path):
    """TORCHLEAN_BACKEND=cuda on a machine without an NVIDIA driver: one line saying no GPU was
    found and how to run on the stub, not a driver-version message in a chained traceback."""
    if os.path.isdir("/proc/driver/nvidia"):
        pytest.skip("this machine has an NVIDIA driver")
    r = _run("import torchlean", TORCHLEAN_BACKEND="cuda", TORCHLEAN_LIB_DIR=str(tmp_path))
    assert r.returncode != 0
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("torchlean.errors.BackendError: TORCHLEAN_BACKEND=cuda but no GPU was "
                           "found (no NVIDIA driver"), r.stderr
    assert last.endswith("TORCHLEAN_BACKEND=stub runs torchlean on the CPU"), r.stderr
    assert "driver version" not in r.stderr and "During handling" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) <= 7, r.stderr


def test_auto_without_a_cuda_library_is_silent(tmp_path):
    code = ("import warnings\nwarnings.simplefilter('error')\nimport torchlean\n"
            "print(torchlean.backend())")
    r = _run(code, TORCHLEAN_BACKEND="auto", TORCHLEAN_LIB_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() in ("stub", "cuda")


_OMP_ENV = ("import os, torchlean, numpy as np\n"
            "x = np.ones(1 << 20, np.float32)\n"
            "torchlean.ops.add(torchlean.AnyBuffer.from_numpy(x), torchlean.AnyBuffer.from_numpy(x))\n"
            "print(sorted(k for k in os.environ if k.startswith(('OMP_', 'GOMP_'))))\n"
            "print(any('libgomp' in line for line in open('/proc/self/maps')))\n")


def test_the_stub_sets_no_openmp_variable_and_loads_no_libgomp():
    """The stub runs its parallel loops on its own pool (native/stub/threads.c): importing
    torchlean and running a parallel kernel must leave another library's OpenMP settings alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    r = subprocess.run([sys.executable, "-c", _OMP_ENV], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=120,
                       env=dict(env, TORCHLEAN_BACKEND="stub",
                                PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT),
                                                                         env.get("PYTHONPATH"))))))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["[]", "False"], r.stdout
