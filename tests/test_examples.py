import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")


def _run(name, *extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, os.path.join(EX, name), "--steps", "3", *extra],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    last = [l for l in r.stdout.splitlines() if l.startswith("summary:")]
    assert last, r.stdout[-2000:]
    return last[-1]


@pytest.mark.parametrize("name", ["mlp_digits.py", "digits_cnn.py", "char_transformer.py",
                                  "fno_burgers.py", "selective_scan_seq.py"])
def test_example_runs(name):
    line = _run(name)
    assert f"example={name[:-3]}" in line


def test_cnn_deterministic_weights(tmp_path):
    from torchlean.nn import load_file
    a, b = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    _run("digits_cnn.py", "--deterministic", "--save", str(a))
    _run("digits_cnn.py", "--deterministic", "--save", str(b))
    wa, wb = load_file(str(a)), load_file(str(b))
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k])
