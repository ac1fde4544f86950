"""bench/bench_examples.py runs without torch (torch columns n/a) and writes its table."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_examples_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "bench_examples", os.path.join(ROOT, "bench", "bench_examples.py"))
    bench_examples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_examples)
    out = tmp_path / "examples.md"
    rows = bench_examples.main(["--out", str(out), "--warmup", "1", "--repeats", "1",
                                "--steps", "1", "--batch", "4", "--no-torch"])
    assert [r["name"] for r in rows] == ["mlp", "cnn", "transformer", "fno"]
    assert all(r["tl_sps"] > 0 and r["tl_peak"] > 0 for r in rows)
    text = out.read_text()
    assert "| mlp | 4 |" in text and "n/a" in text and "device:" in text
