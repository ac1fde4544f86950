"""bench/bench_models_cuda.py (issue 34's one-run table): the --quick smoke run on the current
backend without torch writes every section's rows with numbers, not errors, and a row that
fails is reported in the table while the run goes on."""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    path = os.path.join(ROOT, "bench", "bench_models_cuda.py")
    spec = importlib.util.spec_from_file_location("bench_models_cuda", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(text, section):
    part = text.split(f"## {section}")[1].split("\n## ")[0]
    return [line for line in part.splitlines() if line.startswith("| ")][1:]   # no header


def test_quick_run_fills_every_section(bench, tmp_path):
    out = tmp_path / "t.md"
    assert bench.main(["--quick", "--no-torch", "--models", "mlp,gpt", "--out", str(out)]) == 0
    text = out.read_text()
    assert "failed" not in text, text
    models = _rows(text, "Models")
    assert [r.split("|")[1].strip() for r in models] == ["mlp", "gpt"]
    for r in models:
        default_ms, exact_ms = (float(c) for c in r.split("|")[2:4])
        assert default_ms > 0 and exact_ms > 0
    assert len(_rows(text, "Whole-step")) == len(bench.CAPTURE)
    assert len(_rows(text, "BatchNorm2d")) == len(bench.BN["quick"])
    assert len(_rows(text, "Attention")) == len(bench.ATTN["quick"])
    assert len(_rows(text, "Exact GEMM")) == len(bench.GEMM["quick"])


def test_a_failing_row_is_reported_and_the_run_goes_on(bench, tmp_path, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("no such kernel")
    monkeypatch.setattr(bench, "_tl_attention_mib", broken)
    out = tmp_path / "t.md"
    bench.main(["--quick", "--no-torch", "--sections", "attention,gemm", "--out", str(out)])
    text = out.read_text()
    assert text.count("failed: RuntimeError: no such kernel") == len(bench.ATTN["quick"])
    assert len(_rows(text, "Exact GEMM")) == len(bench.GEMM["quick"])
    assert "failed" not in text.split("## Exact GEMM")[1]
