"""Build hook: `pip install .` and `pip wheel .` compile the stub library with `make stub`, so
the installed package (and the wheel) contains torchlean/lib/libtorchlean_stub.so and imports.
Everything else about the package lives in pyproject.toml. The CUDA library is not built here
(it needs nvcc and a GPU machine): run `make cuda` in a checkout for it."""
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
STUB = os.path.join("torchlean", "lib", "libtorchlean_stub.so")


class build_py_with_stub(build_py):
    """build_py that first runs `make stub` and then places the library in the build tree."""

    def run(self):
        subprocess.run(["make", "-C", HERE, "stub", f"PY={sys.executable}"], check=True)
        super().run()
        dest = os.path.join(self.build_lib, STUB)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(os.path.join(HERE, STUB), dest)


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": build_py_with_stub}, distclass=BinaryDistribution)
