"""The install hook: setup.py's build_py runs `make stub` and puts the library into the built
package, so `pip install .` and a wheel import without a checkout. (A full `pip install .` in a
fresh venv needs the network; this runs the same hook offline.)"""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_build_py_ships_the_stub_and_the_built_package_imports(tmp_path):
    build = tmp_path / "lib"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHLEAN_")}
    env["TORCHLEAN_BUILD_CUDA"] = "0"   # the CUDA build is minutes of nvcc; tests/test_setup_cuda.py
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(build)],
                       cwd=str(ROOT), env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    so = build / "torchlean" / "lib" / "libtorchlean_stub.so"
    assert so.is_file() and so.stat().st_size > 10_000
    assert (build / "torchlean" / "_generated" / "tape_ops.py").is_file()
    code = ("import numpy as np, torchlean as tl\n"
            "t = tl.Tape(); x = t.leaf(np.array([-1.0, 2.0]))\n"
            "print(tl._loader.LIB_PATH, t.value(t.relu(x)).to_numpy().tolist())\n")
    env["TORCHLEAN_BACKEND"] = "stub"
    r = subprocess.run([sys.executable, "-c", code], cwd=str(tmp_path),
                       env=dict(env, PYTHONPATH=os.pathsep.join(
                           [str(build)] + [p for p in [os.environ.get("PYTHONPATH")] if p])),
                       capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    path, values = r.stdout.split(" ", 1)
    assert Path(path) == so and values.strip() == "[0.0, 2.0]"
