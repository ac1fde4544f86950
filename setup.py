"""Build hook: `pip install .` and `pip wheel .` compile the native libraries, so the installed
package (and the wheel) contains torchlean/lib/ and imports without a checkout. Everything else
about the package lives in pyproject.toml.

The stub (`make stub`) is always built. The CUDA library (`make cuda`) is built too when nvcc is
found (on PATH, or $CUDA_HOME/bin/nvcc, default /usr/local/cuda) AND a GPU driver is present
(/proc/driver/nvidia, nvidia-smi or a loadable libcuda.so.1): a machine with the toolkit but no
GPU could never load it. TORCHLEAN_BUILD_CUDA=1 builds it anyway (no nvcc is an error) and
TORCHLEAN_BUILD_CUDA=0 skips it. One line on stderr says which and why (`pip install -v .`
shows it)."""
import ctypes
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
STUB = os.path.join("torchlean", "lib", "libtorchlean_stub.so")
CUDA = os.path.join("torchlean", "lib", "libtorchlean_cuda.so")


def find_nvcc(env=os.environ):
    """The nvcc the Makefile would use: $NVCC, then PATH, then $CUDA_HOME/bin (or
    /usr/local/cuda/bin); None when there is none."""
    for cand in (env.get("NVCC"), shutil.which("nvcc", path=env.get("PATH")),
                 os.path.join(env.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def gpu_driver(env=os.environ) -> str | None:
    """What shows a GPU driver on this machine (a short phrase), or None when nothing does."""
    if os.path.isdir("/proc/driver/nvidia"):
        return "/proc/driver/nvidia exists"
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi:
        return f"{smi} exists"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    return "libcuda.so.1 loads"


def build_cuda(env=os.environ, nvcc=None, driver=None) -> tuple[bool, str]:
    """Whether to build the CUDA library, and why (the line the install prints):
    TORCHLEAN_BUILD_CUDA=1 yes (nvcc required), 0 no; unset or empty: when nvcc is found and a
    GPU driver is present. Anything else is an error."""
    flag = env.get("TORCHLEAN_BUILD_CUDA", "")
    if flag not in ("", "0", "1"):
        raise ValueError(f"TORCHLEAN_BUILD_CUDA must be unset, empty, 0 or 1, got {flag!r}")
    if flag == "0":
        return False, "stub only: TORCHLEAN_BUILD_CUDA=0"
    if flag == "1":
        if nvcc is None:
            raise RuntimeError("TORCHLEAN_BUILD_CUDA=1 but no nvcc was found (set NVCC, CUDA_HOME "
                               "or PATH); TORCHLEAN_BUILD_CUDA=0 builds the stub only")
        return True, f"stub and CUDA: TORCHLEAN_BUILD_CUDA=1 (nvcc: {nvcc})"
    if nvcc is None:
        return False, ("stub only: no nvcc found (PATH, $CUDA_HOME/bin); TORCHLEAN_BUILD_CUDA=1 "
                       "insists on CUDA")
    if driver is None:
        return False, (f"stub only: nvcc found ({nvcc}) but no GPU driver (no /proc/driver/nvidia, "
                       "nvidia-smi or libcuda.so.1); TORCHLEAN_BUILD_CUDA=1 builds CUDA anyway")
    return True, f"stub and CUDA: nvcc found ({nvcc}) and a GPU driver ({driver})"


class build_py_with_native(build_py):
    """build_py that first runs `make stub` (and `make cuda` when wanted) and then places the
    libraries in the build tree."""

    def run(self):
        libs = [STUB]
        subprocess.run(["make", "-C", HERE, "stub", f"PY={sys.executable}"], check=True)
        nvcc = find_nvcc()
        cuda, why = build_cuda(nvcc=nvcc, driver=gpu_driver())
        print(f"torchlean: building {why}", file=sys.stderr, flush=True)
        if cuda:
            jobs = f"-j{os.cpu_count() or 1}"
            r = subprocess.run(["make", "-C", HERE, jobs, "cuda", f"PY={sys.executable}",
                                f"NVCC={nvcc}"])
            if r.returncode:
                raise RuntimeError(f"`make cuda` failed with {nvcc} (exit {r.returncode}); set "
                                   "TORCHLEAN_BUILD_CUDA=0 to install the stub only")
            libs.append(CUDA)
        super().run()
        for lib in libs:
            dest = os.path.join(self.build_lib, lib)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            shutil.copy2(os.path.join(HERE, lib), dest)


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


if __name__ == "__main__":
    setup(cmdclass={"build_py": build_py_with_native}, distclass=BinaryDistribution)
