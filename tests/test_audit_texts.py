"""torchlean.audit keeps the digest texts read back only while a record may still refer to them
(Batch.forget, Recorder.forget): over a long run they stay as few as over a short one, and the
record is the same bytes as one that kept every text."""
from __future__ import annotations

import numpy as np

from torchlean import audit, nn, no_grad, optim
from torchlean.audit import digests
from torchlean.audit.__main__ import main as audit_main
from torchlean.audit.digests import Batch
from torchlean.session import Session, manual_seed

RING = 64   # a small ring: read back (and forgotten) every few steps


def _run(path, steps):
    """A small model trained `steps` steps, every third one over two micro-batches (gradients
    accumulated), each followed by an evaluation forward (reusing the parameter digests);
    returns the number of texts kept after each step."""
    manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(0)
    s = Session()
    kept = []
    with audit.record(path, label="texts-test"):
        batch = audit._active[0].batch
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
            kept.append(len(batch.texts))
    return kept


def test_kept_texts_do_not_grow_with_the_run_and_the_record_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(digests, "RING_SLOTS", RING)
    a, b, c = (str(tmp_path / f"{n}.tlaudit") for n in "abc")
    kept = _run(a, 300)
    # what stays is what the last ring read left that waits for its records: under a ring
    # and a step's digests, however long the run
    assert 0 < max(kept) <= 2 * RING
    assert max(kept[200:]) <= max(kept[:100])
    _run(b, 300)
    assert audit_main(["diff", a, b]) == 0
    # the same bytes as a record that forgot nothing
    monkeypatch.setattr(Batch, "forget", lambda self, below: None)
    kept_all = _run(c, 300)
    assert kept_all[-1] > 10 * max(kept)
    with open(a, "rb") as fa, open(c, "rb") as fc:
        assert fa.read() == fc.read()
