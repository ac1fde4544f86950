"""The PyTorch programs in examples/torch_*.py: each differs from its torch original only in
its import lines (at most 3, each marked `# torch: ...`), and each runs a few steps."""
import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
NAMES = ["torch_cifar_classifier.py", "torch_resnet.py", "torch_vae.py"]


def _code_lines(path):
    """Lines of the program outside its module docstring."""
    src = open(path).read()
    doc = ast.get_docstring(ast.parse(src), clean=False)
    body = src.split('"""', 2)[2] if doc is not None else src
    return body.splitlines()


@pytest.mark.parametrize("name", NAMES)
def test_only_import_lines_differ_from_torch(name):
    lines = _code_lines(os.path.join(EX, name))
    differing = [l for l in lines if "torchlean" in l]
    assert 1 <= len(differing) <= 3, differing
    for l in differing:
        m = re.fullmatch(r"import (torchlean[\w.]*) as (\w+)\s+# torch: (.+)", l)
        assert m, l
        torch_line = m.group(3).strip()
        assert torch_line == f"import {m.group(1).replace('torchlean', 'torch', 1)}" + (
            f" as {m.group(2)}" if m.group(2) != "torch" else ""), l


def _run(name, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, os.path.join(EX, name), *args], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_cifar_tutorial_runs():
    out = _run("torch_cifar_classifier.py", "--steps", "3", "--train-size", "64")
    assert "Finished Training" in out
    acc = int(re.search(r"Accuracy of the network on the 1000 test images: (\d+) %", out)[1])
    assert 0 <= acc <= 100 and out.count("Accuracy for class:") == 10


def test_resnet_runs():
    out = _run("torch_resnet.py", "--steps", "3")
    assert re.search(r"ResNet with 77754 parameters", out)
    assert 0.0 <= float(re.search(r"final test accuracy: ([\d.]+)%", out)[1]) <= 100.0


def test_vae_loss_falls():
    out = _run("torch_vae.py", "--epochs", "2", "--steps", "30")
    m = re.search(r"first loss ([\d.]+), final test loss ([\d.]+)", out)
    first, final = float(m[1]), float(m[2])
    assert final < 0.8 * first, out     # an untrained decoder sits near 44 nats per image
