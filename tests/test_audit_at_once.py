"""The stub's digests made as values are recorded (digests.STUB_AT_ONCE: one native call per op,
one per VJP's new payloads, one per optimizer step; nothing queued or pinned) against the
digest's definition computed in NumPy, and against the queued path CUDA takes (the same
Batch.add / add_all / run, here on the CPU): the same record byte for byte, also with a ring
so small that one call's digests wrap around it, and values written in place right after
their op are recorded with the bits they had when the op made them."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import audit, no_grad
from torchlean.audit import digests
from torchlean.audit.recordfile import Record
from torchlean.session import Session

from test_audit import digest_numpy
from test_audit_batch import _bufs, _program

pytestmark = pytest.mark.skipif(tl.backend() != "stub", reason="the stub's digests at once")


class _Sink(list):
    """A batch's sink keeping every digest read back, in order."""

    def __call__(self, d):
        self.extend("%016x" % x for x in d.tolist())


def _texts(batch, first, n):
    batch.read_back()
    return batch.sink[first:first + n]


def test_add_now_and_digest_handles_give_the_definition_across_ring_reads(monkeypatch):
    """A 4-row ring: single values and a call of 7 handles (read back twice within the call)
    number their digests in order, and each is the definition's."""
    monkeypatch.setattr(digests, "RING_SLOTS", 4)
    sizes = [0, 1, 5, 4097, 3, 70001, 2, 9, 33, 1, 12289, 7]
    bits, bufs = _bufs(seed=5, sizes=sizes)
    b = digests.Batch(_Sink())
    assert b.add == b.add_now
    try:
        seqs = [b.add(bufs[0]), b.add(bufs[1]), b.add(bufs[2])]
        first = b.digest_handles([x.handle for x in bufs[3:10]])
        seqs += list(range(first, first + 7))
        seqs += [b.add(bufs[10]), b.digest_handles([bufs[11].handle])]
        assert seqs == list(range(len(sizes)))
        # by value: one (the one-buffer kernel), two, and three that wrap around the ring
        assert b.digest_values([bufs[5]]) == len(sizes)
        assert b.digest_values([bufs[2], bufs[7]]) == len(sizes) + 1
        assert b.digest_values([bufs[8], bufs[3], bufs[9]]) == len(sizes) + 3
        assert b.base == len(sizes) + 6
        assert b.count == 0 and not b.bufs     # nothing queued, nothing pinned
        want = ["%016x" % digest_numpy(x) for x in bits]
        want += ["%016x" % digest_numpy(bits[k]) for k in (5, 2, 7, 8, 3, 9)]
        assert _texts(b, 0, len(sizes) + 6) == want
    finally:
        b.release()


def test_a_released_value_is_refused_and_numbers_nothing():
    bits, bufs = _bufs(seed=6, sizes=[3, 4, 5])
    b = digests.Batch(_Sink())
    try:
        bufs[1].release()
        with pytest.raises(ValueError, match="released"):
            b.add(bufs[1])
        with pytest.raises(ValueError, match="released"):
            b.digest_handles([bufs[0].handle, bufs[1].handle])
        with pytest.raises(ValueError, match="released"):
            b.digest_values([bufs[1]])
        with pytest.raises(ValueError, match="released"):
            b.digest_values([bufs[0], bufs[1]])
        assert b.base == 0 and b.used == 0
        assert b.add(bufs[2]) == 0
        assert _texts(b, 0, 1) == ["%016x" % digest_numpy(bits[2])]
    finally:
        b.release()


@pytest.mark.parametrize("ring", [None, 5])
@pytest.mark.parametrize("exact", [True, False])
def test_at_once_and_queued_write_the_same_record(tmp_path, monkeypatch, ring, exact):
    """_program (freed intermediates, in-place writes on data, under no_grad and on a value
    needing a gradient, gradient hooks writing in place, an evaluation forward): recorded
    with the stub's digests at once and through the queue, the same file."""
    if ring:
        monkeypatch.setattr(digests, "RING_SLOTS", ring)
    old = tl.is_exact()
    tl.set_exact(exact)
    try:
        a, b = tmp_path / "at_once.tlaudit", tmp_path / "queued.tlaudit"
        wa = _program(str(a), True)
        monkeypatch.setattr(digests, "STUB_AT_ONCE", False)
        wb = _program(str(b), True)
    finally:
        tl.set_exact(old)
    ra, rb = Record(str(a)), Record(str(b))
    assert ra.header == rb.header and ra.records == rb.records and ra.lines == rb.lines
    for u, v in zip(wa, wb):
        assert np.array_equal(u.view(np.uint32), v.view(np.uint32))


def test_a_value_written_right_after_its_op_is_recorded_as_the_op_made_it(tmp_path):
    """Values needing no gradient written in place at once (on data, and under no_grad): each
    op's record holds the digest of the bits the op produced, computed here in NumPy."""
    path = tmp_path / "r.tlaudit"
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(4, 5)).astype(np.float32)
    with audit.record(str(path), label="in-place"):
        s = Session()
        x = s.tensor(xs)
        y = x * 3.0
        made = [y.numpy().copy()]
        y.add_(1.0)
        with no_grad():
            z = x + 2.0
            made.append(z.numpy().copy())
            z.mul_(0.5)
    ops = [r for r in Record(str(path)).records if r[0] == "F"]
    def want(a):
        return "%016x" % digest_numpy(np.ascontiguousarray(a, np.float32).view(np.uint32).ravel())
    # y = x * 3, y += 1 (recorded: y needs no gradient), then z = x + 2 (z *= 0.5 under no_grad)
    assert [r[2] for r in ops] == ["scale", "add", "add"], ops
    assert [r[5] for r in ops] == [want(made[0]), want(y.numpy()), want(made[1])]
    assert not np.array_equal(y.numpy(), made[0]) and not np.array_equal(z.numpy(), made[1])
