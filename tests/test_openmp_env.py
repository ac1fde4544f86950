"""Importing torchlean leaves OMP_WAIT_POLICY as the user had it, in this process and in its
children (the stub runs on its own thread pool, native/stub/threads.c, and loads no libgomp)."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(code, **env):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("TORCHLEAN_") and k != "OMP_WAIT_POLICY"}
    e.update(env, TORCHLEAN_BACKEND="stub")
    e["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", code], cwd=str(ROOT), env=e,
                          capture_output=True, text=True, timeout=120)


_CODE = ("import os, subprocess, sys, torchlean\n"
         "print(os.environ.get('OMP_WAIT_POLICY'))\n"
         "print(subprocess.run([sys.executable, '-c', \"import os; "
         "print(os.environ.get('OMP_WAIT_POLICY'))\"], capture_output=True, text=True).stdout.strip())\n")


def test_import_leaves_the_environment_unset():
    r = _run(_CODE)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "None"]


def test_import_keeps_the_users_policy():
    r = _run(_CODE, OMP_WAIT_POLICY="active")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["active", "active"]
