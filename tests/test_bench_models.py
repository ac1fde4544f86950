"""bench/bench_models.py: the --quick smoke run on the current backend without torch (torch
columns n/a) writes one row per model, and the shared timing helper counts steps and runs as
documented (checked against a fake clock, not real time)."""
import importlib.util
import os
import sys
import types

import pytest

import torchlean as tl

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["mlp", "cnn", "vgg", "resnet", "lm", "fno", "mamba"]


def _load(name):
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "bench", name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def bench_models():
    return _load("bench_models")


def test_quick_run_writes_every_model(bench_models, tmp_path):
    out = tmp_path / "models.md"
    was_det = tl.is_deterministic()
    rows = bench_models.main(["--quick", "--no-torch", "--out", str(out)])
    assert [r["name"] for r in rows] == MODELS
    for r in rows:
        assert r["notes"] == []
        for run in ("tl", "det"):
            assert r[run]["step_s"] > 0 and r[run]["steps"] == 1 and r[run]["repeats"] == 1
            assert r[run]["above"] > 0
        # same seed, same batch: the deterministic run starts from the same loss
        assert r["det"]["first_loss"] == pytest.approx(r["tl"]["first_loss"], rel=1e-5)
        assert "torch" not in r and r.get("dloss") is None
    assert tl.is_deterministic() == was_det       # the modes it switched are restored
    text = out.read_text()
    assert "device:" in text and "torchlean backend: " + tl.backend() in text
    table = [ln for ln in text.splitlines() if ln.startswith("| ")][1:]
    assert [ln.split(" | ")[0][2:] for ln in table] == MODELS
    for ln in table:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        assert len(cells) == 12
        assert cells[3] == cells[4] == cells[6] == cells[7] == cells[10] == "n/a"  # torch
        assert cells[8].endswith("x")                                      # det/default
        assert cells[11].startswith("speed n/a, memory n/a, det ")


def test_quick_first_losses_are_those_of_untrained_models(bench_models, tmp_path):
    """Cross-entropy of 10 classes from a fresh model is near log(10); a broken forward (zeros,
    NaN) would not be."""
    rows = bench_models.main(["--quick", "--no-torch", "--models", "mlp,cnn,vgg",
                              "--out", str(tmp_path / "m.md")])
    for r in rows:
        assert 1.5 < r["tl"]["first_loss"] < 3.5, r


def test_exact_mode_column_when_the_build_has_it(bench_models, tmp_path, monkeypatch):
    """With torchlean.set_exact/is_exact present the exact/default column is measured (here a
    stand-in that switches deterministic mode) and the flags are restored afterwards."""
    state = {"exact": False}
    was_det = tl.is_deterministic()

    def set_exact(flag):
        state["exact"] = bool(flag)
        tl.set_deterministic(flag)
        return state["exact"]
    monkeypatch.setattr(tl, "set_exact", set_exact, raising=False)
    monkeypatch.setattr(tl, "is_exact", lambda: state["exact"], raising=False)
    out = tmp_path / "models.md"
    rows = bench_models.main(["--quick", "--no-torch", "--models", "mlp", "--out", str(out)])
    assert rows[0]["exact"]["step_s"] > 0
    cells = [c.strip() for c in out.read_text().split("| mlp |")[1].split("|")]
    assert cells[8].endswith("x")           # exact/default (cells after the model name)
    assert not state["exact"] and tl.is_deterministic() == was_det


def test_unknown_model_is_an_error(bench_models, tmp_path):
    with pytest.raises(SystemExit):
        bench_models.main(["--quick", "--models", "mlp,resnet50", "--out", str(tmp_path / "x")])


class _FakeClock:
    """perf_counter stand-in: each training step advances it by `dt` seconds."""

    def __init__(self, dt):
        self.t, self.dt, self.calls = 0.0, dt, []

    def perf_counter(self):
        return self.t

    def step(self, i, want_loss=False):
        self.calls.append(i)
        self.t += self.dt
        return 1.25 if want_loss else None


def test_measure_counts_steps_and_runs(monkeypatch):
    sbs = _load("sidebyside")
    clock = _FakeClock(0.01)
    monkeypatch.setattr(sbs, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    peaks = []
    r = sbs.measure(clock.step, lambda: None, lambda: peaks.append("reset"), lambda: 7,
                    warmup=3, repeats=4, steps=5)
    assert r["first_loss"] == 1.25 and r["peak"] == 7 and peaks == ["reset"]
    assert r["steps"] == 5 and r["repeats"] == 4
    assert r["step_s"] == pytest.approx(0.01)
    assert clock.calls == list(range(3 + 4 * 5))    # step indices never repeat


def test_measure_picks_steps_from_the_target_and_shrinks_to_the_budget(monkeypatch):
    sbs = _load("sidebyside")
    clock = _FakeClock(0.02)
    monkeypatch.setattr(sbs, "time", types.SimpleNamespace(perf_counter=clock.perf_counter))
    r = sbs.measure(clock.step, lambda: None, lambda: None, lambda: None, warmup=2,
                    repeats=5, steps=0, target_s=0.1)
    assert r["steps"] == 5 and r["repeats"] == 5            # 0.1 s / 0.02 s per step
    slow = _FakeClock(1.5)                                   # a slow mode: 1.5 s per step
    monkeypatch.setattr(sbs, "time", types.SimpleNamespace(perf_counter=slow.perf_counter))
    r = sbs.measure(slow.step, lambda: None, lambda: None, lambda: None, warmup=5,
                    repeats=5, steps=0, target_s=0.25, budget_s=4.0)
    # the first step already spends budget/3, so no more warm-up; one step per run, and only
    # as many runs as fit in the budget
    assert r["steps"] == 1 and r["repeats"] == 2 and slow.calls == [0, 1, 2]
    assert r["step_s"] == pytest.approx(1.5)
