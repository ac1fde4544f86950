"""torchlean.audit: the device digest against an independent NumPy/Python implementation of its
definition, recordings that match across thread counts, diffs that name the right first step
and op, certificates, bad record files, and recording that never changes a result."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from torchlean import audit, nn, optim
from torchlean.audit.__main__ import main as audit_main
from torchlean.audit.recordfile import Record
from torchlean.buffer import AnyBuffer
from torchlean._generated import ops
from torchlean.session import Session, manual_seed

ROOT = Path(__file__).resolve().parent.parent
M64 = (1 << 64) - 1


# ---------------------------------------------------------------- the digest's definition
def _sm64(x: int) -> int:
    """SplitMix64 (tl_sm64), in Python integers."""
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def digest_python(bits) -> int:
    """The digest by its definition, element by element (small inputs)."""
    s = 0
    for i, w in enumerate(int(b) for b in bits):
        z = (((i << 32) | w) * 0x9E3779B97F4A7C15) & M64
        s = (s + (z ^ (z >> 29))) & M64
    return _sm64((s + _sm64(len(bits))) & M64)


def digest_numpy(bits: np.ndarray) -> int:
    """The same definition vectorised: uint64 arithmetic wraps mod 2^64."""
    k = (np.arange(bits.size, dtype=np.uint64) << np.uint64(32)) | bits.astype(np.uint64)
    z = k * np.uint64(0x9E3779B97F4A7C15)
    s = int((z ^ (z >> np.uint64(29))).sum(dtype=np.uint64))
    return _sm64((s + _sm64(bits.size)) & M64)


def device_digest(bits: np.ndarray) -> int:
    buf = AnyBuffer.from_numpy(bits.view(np.float32))
    assert np.array_equal(buf.to_numpy().view(np.uint32), bits), "upload changed the bits"
    return audit.digest(buf)


SPECIAL = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000,
                    0x7F800001, 0xFFBFFFFF, 0x7FC0DEAD, 0x00000001, 0x807FFFFF, 0x3F800000,
                    0xBF800000, 0x7F7FFFFF, 0xFFFFFFFF], dtype=np.uint32)


@pytest.mark.parametrize("n", [0, 1, 2, 7, 33, 4097])
def test_digest_matches_python_definition(n):
    rng = np.random.default_rng(n)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    bits[: min(n, SPECIAL.size)] = SPECIAL[: min(n, SPECIAL.size)]
    assert digest_numpy(bits) == digest_python(bits)
    assert device_digest(bits) == digest_python(bits)


@pytest.mark.parametrize("n", [32768, 32769, 100003, 1 << 18, (1 << 18) + 1, 1 << 20])
def test_digest_matches_numpy_definition_large(n):
    """Sizes across the stub's parallel thresholds (a batch's, one buffer's): the split over
    threads changes nothing."""
    rng = np.random.default_rng(n)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    bits[::997] = np.resize(SPECIAL, bits[::997].size)
    assert device_digest(bits) == digest_numpy(bits)


def test_digest_special_values_all_distinct():
    """-0.0 and 0.0, NaNs of different payloads and signs: every bit pattern its own digest."""
    ds = [device_digest(np.array([b], np.uint32)) for b in SPECIAL]
    assert ds == [digest_python([b]) for b in SPECIAL]
    assert len(set(ds)) == len(ds)
    # the empty buffer and a single +0.0 differ (the length enters the digest)
    assert device_digest(np.zeros(0, np.uint32)) != device_digest(np.zeros(1, np.uint32))


def test_digest_every_single_element_change_is_seen():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, 257, dtype=np.uint64).astype(np.uint32)
    base = device_digest(bits)
    for i in (0, 1, 128, 256):
        for flip in (1, 1 << 31, 1 << 22):
            b = bits.copy()
            b[i] ^= np.uint32(flip)
            assert device_digest(b) != base


def test_digest_kernel_ring_slots_and_bad_slot():
    x = AnyBuffer.from_numpy(np.arange(5, dtype=np.float32))
    ring = AnyBuffer.zeros((3, 4))
    ops.digest(x, ring, slot=2)
    w = ring.to_numpy()
    assert np.all(w[:2] == 0)
    got = int(w[2, 0]) | int(w[2, 1]) << 16 | int(w[2, 2]) << 32 | int(w[2, 3]) << 48
    assert got == digest_python(np.arange(5, dtype=np.float32).view(np.uint32))
    with pytest.raises(ValueError, match="digest.*slot"):
        ops.digest(x, ring, slot=3)
    with pytest.raises(ValueError, match="digest"):
        ops.digest(x, AnyBuffer.zeros((3, 3)), slot=0)


def test_digest_of_tensor_and_bad_type():
    t = tl.tensor(np.array([1.5, -0.0], np.float32))
    assert audit.digest(t) == digest_python(np.array([1.5, -0.0], np.float32).view(np.uint32))
    with pytest.raises(TypeError, match="digest"):
        audit.digest([1.0, 2.0])


# ---------------------------------------------------------------- recording in this process
def _train(path=None, seed=0, lr=0.1, exact=True, steps=3, width=16):
    """A small MLP with a mean reduction in its loss; returns its final weights."""
    old = tl.is_exact()
    tl.set_exact(exact)
    try:
        manual_seed(seed)
        model = nn.Sequential(nn.Linear(12, width), nn.Tanh(), nn.Linear(width, 5))
        opt = optim.Adam(model.parameters(), lr=lr)
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(40, 12)).astype(np.float32)
        y = rng.integers(0, 5, 40)
        s = Session()
        ctx = audit.record(path, label="test-mlp") if path else _nothing()
        with ctx:
            for k in range(steps):
                idx = np.arange(k * 8, k * 8 + 8)
                opt.zero_grad()
                out = model(s.tensor(X[idx]))
                loss = nn.functional.cross_entropy(out, y[idx]) + (out * out).mean() * 0.01
                loss.backward()
                opt.step()
                s.step()
        return [p.numpy().copy() for p in model.parameters()]
    finally:
        tl.set_exact(old)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _cli(capsys, *args):
    rc = audit_main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    paths = {}
    for name, kw in {"a": {}, "a2": {}, "seed": {"seed": 1}, "lr": {"lr": 0.05},
                     "default": {"exact": False}, "steps": {"steps": 4},
                     "wide": {"width": 17}}.items():
        paths[name] = str(d / f"{name}.tlaudit")
        _train(paths[name], **kw)
    return paths


def test_recording_never_changes_a_result(tmp_path):
    for exact in (True, False):
        plain = _train(None, exact=exact)
        recorded = _train(str(tmp_path / f"r{exact}.tlaudit"), exact=exact)
        for a, b in zip(plain, recorded):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_record_contents(runs):
    lines = Path(runs["a"]).read_text().splitlines()
    assert lines[0].startswith("tlaudit 2 ")
    header = json.loads(lines[0].split(" ", 2)[2])
    assert header["exact_version"] == tl.exact_version() and header["mode"] == "exact"
    assert header["script"] == "test-mlp"
    rec = Record(runs["a"])
    recs = rec.records
    assert rec.lines == [json.dumps(r, separators=(",", ":")) for r in recs]
    trailer = json.loads(lines[-1][4:])
    assert rec.trailer == trailer and trailer["records"] == len(recs)
    assert trailer["steps"] == 3 == sum(r[0] == "S" for r in recs)
    assert trailer["ops"] == sum(r[0] == "F" for r in recs) > 0
    assert trailer["vjps"] == sum(r[0] == "B" for r in recs) > 0
    first = recs[0]
    assert first[:3] == ["F", 0, "linear"] and first[4] == [8, 16]
    # the first op's output digest is the digest of that op's value, recomputed here
    manual_seed(0)
    tl.set_exact(True)
    try:
        model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 5))
        X = np.random.default_rng(0).normal(size=(40, 12)).astype(np.float32)
        h = model[0](tl.tensor(X[:8]))
        assert first[5] == f"{audit.digest(h):016x}"
    finally:
        tl.set_exact(False)
    steps = [r for r in recs if r[0] == "S"]
    assert [r[1] for r in steps] == [0, 1, 2]
    names = [e[0] for e in steps[-1][5]]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert all(sorted(e[4]) == ["m", "v"] for e in steps[-1][5])


def test_step_names_are_the_outermost_modules_names_and_buffers(tmp_path):
    """A step names each parameter by the outermost live module holding it (the wrapper's name,
    not the inner model's), lists that module's buffers, and never names by a module that is
    gone or never held the parameter (nn.Module's live_modules, no scan of every object)."""
    from torchlean.nn.modules.base import live_modules
    manual_seed(0)
    gone = nn.Sequential(nn.Linear(3, 3))
    del gone
    inner = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Linear(6, 2))
    outer = nn.Sequential(nn.Identity(), inner)
    other = nn.Sequential(nn.Linear(4, 2))      # alive, holds none of the parameters
    assert all(m in [x for x in live_modules()] for _, m in outer.named_modules())
    opt = optim.SGD(outer.parameters(), lr=0.1)
    path = str(tmp_path / "n.tlaudit")
    with audit.record(path):
        opt.zero_grad()
        loss = inner(tl.tensor(np.ones((5, 4), np.float32))).sum()
        loss.backward()
        opt.step()
    step = [r for r in Record(path).records if r[0] == "S"][0]
    assert [e[0] for e in step[5]] == ["1.0.weight", "1.0.bias", "1.1.weight", "1.1.bias",
                                       "1.3.weight", "1.3.bias", "1.1.num_batches_tracked",
                                       "1.1.running_mean", "1.1.running_var"]
    assert other is not None


def test_identical_runs_diff_identical(runs, capsys):
    rc, out, _ = _cli(capsys, "diff", runs["a"], runs["a2"])
    n_ops = sum(1 for r in Record(runs["a"]).records if r[0] in "FB")
    assert rc == 0 and out.strip() == f"identical: {n_ops} ops, 3 steps"


def test_changed_seed_names_first_op_and_leaf_inputs(runs, capsys):
    rc, out, _ = _cli(capsys, "diff", runs["a"], runs["seed"])
    assert rc == 1
    assert "first difference: step 0, op 0 of the step (record 0), forward: linear" in out
    assert "'weight', a leaf" in out and "came from earlier" in out
    assert "parameters that differ at the end of step 0: 0.weight, 0.bias, 2.weight, 2.bias" in out


def test_changed_lr_names_first_optimizer_step(runs, capsys):
    rc, out, _ = _cli(capsys, "diff", runs["a"], runs["lr"])
    assert rc == 1
    assert "first difference: step 0" in out and "optimizer step: Adam.step()" in out
    assert "hyperparameter lr of group 0 differs: 0.1 vs 0.05" in out
    assert "parameters that differ at the end of step 0: 0.weight, 0.bias, 2.weight, 2.bias" in out


def test_default_vs_exact_names_a_reduction_that_computed_differently(runs, capsys):
    rc, out, _ = _cli(capsys, "diff", runs["a"], runs["default"])
    assert rc == 1
    assert "note: mode differs: exact" in out
    first = [s for s in out.splitlines() if s.startswith("first difference")][0]
    assert first.startswith("first difference: step 0,")
    # the first op to differ read identical inputs: its own arithmetic differs between modes
    assert "its inputs are identical in both runs: this op computed differently" in out
    # ... and it is an op whose order or rounding exact mode fixes
    op = first.split(": ", 2)[2].split(" ")[0]
    assert op in {"linear", "tanh", "cross_entropy_rows", "mean", "reduce_mean", "sum", "mul"}


def test_different_shapes_part_the_runs(runs, capsys):
    rc, out, _ = _cli(capsys, "diff", runs["a"], runs["wide"])
    assert rc == 1 and "the runs part at step 0, op 0" in out and "different ops ran" in out


def test_different_step_counts_and_scripts_are_refused(runs, capsys, tmp_path):
    rc, _, err = _cli(capsys, "diff", runs["a"], runs["steps"])
    assert rc == 2 and "different step counts: 3 vs 4" in err and runs["steps"] in err
    other = str(tmp_path / "other.tlaudit")
    with audit.record(other, label="another-script"):
        tl.tensor(np.ones(3, np.float32)).sum()
    rc, _, err = _cli(capsys, "diff", runs["a"], other)
    assert rc == 2 and "different scripts: 'test-mlp' vs 'another-script'" in err


def test_bad_files_give_clear_errors(runs, capsys, tmp_path):
    text = Path(runs["a"]).read_text()
    cut = tmp_path / "cut.tlaudit"
    cut.write_text(text[: len(text) // 2])
    rc, _, err = _cli(capsys, "certificate", str(cut))
    assert rc == 2 and str(cut) in err and "truncated" in err
    edited = tmp_path / "edited.tlaudit"
    lines = text.splitlines(keepends=True)
    d = next(k for k, s in enumerate(lines) if s.startswith("d "))
    lines[d] = lines[d][:2] + ("B" if lines[d][2] != "B" else "C") + lines[d][3:]
    edited.write_text("".join(lines))
    rc, _, err = _cli(capsys, "diff", runs["a"], str(edited))
    assert rc == 2 and str(edited) in err and "corrupted" in err and "checksum" in err
    # damaged blocks under a checksum made to match: each named, never a crash or a record
    for k, bad in ((d, "d AAA\n"), (d, "q AAAA\n"), (1, "t [\n"), (1, "t {}\n")):
        forged = list(lines)
        forged[k] = bad
        body = "".join(forged[:-1])
        trailer = json.loads(forged[-1][4:])
        trailer["sha256"] = hashlib.sha256(body.encode()).hexdigest()
        edited.write_text(body + "end " + json.dumps(trailer) + "\n")
        rc, _, err = _cli(capsys, "certificate", str(edited))
        assert rc == 2 and str(edited) in err and "corrupted" in err, (bad, err)
    cut_log = list(lines)
    last_log = max(k for k, s in enumerate(lines) if s.startswith("l "))
    cut_log[last_log] = lines[last_log][:2] + base64.b64encode(
        base64.b64decode(lines[last_log][2:])[:-16]).decode() + "\n"
    body = "".join(cut_log[:-1])
    trailer = json.loads(cut_log[-1][4:])
    trailer["sha256"] = hashlib.sha256(body.encode()).hexdigest()
    edited.write_text(body + "end " + json.dumps(trailer) + "\n")
    rc, _, err = _cli(capsys, "diff", str(edited), runs["a"])
    assert rc == 2 and str(edited) in err and "corrupted" in err
    foreign = tmp_path / "foreign.tlaudit"
    foreign.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)))
    rc, _, err = _cli(capsys, "diff", str(foreign), runs["a"])
    assert rc == 2 and str(foreign) in err and "not a torchlean audit record" in err
    rc, _, err = _cli(capsys, "certificate", str(tmp_path / "missing.tlaudit"))
    assert rc == 2 and "cannot read" in err


def test_certificate_depends_only_on_what_ran(runs, capsys):
    rc, a, _ = _cli(capsys, "certificate", runs["a"])
    _, a2, _ = _cli(capsys, "certificate", runs["a2"])
    _, lr, _ = _cli(capsys, "certificate", runs["lr"])
    assert rc == 0 and a == a2 and a != lr
    lines = a.splitlines()
    assert lines[:6] == [f"torchlean {tl.__version__}", f"exact_version {tl.exact_version()}",
                         f"registry {tl._abi.cdef.REGISTRY_HASH}", "mode exact",
                         "steps 3", lines[5]]
    assert lines[6].startswith("final parameters ") and lines[7].startswith("record ")


def test_one_record_at_a_time(tmp_path):
    with audit.record(str(tmp_path / "a.tlaudit")):
        with pytest.raises(RuntimeError, match="already recording"):
            audit.start(str(tmp_path / "b.tlaudit"))


# ---------------------------------------------------------------- optimizer step hooks
def test_step_post_hooks_global_instance_and_super_chain():
    p = tl.Parameter(np.ones(3, np.float32))
    seen = []

    class MySGD(optim.SGD):
        def step(self):
            super().step()

    opt = MySGD([p], lr=0.1)
    h1 = optim.register_optimizer_step_post_hook(lambda o, a, k: seen.append(("global", o)))
    h2 = opt.register_step_post_hook(lambda o, a, k: seen.append(("mine", o)))
    try:
        opt.step()
        assert seen == [("global", opt), ("mine", opt)]   # once each, after the outer step
        h2.remove()
        opt.step()
        assert seen[2:] == [("global", opt)]
    finally:
        h1.remove()
        h2.remove()
    opt.step()
    assert len(seen) == 3


# ---------------------------------------------------------------- whole scripts, thread counts
def _run_example(out, threads, *args):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), TORCHLEAN_BACKEND=tl.backend())
    r = subprocess.run([sys.executable, "-m", "torchlean.audit", "run", "--out", out, "--",
                        sys.executable, str(ROOT / "examples" / "mlp_digits.py"), "--steps", "2",
                        "--exact", "--no-progress", *args],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("recorded: ")
    return out


def test_example_recordings_match_across_thread_counts(tmp_path, capsys):
    a = _run_example(str(tmp_path / "t1.tlaudit"), 1)
    b = _run_example(str(tmp_path / "t2.tlaudit"), 2)
    rc, out, _ = _cli(capsys, "diff", a, b)
    assert rc == 0 and out.startswith("identical: ") and out.strip().endswith("ops, 2 steps")
    assert json.loads(Path(a).read_text().splitlines()[0].split(" ", 2)[2])["threads"] == "1"
    _, ca, _ = _cli(capsys, "certificate", a)
    _, cb, _ = _cli(capsys, "certificate", b)
    assert ca == cb
    c = _run_example(str(tmp_path / "lr.tlaudit"), 2, "--lr", "0.2")
    rc, out, _ = _cli(capsys, "diff", a, c)
    assert rc == 1 and "step 0" in out and "SGD.step()" in out and "lr of group 0" in out


def test_run_without_torchlean_is_an_error(tmp_path, capsys):
    out = str(tmp_path / "none.tlaudit")
    rc, _, err = _cli(capsys, "run", "--out", out, "--", sys.executable, "-c", "pass")
    assert rc == 2 and "nothing recorded" in err


# ---------------------------------------------------------------- compare-torch
PORT = '''
import sys
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        h = F.relu(self.fc1(x))
        if "--bug" in sys.argv and torch.__name__ == "torchlean":
            h = torch.tanh(h)      # a porting slip: only the torchlean run takes it
        return self.fc2(h)

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rng = np.random.default_rng(0)
for step in range(3):
    x = torch.tensor(rng.normal(size=(8, 6)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 3, 8))
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
'''


def test_compare_torch_names_the_first_differing_module(tmp_path, capsys):
    pytest.importorskip("torch")
    script = tmp_path / "port.py"
    script.write_text(PORT)
    rc, out, err = _cli(capsys, "compare-torch", "--", sys.executable, str(script))
    assert rc == 0, err
    assert out.strip() == "agree within tolerance: 6 module calls, 2 steps"
    rc, out, _ = _cli(capsys, "compare-torch", "--", sys.executable, str(script), "--bug")
    assert rc == 1 and out.startswith("first difference: step 0, module 'fc2' (Linear)")


def test_compare_torch_without_torch_says_so(monkeypatch, capsys):
    import importlib.util
    from torchlean.audit import compare_torch as ct
    real = importlib.util.find_spec
    monkeypatch.setattr(ct.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    assert ct.compare_torch([sys.executable, "x.py"]) == 2
    assert "PyTorch is not installed" in capsys.readouterr().err


def test_unwritable_record_path_is_named(tmp_path):
    env = dict(os.environ, TORCHLEAN_AUDIT=str(tmp_path), TORCHLEAN_BACKEND=tl.backend())
    r = subprocess.run([sys.executable, "-c", "import torchlean"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert f"cannot write the record '{tmp_path}'" in r.stderr
    with pytest.raises(OSError, match="cannot write the record"):
        with audit.record(str(tmp_path)):
            pass


def test_format_1_files_read_as_their_lines_with_the_same_certificate(runs, capsys, tmp_path):
    """A format 1 file (the record lines themselves between header and trailer) reads back
    to the same records and certificate as the format 2 file of the same run."""
    rec = Record(runs["a"])
    header = Path(runs["a"]).read_text().split("\n", 1)[0].split(" ", 2)[2]
    body = f"tlaudit 1 {header}\n" + "".join(line + "\n" for line in rec.lines)
    trailer = dict(rec.trailer, sha256=hashlib.sha256(body.encode()).hexdigest())
    old = tmp_path / "v1.tlaudit"
    old.write_text(body + "end " + json.dumps(trailer) + "\n")
    assert Record(str(old)).records == rec.records
    rc1, c1, _ = _cli(capsys, "certificate", str(old))
    rc2, c2, _ = _cli(capsys, "certificate", runs["a"])
    assert rc1 == rc2 == 0 and c1 == c2
    rc, out, _ = _cli(capsys, "diff", str(old), runs["a"])
    assert rc == 0 and out.startswith("identical: ")
