"""The exact-mode switch: set_exact/is_exact, TORCHLEAN_EXACT at load, exact implies
deterministic, and the examples' --exact flag."""
import os
import subprocess
import sys

import pytest

import torchlean as tl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(code, **env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("TORCHLEAN_EXACT", "TORCHLEAN_DETERMINISTIC",
                      "TORCHLEAN_CUDA_DETERMINISTIC_REDUCTIONS", "TORCHLEAN_REQUIRE_CUDA")}
    e.update(env)
    e["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=120)


PROBE = "import torchlean as t; print(t.is_exact(), t.is_deterministic())"


def test_set_exact_returns_the_observed_flag_and_turns_determinism_on():
    assert tl.is_exact() is False and tl.is_deterministic() is False
    assert tl.set_exact(True) is True
    assert tl.is_exact() is True and tl.is_deterministic() is True
    assert tl.set_exact(False) is False
    assert tl.is_exact() is False
    assert tl.is_deterministic() is True        # left as exact mode had set it


def test_turning_determinism_off_also_leaves_exact_mode():
    tl.set_exact(True)
    assert tl.set_deterministic(False) is False
    assert tl.is_exact() is False and tl.is_deterministic() is False


def test_leaving_exact_mode_keeps_an_explicit_deterministic_flag():
    tl.set_deterministic(True)
    tl.set_exact(True)
    tl.set_exact(False)
    assert tl.is_deterministic() is True and tl.is_exact() is False


def test_flag_values_are_coerced_to_bool():
    assert tl.set_exact(5) is True
    assert tl.set_exact(0) is False


@pytest.mark.parametrize("value,want", [("1", "True True"), ("0", "False False"),
                                        ("", "False False")])
def test_environment_variable_at_load(value, want):
    r = _python(PROBE, TORCHLEAN_BACKEND="stub", TORCHLEAN_EXACT=value)
    assert r.returncode == 0 and r.stdout.strip() == want, r.stderr


def test_unset_environment_variable_means_off():
    r = _python(PROBE, TORCHLEAN_BACKEND="stub")
    assert r.returncode == 0 and r.stdout.strip() == "False False", r.stderr


def test_exact_from_the_environment_wins_over_deterministic_off():
    r = _python(PROBE, TORCHLEAN_BACKEND="stub", TORCHLEAN_EXACT="1", TORCHLEAN_DETERMINISTIC="0")
    assert r.returncode == 0 and r.stdout.strip() == "True True", r.stderr


@pytest.mark.parametrize("bad", ["2", "yes", "true", " 1"])
def test_bad_environment_value_is_a_clear_error(bad):
    r = _python("import torchlean", TORCHLEAN_BACKEND="stub", TORCHLEAN_EXACT=bad)
    assert r.returncode != 0
    assert "TORCHLEAN_EXACT" in r.stderr and repr(bad) in r.stderr, r.stderr


def test_examples_take_exact():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("TORCHLEAN_EXACT", None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "mlp_digits.py"),
                        "--backend", "stub", "--steps", "2", "--exact", "--no-progress"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    line = [l for l in r.stdout.splitlines() if l.startswith("summary:")][-1]
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    assert fields["exact"] == "1" and fields["deterministic"] == "1", line
