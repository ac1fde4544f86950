"""Recording (torchlean.audit) on models like the ones bench_audit.py times beyond the digits
examples: convolutions with BatchNorm and a residual add (BatchNorm's running statistics are
values needing no gradient, written in place every step), and a small GPT (embeddings,
attention, LayerNorm, AdamW). Recording must never change a value; records are written from
the log the hooks fill, so a ring read back every few steps gives the same file as one read at
the close, and a learning rate changed mid-run is named at the step it first differs."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import audit, nn, optim
from torchlean.audit import digests
from torchlean.audit.__main__ import main as audit_main
from torchlean.audit.recordfile import Record
from torchlean.session import Session, manual_seed


def _resnet_like():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)
            self.c2, self.b2 = nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)

        def forward(self, x):
            h = self.b1(self.c1(x)).relu()
            return (self.b2(self.c2(h)) + x).relu()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem, self.bn = nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4)
            self.block = Block()
            self.head = nn.Sequential(nn.Flatten(), nn.Linear(4 * 6 * 6, 5))

        def forward(self, x):
            return self.head(self.block(self.bn(self.stem(x)).relu()))
    return Net()


def _gpt_like():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(11, 8)
            self.ln1, self.attn = nn.LayerNorm(8), nn.MultiHeadAttention(8, 2)
            self.ln2, self.head = nn.LayerNorm(8), nn.Linear(8, 11)
            self.causal = np.tril(np.ones((6, 6), dtype=bool))

        def forward(self, idx):
            x = self.tok(idx)
            x = x + self.attn(self.ln1(x), mask=self.causal)
            return self.head(self.ln2(x))
    return Net()


def _train(kind, path=None, exact=True, steps=4, lr_at=None):
    """Train `kind` for `steps` steps (recorded into `path` when given); lr_at=(step, lr) sets
    the learning rate from that step on. Returns every parameter and buffer as float32 bits."""
    old = tl.is_exact()
    tl.set_exact(exact)
    try:
        manual_seed(0)
        rng = np.random.default_rng(0)
        if kind == "resnet":
            model = _resnet_like()
            opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                            weight_decay=5e-4)
            X = rng.normal(size=(steps, 3, 3, 6, 6)).astype(np.float32)
            Y = rng.integers(0, 5, (steps, 3))
        else:
            model = _gpt_like()
            opt = optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
            X = rng.integers(0, 11, (steps, 2, 6))
            Y = rng.integers(0, 11, (steps, 2, 6))
        ctx = audit.record(path, label="test-models") if path else _Nothing()
        with ctx:
            for k in range(steps):
                if lr_at is not None and k == lr_at[0]:
                    for g in opt.param_groups:
                        g["lr"] = lr_at[1]
                with Session() as s:
                    opt.zero_grad()
                    if kind == "resnet":
                        out = model(s.tensor(X[k]))
                        loss = nn.functional.cross_entropy(out, Y[k])
                    else:
                        out = model(X[k])
                        loss = nn.functional.cross_entropy(out.view(-1, 11), Y[k].reshape(-1))
                    loss.backward()
                    opt.step()
        state = model.state_dict()
        return {k: np.asarray(v, dtype=np.float32).view(np.uint32).copy()
                for k, v in state.items()}
    finally:
        tl.set_exact(old)


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("kind", ["resnet", "gpt"])
@pytest.mark.parametrize("exact", [True, False])
def test_recording_never_changes_a_result(tmp_path, kind, exact):
    plain = _train(kind, exact=exact)
    recorded = _train(kind, str(tmp_path / "r.tlaudit"), exact=exact)
    assert plain.keys() == recorded.keys()
    for k in plain:
        assert np.array_equal(plain[k], recorded[k]), k


@pytest.mark.parametrize("kind", ["resnet", "gpt"])
@pytest.mark.parametrize("limit", [("RING_SLOTS", 16), ("PENDING", 0), ("PENDING", 1 << 40),
                                   ("STUB_AT_ONCE", False)])
def test_batch_and_ring_sizes_write_the_same_record(tmp_path, monkeypatch, kind, limit):
    """A ring of 16 slots is read back (into the file) many times a step; a batch runs at every
    queued value, or only where the recorder must run it; the stub queues as CUDA does instead
    of digesting each value at once: the same records as with the defaults."""
    default = tmp_path / "default.tlaudit"
    _train(kind, str(default))
    name, value = limit
    for name in (["PENDING_ELEMENTS", "PENDING_ELEMENTS_STUB"] if name == "PENDING" else [name]):
        monkeypatch.setattr(digests, name, value)
    other = tmp_path / "other.tlaudit"
    _train(kind, str(other))
    a, b = Record(str(default)), Record(str(other))
    assert a.header == b.header and a.records == b.records and a.lines == b.lines
    assert len(a.records) == a.trailer["records"] > 0


@pytest.mark.parametrize("kind", ["resnet", "gpt"])
def test_lr_changed_mid_run_is_named_at_its_step(tmp_path, capsys, kind):
    a, b = tmp_path / "a.tlaudit", tmp_path / "b.tlaudit"
    _train(kind, str(a))
    _train(kind, str(b), lr_at=(2, 0.01))
    assert audit_main(["diff", str(a), str(a)]) == 0
    capsys.readouterr()
    assert audit_main(["diff", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "first difference: step 2" in out and "optimizer step" in out, out
    assert "hyperparameter lr of group 0 differs" in out, out


def test_a_refused_digest_leaves_no_half_record(tmp_path):
    """A digest that fails inside a hook (here: every queueing refused) raises to the op's
    caller and leaves the record log as it was; the record still closes."""
    path = tmp_path / "r.tlaudit"
    audit.start(str(path), label="refused")
    try:
        rec = audit._active[0]
        s = Session()
        x = s.tensor(np.ones((2, 3), np.float32))
        w = s.tensor(np.ones((3, 3), np.float32), requires_grad=True)
        (x @ w).sum()
        n = len(rec.log)

        def refuse(value):
            raise RuntimeError("refused")
        rec.add = refuse
        with pytest.raises(RuntimeError, match="refused"):
            x @ w
        assert len(rec.log) == n
    finally:
        audit.stop()
    assert audit_main(["certificate", str(path)]) == 0
