"""torchlean.audit's batched digests (digest_batch): equal to one digest per buffer and to the
definition for every size, in any order; a released handle or a batch past the ring refused with
the ring left alone; and records made batched equal records made op by op (also with in-place
ops, freed intermediates and a gradient hook), so diffs name the same first difference."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest

import torchlean as tl
from torchlean import audit, nn, optim, no_grad
from torchlean._loader import ffi, lib, raise_status
from torchlean.audit.__main__ import main as audit_main
from torchlean.audit.certificate import certificate
from torchlean.audit.digests import digest_many
from torchlean.audit.recordfile import Record
from torchlean.buffer import AnyBuffer
from torchlean.session import Session, manual_seed

from test_audit import digest_numpy, digest_python

# sizes around the CUDA body's chunk (16 * 256 elements) and the stub's parallel threshold
SIZES = [0, 1, 2, 3, 7, 255, 256, 257, 4095, 4096, 4097, 8192, 12289, 65537, (1 << 20) + 3]


def _bufs(seed=0, sizes=SIZES):
    rng = np.random.default_rng(seed)
    bits = [rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32) for n in sizes]
    return bits, [AnyBuffer.from_numpy(b.view(np.float32)) for b in bits]


def _handles(bufs):
    return [int(ffi.cast("intptr_t", b.buf.handle)) for b in bufs]


def _batch(ring, handles, count, first=0):
    """The entry called as the recorder calls it (raw handles of buffers it holds; the public
    ops.digest_batch takes the buffers themselves)."""
    arr = ffi.new("int64_t[]", handles) if handles else ffi.NULL
    st = lib.tl_digest_batch(ring.handle, arr, len(handles), count, ring.shape[0], first)
    if st:
        raise_status("digest_batch", st)


def test_batch_equals_one_digest_per_buffer_and_the_definition():
    bits, bufs = _bufs()
    got = digest_many(bufs)
    assert got == [audit.digest(b) for b in bufs]
    assert got == [digest_numpy(b) for b in bits]
    assert got[:5] == [digest_python(b) for b in bits[:5]]
    assert len(set(got)) == len(got)   # distinct contents, distinct digests


def test_batch_order_and_repeats_do_not_matter():
    bits, bufs = _bufs(seed=3)
    want = dict(zip(map(id, bufs), digest_many(bufs)))
    rng = np.random.default_rng(7)
    for _ in range(3):
        order = list(rng.permutation(len(bufs))) + [0, 0, len(bufs) - 1]   # repeats too
        shuffled = [bufs[k] for k in order]
        assert digest_many(shuffled) == [want[id(b)] for b in shuffled]


def test_batch_many_small_buffers_into_ring_rows():
    bits, bufs = _bufs(seed=5, sizes=[k % 37 for k in range(300)])
    ring = AnyBuffer.zeros((310, 4))
    _batch(ring, _handles(bufs), len(bufs), first=10)
    rows = ring.to_numpy()
    assert not rows[:10].any()                     # rows before `first` untouched
    w = rows[10:].astype(np.uint64)
    got = (w[:, 0] | w[:, 1] << np.uint64(16) | w[:, 2] << np.uint64(32)
           | w[:, 3] << np.uint64(48)).tolist()
    assert got == [digest_numpy(b) for b in bits]


@pytest.mark.parametrize("sizes", [
    [65536, 1, 0, 4096, 65535],             # every buffer at most 2^16 elements, few buffers
    [(k * 997) % 4099 for k in range(64)],  # 64 buffers: the most one launch takes as arguments
    [(k * 997) % 4099 for k in range(65)],  # one buffer more
    [3, 65537, 5],                          # one buffer past 2^16 elements
])
def test_batch_sizes_around_the_small_batch_limits(sizes):
    """CUDA digests a batch of at most 64 buffers of at most 2^16 elements with its table as the
    kernel's argument, a larger one through an uploaded table: either way the definition's
    digests, in the rows from `first` on."""
    bits, bufs = _bufs(seed=len(sizes), sizes=sizes)
    ring = AnyBuffer.zeros((len(sizes) + 3, 4))
    _batch(ring, _handles(bufs), len(bufs), first=2)
    rows = ring.to_numpy()
    assert not rows[:2].any() and not rows[2 + len(sizes):].any()
    w = rows[2:2 + len(sizes)].astype(np.uint64)
    got = (w[:, 0] | w[:, 1] << np.uint64(16) | w[:, 2] << np.uint64(32)
           | w[:, 3] << np.uint64(48)).tolist()
    assert got == [digest_numpy(b) for b in bits]
    assert digest_many(bufs) == got


def test_batch_bad_input_is_refused_and_leaves_the_ring_alone():
    _, bufs = _bufs(sizes=[5, 9, 3])
    ring = AnyBuffer.zeros((4, 4))
    handles = _handles(bufs)
    bufs[1].release()
    with pytest.raises((ValueError, RuntimeError), match=r"digest_batch: handles\[1\].*9 elements.*released"):
        _batch(ring, handles, 3)
    assert not ring.to_numpy().any()
    with pytest.raises((ValueError, RuntimeError), match=r"digest_batch: handles\[0\] is a null buffer"):
        _batch(ring, [0], 1)
    with pytest.raises((ValueError, RuntimeError), match=r"digest_batch: expected first >= 0.*first=3"):
        _batch(ring, handles[:2], 2, first=3)
    with pytest.raises((ValueError, RuntimeError), match=r"digest_batch.*handles"):
        _batch(ring, handles[:2], 3)
    assert not ring.to_numpy().any()


def test_public_digest_batch_takes_buffers_and_refuses_anything_else():
    """ops.digest_batch (the public op) takes AnyBuffers, never raw handles: a released buffer,
    an integer (a freed or made-up handle) or a Tensor-less object is a clear error naming its
    position, before any row is written; live buffers give the definition's digests."""
    bits, bufs = _bufs(seed=11, sizes=[5, 0, 4097, 1])
    ring = AnyBuffer.zeros((6, 4))
    tl.ops.digest_batch(ring, handles=bufs, count=4, first=2)
    rows = ring.to_numpy()
    assert not rows[:2].any()
    w = rows[2:].astype(np.uint64)
    got = (w[:, 0] | w[:, 1] << np.uint64(16) | w[:, 2] << np.uint64(32)
           | w[:, 3] << np.uint64(48)).tolist()
    assert got == [digest_numpy(b) for b in bits]
    fresh = AnyBuffer.zeros((6, 4))
    stale = _handles(bufs)
    bufs[2].release()
    with pytest.raises(ValueError, match=r"digest_batch: handles\[2\] \(shape \(4097,\)\) was "
                                         r"already released"):
        tl.ops.digest_batch(fresh, handles=bufs, count=4)
    with pytest.raises(TypeError, match=r"digest_batch: handles\[0\] must be an AnyBuffer, got "
                                        r"int \(a raw handle is never accepted"):
        tl.ops.digest_batch(fresh, handles=stale[2:3], count=1)   # a released buffer's handle
    with pytest.raises(TypeError, match=r"digest_batch: handles\[1\] must be an AnyBuffer"):
        tl.ops.digest_batch(fresh, handles=[bufs[0], 12345], count=2)
    with pytest.raises(TypeError, match=r"digest_batch: handles must be a list or tuple"):
        tl.ops.digest_batch(fresh, handles=bufs[0], count=1)
    with pytest.raises(ValueError, match=r"digest_batch.*handles"):
        tl.ops.digest_batch(fresh, handles=[bufs[0]], count=2)     # count past the list
    assert not fresh.to_numpy().any()
    with pytest.raises(ValueError, match=r"digest_many: a buffer of shape \(4097,\) was already "
                                         r"released|handles\[1\].*released"):
        digest_many([bufs[0], bufs[2]])


def _program(path, batched, seed=0, lr=0.05, steps=3, hook=True):
    """A model with what batching must survive: freed intermediates, an in-place op on a
    value needing a gradient (rebased), in-place writes on values needing none (data, and
    under no_grad), a VJP that writes over its cotangent (if any), a gradient hook and an
    evaluation forward with an in-place activation."""
    manual_seed(seed)
    model = nn.Sequential(nn.Linear(9, 13), nn.ReLU(), nn.Linear(13, 13), nn.Tanh(),
                          nn.Linear(13, 4))
    opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    if hook:   # written in place by the hook: digested before it runs
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(lambda q: q.grad.mul_(0.5))
    rng = np.random.default_rng(seed)
    s = Session()
    with (audit.record(path, label="batch-test", batched=batched) if path
          else contextlib.nullcontext()):
        for k in range(steps):
            x = s.tensor(rng.normal(size=(6, 9)).astype(np.float32))
            y = rng.integers(0, 4, 6)
            opt.zero_grad()
            h = model[0](x)
            h = model[1](h)
            scaled = x * 2.0
            scaled.add_(1.0)               # needs no gradient: written in place at once
            g = model[2](h)
            g += h                          # needs a gradient: recorded out of place
            out = model[4](model[3](g))
            loss = nn.functional.cross_entropy(out, y) + (out * out).mean() * 0.1 \
                + scaled.sum() * 0.0
            loss.backward()
            opt.step()
            with no_grad():
                e = model[0](x)
                e.relu_()                   # under no_grad: an in-place write on a record
                model[4](model[3](model[2](e)))
            s.step()
    return [p.numpy().copy() for p in model.parameters()]


@pytest.mark.parametrize("exact", [True, False])
def test_batched_record_equals_op_by_op_record(tmp_path, exact):
    old = tl.is_exact()
    tl.set_exact(exact)
    try:
        a, b = str(tmp_path / "batched.tlaudit"), str(tmp_path / "eager.tlaudit")
        wa = _program(a, True)
        wb = _program(b, False)
    finally:
        tl.set_exact(old)
    for u, v in zip(wa, wb):
        assert np.array_equal(u.view(np.uint32), v.view(np.uint32))
    ra, rb = Record(a), Record(b)
    assert ra.lines == rb.lines and ra.steps == 3 and ra.ops > 50
    assert certificate(ra) == certificate(rb)
    # the digests are real: an F record of the first op is the digest of what it computed
    assert any(r[0] == "F" and r[2] == "relu" for r in ra.records)


def test_batched_and_op_by_op_diffs_name_the_same_first_difference(tmp_path, capsys):
    paths = {}
    for name, batched, lr in (("a", True, 0.05), ("b", True, 0.06), ("c", False, 0.05),
                              ("d", False, 0.06)):
        paths[name] = str(tmp_path / f"{name}.tlaudit")
        _program(paths[name], batched, lr=lr)
    assert audit_main(["diff", paths["a"], paths["c"]]) == 0
    first = capsys.readouterr().out
    assert first.startswith("identical:")
    assert audit_main(["diff", paths["a"], paths["b"]]) == 1
    batched = capsys.readouterr().out
    assert audit_main(["diff", paths["c"], paths["d"]]) == 1
    eager = capsys.readouterr().out
    assert batched == eager.replace(paths["c"], paths["a"]).replace(paths["d"], paths["b"])
    assert "step 0" in batched and "SGD" in batched


def test_recording_batched_never_changes_a_result(tmp_path):
    recorded = _program(str(tmp_path / "r.tlaudit"), True)
    plain = _program(None, True)
    unhooked = _program(None, True, hook=False)
    for u, v, w in zip(recorded, plain, unhooked):
        assert np.array_equal(u.view(np.uint32), v.view(np.uint32))
        assert not np.array_equal(u, w)   # the hook's in-place write mattered


def test_names_needing_escapes_and_scalar_shapes_survive_the_record_file(tmp_path):
    """Leaf names and labels needing JSON escapes, non-ASCII text and scalar shapes go through
    the file's object table and come back as they were, with the digests of the bits that
    went in (the definition, in NumPy)."""
    from test_audit import digest_numpy
    from torchlean.tape import Tape
    path = str(tmp_path / "lines.tlaudit")
    rng = np.random.default_rng(4)
    xs = [(rng.normal(size=(3, 5)).astype(np.float32), rng.normal(size=(5,)).astype(np.float32))
          for _ in range(2)]
    name = 'we"ird \\ n\u00e4me'
    with audit.record(path, label='odd "label" \u00fc'):
        for xa, xb in xs:
            t = Tape()
            a = t.leaf(xa, name=name)
            b = t.leaf(xb, name="b")
            y = t.sum(t.tanh(t.mul(a, b)))
            t.backward(y)
            t.release()
    rec = Record(path)
    assert rec.header["script"] == 'odd "label" \u00fc'
    assert rec.ops >= 6 and any(r[0] == "B" and r[4] == [] for r in rec.records)
    muls = [r for r in rec.records if r[0] == "F" and r[2] == "mul"]
    assert len(muls) == 2
    for r, (xa, xb) in zip(muls, xs):
        assert r[3] == [[3, 5], [5]] and r[4] == [3, 5]
        assert r[6] == [[name, "%016x" % digest_numpy(xa.ravel().view(np.uint32))],
                        ["b", "%016x" % digest_numpy(xb.view(np.uint32))]]
    sums = [r for r in rec.records if r[0] == "F" and r[2] == "sum"]
    assert [r[4] for r in sums] == [[], []]


@pytest.mark.skipif(tl.backend() != "stub", reason="the stub's thread split")
def test_stub_batch_split_over_threads_gives_the_definition():
    """The stub splits a batch's elements, laid end to end, evenly over its threads, so a
    thread's piece starts and ends inside buffers: at 1, 2, 3 and 5 threads every digest is
    the definition's (sizes summing past the parallel threshold, many small buffers, size 0
    and 1 among them)."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    sizes = [0, 1, 40000, 3, 17, 70001] + [(k * 997) % 4099 for k in range(40)]
    code = ("import sys; sys.path[:0] = [%r, %r]\n"
            "from test_audit_batch import _bufs\n"
            "from torchlean.audit.digests import digest_many\n"
            "print(digest_many(_bufs(seed=11, sizes=%r)[1]))\n") % (
        str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent), sizes)
    bits, _ = _bufs(seed=11, sizes=sizes)
    want = str([digest_numpy(b) for b in bits])
    for threads in ("1", "2", "3", "5"):
        env = dict(os.environ, OMP_NUM_THREADS=threads, TORCHLEAN_BACKEND="stub")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        assert out.stdout.strip() == want, threads
