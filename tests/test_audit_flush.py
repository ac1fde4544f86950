"""A long record holds in memory only the log since the last write and nothing of the digests
read back (recordfile.Writer writes both as they come); where the writes fall (a ring read
back every few steps, the log written every few records) changes no record."""
from __future__ import annotations

import numpy as np

from torchlean import audit, nn, no_grad, optim
from torchlean.audit import digests, recorder
from torchlean.audit.__main__ import main as audit_main
from torchlean.audit.recordfile import Record
from torchlean.session import Session, manual_seed


def _run(path, steps):
    """A small model trained `steps` steps, every third one over two micro-batches (gradients
    accumulated), each followed by an evaluation forward; returns the log's length after each
    step."""
    manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    s = Session()
    kept = []
    with audit.record(path, label="flush-test"):
        rec = audit._active[0]
        for k in range(steps):
            opt.zero_grad()
            for _ in range(2 if k % 3 == 0 else 1):
                x = s.tensor(rng.normal(size=(4, 5)).astype(np.float32))
                y = rng.integers(0, 3, 4)
                nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
            with no_grad():
                model(x)
            s.step()
            kept.append(len(rec.log))
    return kept


def test_a_long_record_keeps_little_and_write_points_change_no_record(tmp_path, monkeypatch):
    a, b, c = (str(tmp_path / f"{n}.tlaudit") for n in "abc")
    monkeypatch.setattr(digests, "RING_SLOTS", 64)
    monkeypatch.setattr(recorder, "FLUSH_ITEMS", 500)
    kept = _run(a, 300)
    assert max(kept) <= 500 + max(np.diff([0] + kept)) + 200
    assert max(kept[200:]) <= max(kept[:100]) + 200
    ra = Record(a)
    assert ra.steps == 300 and sum(r[0] == "S" for r in ra.records) == 300
    # the whole run's log and digests written once, at the end
    monkeypatch.setattr(digests, "RING_SLOTS", 1 << 16)
    monkeypatch.setattr(recorder, "FLUSH_ITEMS", 1 << 40)
    kept_all = _run(c, 300)
    assert kept_all[-1] > 20 * max(kept)
    rc = Record(c)
    assert ra.records == rc.records and ra.lines == rc.lines and ra.trailer["records"] == len(rc.records)
    with open(a, "rb") as fa, open(c, "rb") as fc:
        assert fa.read() != fc.read()           # (the blocks did fall elsewhere)
    assert audit_main(["diff", a, c]) == 0
    _run(b, 300)
    assert audit_main(["diff", a, b]) == 0
