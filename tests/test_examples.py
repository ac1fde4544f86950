import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
NAMES = ["mlp_digits.py", "digits_cnn.py", "char_transformer.py", "fno_burgers.py",
         "selective_scan_seq.py", "two_layer_net.py"]


def _run(name, *extra, steps=3):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, os.path.join(EX, name), "--steps", str(steps), *extra],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    last = [l for l in r.stdout.splitlines() if l.startswith("summary:")]
    assert last, r.stdout[-2000:]
    return last[-1], r


def _fields(line):
    return dict(kv.split("=", 1) for kv in line.split()[1:])


@pytest.mark.parametrize("name", NAMES)
def test_example_runs(name, tmp_path):
    """Every example takes the common flags and ends with a parseable summary line."""
    backend = os.environ.get("TORCHLEAN_BACKEND", "stub")
    if backend not in ("stub", "cuda"):
        backend = "auto"
    line, r = _run(name, "--backend", backend, "--seed", "1", "--deterministic",
                   "--save", str(tmp_path / "w.safetensors"))
    f = _fields(line)
    assert f["example"] == name[:-3] and f["deterministic"] == "1" and f["steps"] == "3"
    assert f["backend"] in ("stub", "cuda")
    assert os.path.getsize(tmp_path / "w.safetensors") > 8


def test_cnn_prints_backend_epoch_time_accuracy():
    line, r = _run("digits_cnn.py", "--no-progress")
    out = r.stdout
    assert "backend: " in out and "time per epoch: " in out and "test accuracy: " in out
    assert 0.0 <= float(_fields(line)["test_acc"]) <= 1.0


def test_cnn_deterministic_weights(tmp_path):
    from torchlean.nn import load_file
    a, b, c = (tmp_path / f"{k}.safetensors" for k in "abc")
    _run("digits_cnn.py", "--deterministic", "--save", str(a), "--width", "4", steps=5)
    _run("digits_cnn.py", "--deterministic", "--save", str(b), "--width", "4", steps=5)
    _run("digits_cnn.py", "--deterministic", "--save", str(c), "--width", "4", "--seed", "1",
         steps=5)
    wa, wb, wc = load_file(str(a)), load_file(str(b)), load_file(str(c))
    assert wa.keys() == wb.keys()
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k])
    assert any(not np.array_equal(wa[k], wc[k]) for k in wa)     # the seed matters


def test_two_layer_net_fits_random_data():
    """PyTorch's tutorial net: 150 SGD steps take the summed MSE below 1% of its start."""
    line, _ = _run("two_layer_net.py", "--no-progress", steps=150)
    f = _fields(line)
    assert float(f["loss"]) < 0.01 * float(f["loss_initial"])
    assert float(f["loss_initial"]) > 100.0     # an untrained net is far off
