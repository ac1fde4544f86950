"""graph_step's host side on any backend: the native graph calls are replaced by a recorder (a
replay then launches nothing), so what each replay checks, stages and counts is tested on the
stub too: the one-pass replay path is taken when nothing changed, every change the slow path
catches still captures again, inputs are staged in the static inputs' dtype and only after
the launched replays read the previous ones, and Adam's step counts on the host equal the
eager loop's."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import _loader, nn, optim
from torchlean import cuda as tcuda
from torchlean import cuda_device
from torchlean.int_tensor import IntTensor


class RecordingLib:
    """The loaded library with tl_graph_* recorded, not run. Each graph's first node is
    emulated as a device that lags as far as the input rings allow: a launch's inputs are read
    only when a wait needs its ring entries back (or at read_all), so `loaded` holds what each
    launch read, stale bytes included if the host rewrote an entry too early."""

    def __init__(self, real):
        self._real, self.launches, self.copies, self.waits = real, 0, 0, 0
        self.graphs = {}      # handle -> {"inputs": [(bytes, stride, depth, buf)], ...}
        self.loaded = []      # per launch read, in read order: each input's bytes

    def __getattr__(self, name):
        return getattr(self._real, name)

    def tl_graph_new(self, out):
        h = len(self.graphs) + 1
        self.graphs[h] = {"inputs": [], "launches": 0, "pending": [], "depth": 1 << 30}
        out[0] = _loader.ffi.cast("void *", h)
        return 0

    def _graph(self, g):
        return self.graphs[int(_loader.ffi.cast("uintptr_t", g))]

    def tl_graph_bind_host(self, g, host, nbytes, out):
        out[0] = int(_loader.ffi.cast("uintptr_t", host))
        return 0

    def tl_graph_bind_input(self, g, dst, nbytes, staged, depth, out):
        gr = self._graph(g)
        stride = (nbytes + 255) // 256 * 256 if staged else 8
        buf = _loader.ffi.new("char[]", stride * depth)
        gr["inputs"].append((nbytes if staged else 8, stride, depth, buf))
        gr["depth"] = min(gr["depth"], depth)
        out[0] = buf
        return 0

    def _read(self, gr, k):
        out = []
        for n, stride, depth, buf in gr["inputs"]:
            e = (k % depth) * stride
            out.append(bytes(_loader.ffi.buffer(buf)[e:e + n]))
        self.loaded.append(out)

    def tl_graph_wait_inputs(self, g):
        gr = self._graph(g)
        self.waits += 1
        while len(gr["pending"]) > gr["depth"] - 1:   # the latest reads the host can allow
            self._read(gr, gr["pending"].pop(0))
        return 0

    def read_all(self) -> list:
        for gr in self.graphs.values():
            while gr["pending"]:
                self._read(gr, gr["pending"].pop(0))
        return self.loaded

    def tl_graph_copy(self, dst, src, nbytes):
        self.copies += 1
        return 0

    def tl_graph_launch(self, g):
        gr = self._graph(g)
        gr["pending"].append(gr["launches"])
        gr["launches"] += 1
        self.launches += 1
        return 0

    def tl_graph_constants(self, g, op, cap):
        return 0

    def tl_graph_bound_read(self, g, i):
        return 2   # every bound integer input was uploaded as it is (a guarded input)

    def tl_graph_destroy(self, g):
        return None

    def _ok(self, *a):
        return 0

    tl_graph_begin = tl_graph_end = tl_graph_abort = tl_graph_set_rng = _ok
    tl_graph_persistent = _ok


@pytest.fixture
def rec(monkeypatch):
    lib = RecordingLib(_loader.lib)
    monkeypatch.setattr(_loader, "lib", lib)
    monkeypatch.setattr(cuda_device, "is_available", lambda: True)
    return lib


def _setup(make_opt=lambda m: optim.Adam(m.parameters(), lr=1e-2), classes=5):
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(7, 11), nn.ReLU(), nn.Linear(11, classes))
    opt = make_opt(model)

    def step(x, y, scale=1.0):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x) * scale, y)
        loss.backward()
        opt.step()
        return loss
    return model, opt, step


def _batch(seed, rows=6, classes=5, dtype=np.int64):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((rows, 7)).astype(np.float32),
            rng.integers(0, classes, rows).astype(dtype))


def test_unchanged_calls_replay_and_adam_counts_match_the_steps(rec):
    model, opt, fn = _setup()
    g = tcuda.graph_step(fn)
    for i in range(7):
        g(*_batch(i))
    # call 1 eager, call 2 captured (and launched), calls 3..7 replayed by the one-pass path
    assert g.captures == 1 and rec.launches == 6
    assert g.graph.replays == 5
    steps = [opt.state[id(p)]["step"] for p in model.parameters()]
    assert steps == [7] * 4   # 1 eager + 1 captured + 5 replays, as 7 eager steps
    assert all(s["step"] == 7 for s in opt.state_dict()["state"].values())
    g(*_batch(8))
    g.reset()                 # a destroyed graph leaves its count behind
    assert [opt.state[id(p)]["step"] for p in model.parameters()] == [8] * 4


def test_replay_stages_labels_in_the_static_dtype(rec):
    _, _, fn = _setup()
    g = tcuda.graph_step(fn)
    g(*_batch(0, dtype=np.int32))
    g(*_batch(1, dtype=np.int32))
    x, y = _batch(2, dtype=np.int32)
    waits = rec.waits
    g(np.asfortranarray(x), y)    # a column-major batch is staged row-major
    assert rec.waits == waits + 1
    got = {len(b): b for b in rec.read_all()[-1]}
    assert np.array_equal(np.frombuffer(got[8 * y.size], np.int64), y.astype(np.int64))
    assert np.array_equal(np.frombuffer(got[4 * x.size], np.float32), x.ravel())
    assert g.captures == 1


def test_device_tensor_inputs_are_read_in_place_not_copied(rec):
    _, _, fn = _setup()
    g = tcuda.graph_step(fn)
    batches = [(tl.tensor(x), IntTensor(y)) for x, y in (_batch(i) for i in range(4))]
    g(*batches[0])
    g(*batches[1])
    copies = rec.copies
    for x, y in batches[2:]:
        g(x, y)
    for (x, y), (slot, labels) in zip(batches[2:], rec.read_all()[-2:]):
        assert np.frombuffer(slot, np.uint64)[0] == x.value.buf.data_ptr()
        assert np.array_equal(np.frombuffer(labels, np.int64), y._a)
    assert g.captures == 1 and g.graph.replays == 2
    assert rec.copies == copies    # a replay makes no copy call


def test_each_launch_reads_its_own_calls_inputs_through_the_rings(rec):
    """40 calls, more than a ring holds, against a device lagging as far as the rings allow:
    launch k reads ring entry k % depth after the host waited for it, so every launch reads the
    labels and features of its own call."""
    _, _, fn = _setup()
    g = tcuda.graph_step(fn)
    batches = [_batch(i) for i in range(40)]
    for x, y in batches:
        g(x, y)
    assert g.captures == 1 and g.graph.replays == 38
    got = rec.read_all()
    assert len(got) == 39   # the capture's launch and 38 replays
    for (x, y), (feat, labels) in zip(batches[1:], got):
        assert np.array_equal(np.frombuffer(feat, np.float32), x.ravel())
        assert np.array_equal(np.frombuffer(labels, np.int64), y)


@pytest.mark.parametrize("change, reason", [
    ("lr", "groups"), ("swap_param", "groups"), ("new_group_list", None),
    ("label_range", "range"), ("shape", "shapes"), ("constant_type", "constants"),
    ("constant_value", "constants"), ("zero_grad", "replaced"), ("grad_set", "replaced"),
    ("release_storage", "replaced")])
def test_what_the_slow_path_catches_still_captures_again(rec, change, reason):
    model, opt, fn = _setup()
    g = tcuda.graph_step(fn)
    for i in range(3):
        g(*_batch(i), 1.0)
    x, y = _batch(5)
    scale = 1.0
    if change == "lr":
        opt.param_groups[0]["lr"] = 1e-4
    elif change == "swap_param":   # same list object, same length, one element replaced
        ps = opt.param_groups[0]["params"]
        ps[0] = nn.Parameter(np.zeros(tuple(ps[0].shape), np.float32))
    elif change == "new_group_list":   # an equal copy of the groups: the slow path replays
        opt.param_groups = [dict(gr) for gr in opt.param_groups]
    elif change == "label_range":
        y[0] = 5
    elif change == "shape":
        x, y = _batch(5, rows=4)
    elif change == "constant_type":
        scale = 1                   # an int where the capture had a float: another graph
    elif change == "constant_value":
        scale = 2.0
    elif change == "zero_grad":
        opt.zero_grad()
    elif change == "grad_set":      # a new gradient buffer of the same shape
        w = model[0].weight
        w.grad = np.ones(tuple(w.shape), np.float32)
    elif change == "release_storage":
        model[0].weight.mirror().buf.release()
    if change == "release_storage":   # never replayed over freed memory: refused, named
        with pytest.raises(Exception, match="releas|freed"):
            g(x, y, scale)
        assert "replaced" in g.recapture_reason
        return
    if change == "label_range":     # captured again: the capture's cross_entropy refuses it
        with pytest.raises(RuntimeError, match="out of range"):
            g(x, y, scale)
        assert "range" in g.recapture_reason
        return
    g(x, y, scale)
    if reason is None:
        assert g.captures == 1 and g.graph.replays == 2
    else:
        assert g.captures == 2 and reason in g.recapture_reason, g.recapture_reason


def test_replayed_graph_keeps_the_eager_loops_sgd_state(rec):
    model, opt, fn = _setup(lambda m: optim.SGD(m.parameters(), lr=0.1, momentum=0.9))
    g = tcuda.graph_step(fn)
    for i in range(4):
        g(*_batch(i))
    assert g.captures == 1 and g.graph.replays == 2
    assert all("buf" in opt.state[id(p)] for p in model.parameters())


@pytest.mark.parametrize("lo, hi, exclude", [(0, 50, -1), (0, 50, 7), (-5, 5, 0),
                                             (0, 1, -1), (3, 3, 99)])
def test_stage_int64_copies_and_finds_the_first_value_out_of_range(lo, hi, exclude):
    """tl_graph_stage_int64 (a replay's one-pass staging of an integer input): the staging
    holds the values and the answer is numpy's first index outside [lo, hi) or equal to
    exclude, -1 when none is (values at the int64 extremes included)."""
    lib, ffi = _loader.lib, _loader.ffi
    rng = np.random.default_rng(lo + 100 * hi)
    for trial in range(30):
        src = rng.integers(lo - 3, hi + 3, int(rng.integers(0, 40)))
        if trial % 3 == 0:   # mostly in range
            src = np.clip(src, lo, max(lo, hi - 1))
        if trial == 7 and src.size:
            src[-1] = np.iinfo(np.int64).min if trial % 2 else np.iinfo(np.int64).max
        dst = np.full(src.size, -77, np.int64)
        got = lib.tl_graph_stage_int64(ffi.from_buffer("int64_t[]", dst),
                                       ffi.from_buffer("int64_t[]", src), src.size, lo, hi,
                                       exclude)
        bad = np.flatnonzero((src < lo) | (src >= hi) | (src == exclude))
        assert got == (int(bad[0]) if bad.size else -1), (src, got)
        assert np.array_equal(dst, src)
