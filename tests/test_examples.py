import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
NAMES = ["mlp_digits.py", "digits_cnn.py", "char_transformer.py", "fno_burgers.py",
         "selective_scan_seq.py", "two_layer_net.py", "cnn_classifier.py", "gpt_char.py"]


# flags that keep a 3-step smoke run short (fewer held-out batches, a shorter sample)
QUICK = {"gpt_char.py": ("--eval-batches", "1", "--generate", "20")}


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
                   "--save", str(tmp_path / "w.safetensors"), *QUICK.get(name, ()))
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


def test_cnn_classifier_reaches_its_target_accuracy():
    """OneCycleLR compresses the schedule: 40 steps already pass the stated 97% target."""
    line, r = _run("cnn_classifier.py", "--no-progress", "--deterministic", steps=40)
    f = _fields(line)
    assert float(f["test_acc"]) >= float(f["target_acc"]) == 0.97
    assert float(f["test_loss"]) < 0.2 < np.log(10)     # an untrained head sits near ln 10
    assert "test accuracy: " in r.stdout


def _load_ckpt(path):
    import pickle
    with open(path, "rb") as fh:
        return pickle.load(fh)


def test_cnn_classifier_resume_is_bit_exact(tmp_path):
    """13 steps in one run equal 9 steps, a checkpoint, and 4 resumed steps, bit for bit: the
    weights, BatchNorm's running statistics, the momentum buffers and the schedule. Batch 128
    makes an epoch 11 steps, so the resumed run first skips 9 batches of the interrupted epoch
    (dropout masks and the shuffle must line up) and then crosses into epoch 1."""
    from torchlean.nn import load_file
    common = ("--no-progress", "--deterministic", "--width", "4", "--batch-size", "128")
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    line_a, _ = _run("cnn_classifier.py", *common, "--checkpoint-dir", str(a_dir),
                     "--checkpoint-every", "9", "--save", str(tmp_path / "a.safetensors"),
                     steps=13)
    line_b, _ = _run("cnn_classifier.py", *common, "--checkpoint-dir", str(b_dir),
                     "--resume", str(a_dir / "step_9.ckpt"),
                     "--save", str(tmp_path / "b.safetensors"), steps=13)
    fa, fb = _fields(line_a), _fields(line_b)
    assert fa["start_step"] == "0" and fb["start_step"] == "9"
    for k in ("loss", "grad_norm", "test_acc", "test_loss"):
        assert fa[k] == fb[k], k
    wa, wb = load_file(str(tmp_path / "a.safetensors")), load_file(str(tmp_path / "b.safetensors"))
    assert wa.keys() == wb.keys() and any("running_var" in k for k in wa)
    for k in wa:
        np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
    mid = _load_ckpt(a_dir / "step_9.ckpt")
    assert mid["step"] == 9
    assert any(not np.array_equal(mid["model"][k], wa[k]) for k in wa)   # 4 steps did move it
    ca, cb = _load_ckpt(a_dir / "step_13.ckpt"), _load_ckpt(b_dir / "step_13.ckpt")
    assert ca["scheduler"] == cb["scheduler"] and ca["scheduler"]["last_epoch"] == 13
    np.testing.assert_array_equal(ca["rng_state"], cb["rng_state"])
    sa, sb = ca["optimizer"]["state"], cb["optimizer"]["state"]
    assert sa.keys() == sb.keys() and len(sa) == len(wa) - 3 * 2   # BN buffers have no state
    for i in sa:
        np.testing.assert_array_equal(sa[i]["buf"], sb[i]["buf"])
    assert ca["optimizer"]["param_groups"] == cb["optimizer"]["param_groups"]


def test_cnn_classifier_resume_refuses_another_schedule_length(tmp_path):
    _run("cnn_classifier.py", "--no-progress", "--width", "4", "--checkpoint-dir", str(tmp_path),
         steps=2)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    r = subprocess.run([sys.executable, os.path.join(EX, "cnn_classifier.py"), "--steps", "5",
                        "--no-progress", "--width", "4", "--resume",
                        str(tmp_path / "step_2.ckpt")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode != 0
    assert "schedule runs 2 steps, --steps is 5" in r.stderr


def test_gpt_char_loss_decreases_and_samples():
    line, r = _run("gpt_char.py", "--no-progress", "--deterministic", "--generate", "40",
                   "--n-layer", "1", "--block-size", "32", "--warmup", "5", "--eval-batches", "4",
                   steps=40)
    f = _fields(line)
    vocab = int(f["vocab"])
    assert vocab > 60
    # an untrained model is near the uniform ln(vocab); 40 steps learn the character frequencies
    assert abs(float(f["val_loss_initial"]) - np.log(vocab)) < 0.6
    assert float(f["val_loss"]) < float(f["val_loss_initial"]) - 0.8
    assert f["generated"] == "40"
    sample = r.stdout.split("sample (temperature 0.8):\n", 1)[1]
    assert sample.startswith("The ") and len(sample.split("\nsummary:")[0].rstrip("\n")) >= 44


def test_gpt_generate_at_low_temperature_is_greedy_decoding():
    """At temperature 1e-4 sampling puts all mass on the arg max: generate() must equal greedy
    decoding computed from the model's logits with NumPy, including past block_size (the
    context is cropped to the last block_size codes)."""
    import importlib
    sys.path.insert(0, EX)
    try:
        gpt = importlib.import_module("gpt_char")
    finally:
        sys.path.remove(EX)
    import torchlean as tl
    tl.manual_seed(5)
    model = gpt.build_model(vocab=11, block_size=6, n_layer=1, n_head=2, n_embd=8)
    prompt = np.array([[3, 1, 4], [1, 5, 9]], dtype=np.int64)
    out = gpt.generate(tl, model, prompt, 7, temperature=1e-4, rng=np.random.default_rng(0))
    assert out.shape == (2, 10) and out.dtype == np.int64
    np.testing.assert_array_equal(out[:, :3], prompt)
    greedy = prompt
    for _ in range(7):
        with tl.no_grad(), tl.Session():
            logits = model(greedy[:, -6:]).numpy()
        greedy = np.concatenate([greedy, logits[:, -1].argmax(1)[:, None]], axis=1)
    np.testing.assert_array_equal(out, greedy)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        gpt.generate(tl, model, prompt, 1, temperature=0.0)
    with pytest.raises(ValueError, match="exceeds block_size 6"):
        with tl.Session():
            model(np.zeros((1, 7), dtype=np.int64))
