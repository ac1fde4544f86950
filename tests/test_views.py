"""Views share their base's storage, as PyTorch's: writes through a view reach the base and every
other view; writes to the base are seen by views read afterwards; gradients through views
written in place match finite differences (float64 NumPy) and torch where installed; version
counters and expanded views raise as torch does."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl

try:
    import torch
except Exception:   # torch is optional (not in CI)
    torch = None


def _np_diag(a):
    """A writable NumPy view of a's main diagonal."""
    return np.lib.stride_tricks.as_strided(a, (min(a.shape),), (sum(a.strides),))


def _data(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# each view: (torchlean/torch view function, the same view of a NumPy array)
VIEWS = {
    "t": (lambda x: x.t(), lambda a: a.T),
    "T": (lambda x: x.T, lambda a: a.T),
    "mT": (lambda x: x.mT, lambda a: np.swapaxes(a, -2, -1)),
    "transpose": (lambda x: x.transpose(0, 1), lambda a: a.swapaxes(0, 1)),
    "permute": (lambda x: x.permute(1, 0), lambda a: a.transpose(1, 0)),
    "row": (lambda x: x[1], lambda a: a[1]),
    "col": (lambda x: x[:, 1], lambda a: a[:, 1]),
    "slice": (lambda x: x[:, 1:4], lambda a: a[:, 1:4]),
    "step": (lambda x: x[..., ::2], lambda a: a[..., ::2]),
    "narrow": (lambda x: x.narrow(0, 1, 2), lambda a: a[1:3]),
    "select": (lambda x: x.select(1, -1), lambda a: a[:, -1]),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    "view": (lambda x: x.view(-1), lambda a: a.reshape(-1)),
    "chain": (lambda x: x.t()[1:, 0], lambda a: a.T[1:, 0]),
    "diagonal": (lambda x: x.diagonal(), lambda a: _np_diag(a)),
    "split": (lambda x: x.split(2, 1)[1], lambda a: a[:, 2:4]),
    "chunk": (lambda x: x.chunk(2, 0)[1], lambda a: a[2:]),
    "unbind": (lambda x: x.unbind(1)[2], lambda a: a[:, 2]),
    "none": (lambda x: x[None, 1:, None], lambda a: a[None, 1:, None]),
}

# each in-place family: (torchlean/torch write, NumPy write on a view)
WRITES = {
    "add_": (lambda v: v.add_(1.5), lambda a: a.__iadd__(np.float32(1.5))),
    "mul_": (lambda v: v.mul_(-2.0), lambda a: a.__imul__(np.float32(-2.0))),
    "iadd": (lambda v: v.__iadd__(v * 0.5), lambda a: a.__iadd__(a * np.float32(0.5))),
    "fill_": (lambda v: v.fill_(7.0), lambda a: a.fill(7.0)),
    "zero_": (lambda v: v.zero_(), lambda a: a.fill(0.0)),
    "copy_": (lambda v: v.copy_(v * 3.0 + 1.0), lambda a: np.copyto(a, a * np.float32(3) + 1)),
    "setitem": (lambda v: v.__setitem__(..., 4.0), lambda a: a.__setitem__(..., 4.0)),
    "clamp_": (lambda v: v.clamp_(-0.3, 0.2), lambda a: np.clip(a, -0.3, 0.2, out=a)),
}


def _same(x, a):
    np.testing.assert_array_equal(x.numpy(), a)


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("write", WRITES)
def test_write_through_view_reaches_base(view, write):
    a = _data(4, 5)
    if view == "diagonal":
        a = a[:, :3].copy()
    x = tl.tensor(a)
    v = VIEWS[view][0](x)
    ref = a.copy()
    rv = VIEWS[view][1](ref)
    assert np.shares_memory(rv, ref)
    WRITES[write][0](v)
    WRITES[write][1](rv)
    _same(x, ref)
    _same(v, rv)


@pytest.mark.parametrize("view", VIEWS)
@pytest.mark.parametrize("write", WRITES)
def test_write_to_base_seen_by_view(view, write):
    a = _data(4, 5, seed=1)
    if view == "diagonal":
        a = a[:, :3].copy()
    x = tl.tensor(a)
    v = VIEWS[view][0](x)
    ref = a.copy()
    rv = VIEWS[view][1](ref)
    _same(v, rv)
    WRITES[write][0](x)
    WRITES[write][1](ref)
    _same(v, rv)


@pytest.mark.parametrize("view", ["t", "row", "col", "step", "chain", "diagonal"])
def test_write_through_sibling_view_seen(view):
    a = _data(3, 3, seed=2)
    x = tl.tensor(a)
    v, w = VIEWS[view][0](x), x.t()
    ref = a.copy()
    rv, rw = VIEWS[view][1](ref), ref.T
    v.mul_(3.0)
    rv *= np.float32(3.0)
    _same(w, rw)
    w[0, 1] = -9.0
    rw[0, 1] = -9.0
    _same(v, rv)
    _same(x, ref)


def test_issue_idioms():
    x = tl.tensor(np.zeros((3, 4), np.float32))
    x.t()[0] = tl.tensor([1.0, 2.0, 3.0])
    x[0].add_(1)
    x[:, 1].zero_()
    x.narrow(0, 1, 2).mul_(2)
    ref = np.zeros((3, 4), np.float32)
    ref.T[0] = [1, 2, 3]
    ref[0] += 1
    ref[:, 1] = 0
    ref[1:3] *= 2
    _same(x, ref)
    for row in x:
        row.fill_(1)
    _same(x, np.ones((3, 4)))
    x[1][2] = 5.0          # a chain of item assignments reaches x, as in torch
    assert x.numpy()[1, 2] == 5.0


def test_odd_and_size_one_shapes():
    a = _data(1, 7, 1, seed=3)
    x = tl.tensor(a)
    v = x.squeeze()
    v[3] = 0.5
    x.squeeze(0).unsqueeze(0)[0, 6, 0] = -1.0
    ref = a.copy()
    ref[0, 3, 0] = 0.5
    ref[0, 6, 0] = -1.0
    _same(x, ref)
    _same(v, ref.reshape(-1))
    e = x[:, 3:3]
    assert e.shape == (1, 0, 1)
    e.fill_(9.0)       # an empty view writes nothing
    _same(x, ref)
    s = tl.tensor(np.float32(2.0))
    s.view(1)[0] = 3.0
    assert s.item() == 3.0


def test_layout_reports():
    x = tl.tensor(_data(3, 4))
    assert x.is_contiguous() and x.stride() == (4, 1) and x.storage_offset() == 0
    assert x._base is None
    t = x.t()
    assert not t.is_contiguous() and t.stride() == (1, 4) and t._base is x
    c = x[1:, 2]
    assert c.stride() == (4,) and c.storage_offset() == 6 and c._base is x
    assert x.t()[1:, 0]._base is x      # the base is the root, as torch's
    assert x[1].is_contiguous() and x[1].storage_offset() == 4
    assert x.expand(2, 3, 4).stride() == (0, 4, 1)
    assert x.unsqueeze(0).shape == (1, 3, 4)
    cc = t.contiguous()
    assert cc._base is None and cc.is_contiguous()
    cc.fill_(0)                         # a copy: x is untouched
    assert np.abs(x.numpy()).sum() > 0


def test_view_and_reshape_of_noncontiguous():
    a = _data(3, 4, seed=4)
    x = tl.tensor(a)
    t = x.t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(-1)
    r = t.reshape(-1)                   # a copy, as torch: writes do not reach x
    assert r._base is None
    r.fill_(0.0)
    _same(x, a)
    s = x[:, 1:3].view(3, 2, 1)         # viewable: still a view
    s.fill_(2.0)
    ref = a.copy()
    ref[:, 1:3] = 2.0
    _same(x, ref)
    _same(t.reshape(2, 6), ref.T.reshape(2, 6))


def test_expand_write_raises_as_torch():
    x = tl.tensor(_data(1, 3))
    e = x.expand(4, 3)
    _same(e, np.broadcast_to(x.numpy(), (4, 3)))
    for write in (lambda: e.add_(1), lambda: e.fill_(0), lambda: e.__setitem__(0, 1.0),
                  lambda: e[1:].zero_()):
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            write()
    ok = x.expand(1, 3)                 # nothing repeated: writable
    ok.fill_(2.0)
    _same(x, np.full((1, 3), 2.0))


def test_negative_steps_raise_as_torch():
    x = tl.tensor(_data(4))
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    if torch is not None:
        with pytest.raises(ValueError):
            torch.zeros(4)[::-1]


def test_parameter_view_under_no_grad_changes_the_forward():
    lin = tl.nn.Linear(3, 2)
    w0 = lin.weight.numpy().copy()
    x = tl.tensor(_data(5, 3, seed=5))
    with tl.no_grad():
        lin.weight.t()[0].zero_()       # column 0 of the weight
        lin.weight[1].mul_(2.0)
        lin.bias.zero_()
    ref = w0.copy()
    ref[:, 0] = 0
    ref[1] *= 2
    _same(lin.weight, ref)
    out = lin(x).numpy()
    np.testing.assert_allclose(out, x.numpy().astype(np.float64) @ ref.T.astype(np.float64),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="view of a leaf Variable that requires grad"):
        lin.weight[0].add_(1.0)         # outside no_grad: torch's error


def test_parameter_view_sees_optimizer_step():
    p = tl.nn.Parameter(np.ones((2, 3), np.float32))
    v = p.t()
    p.grad = np.full((2, 3), 1.0, np.float32)
    tl.optim.SGD([p], lr=0.5).step()
    _same(v, np.full((3, 2), 0.5))


def test_leaf_view_write_raises_outside_no_grad():
    x = tl.tensor(_data(3, 3), requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        x[0].mul_(2)
    with tl.no_grad():
        x[0].mul_(2)                    # allowed, as torch


def _fd(f, a, eps=1e-6):
    g = np.zeros_like(a)
    for i in np.ndindex(*a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        g[i] = (f(a + d) - f(a - d)) / (2 * eps)
    return g


def _program(lib, x, w):
    """A non-leaf base written through views, then read through another view."""
    y = x * 1.5
    y.t()[0].mul_(w[0])                 # column 0 times a weight
    y[1:, 1:].add_(w[1:].unsqueeze(1) * y[:-1, :-1] if lib == "tl" else
                   w[1:].unsqueeze(1) * y[:-1, :-1].clone())
    d = y.diagonal()
    d.copy_(d.exp())
    return (y * y).sum() + y.t()[1].sum()


def _program_np(a, b):
    y = a * 1.5
    y.T[0] *= b[0]
    y[1:, 1:] += b[1:, None] * y[:-1, :-1].copy()
    d = _np_diag(y)
    d[:] = np.exp(d)
    return (y * y).sum() + y.T[1].sum()


def test_gradient_through_views_written_in_place():
    a, b = _data(3, 3, seed=6) * 0.5, _data(3, seed=7) * 0.5
    x = tl.tensor(a, requires_grad=True)
    w = tl.tensor(b, requires_grad=True)
    loss = _program("tl", x, w)
    loss.backward()
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(loss.item(), _program_np(a64, b64), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), _fd(lambda t: _program_np(t, b64), a64),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(w.grad.numpy(), _fd(lambda t: _program_np(a64, t), b64),
                               rtol=1e-4, atol=1e-4)
    if torch is not None:
        tx = torch.tensor(a, requires_grad=True)
        tw = torch.tensor(b, requires_grad=True)
        tloss = _program("torch", tx, tw)
        tloss.backward()
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_gradient_when_base_written_after_view_taken():
    a = _data(2, 3, seed=8)
    x = tl.tensor(a, requires_grad=True)
    y = x * 2.0
    v = y[0]                            # taken before the write: reads the new values
    y.mul_(y)
    loss = (v * 3.0).sum()
    loss.backward()
    g = np.zeros_like(a, dtype=np.float64)
    g[0] = 3.0 * 8.0 * a[0]             # d/dx of 3 * (2x)^2 on row 0
    np.testing.assert_allclose(loss.item(), 3.0 * (4.0 * a[0].astype(np.float64) ** 2).sum(),
                               rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-5)


def test_value_written_into_a_constant_through_a_view_carries_gradient():
    w = tl.tensor(_data(3, seed=9), requires_grad=True)
    buf = tl.tensor(np.zeros((2, 3), np.float32))
    buf[1] = w * 2.0
    buf.t()[0].add_(w[:2])              # column 0 += w[:2]
    buf.sum().backward()
    # sum = 2 * sum(w) + w0 + w1 + w2 over column 0 (rows 0, 1 of col 0 get w[0], w[1])
    np.testing.assert_allclose(w.grad.numpy(), [3.0, 3.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize("case", ["through_view", "sibling", "base_then_view"])
def test_version_counter_raises(case):
    x = tl.tensor(_data(3, 3, seed=10), requires_grad=True)
    w = tl.tensor(_data(3, seed=11), requires_grad=True)
    if case == "through_view":          # exp saved its output; written through a view
        y = x.exp()
        loss = y.sum()
        with tl.no_grad():
            y[0].mul_(2.0)
    elif case == "sibling":             # mul saved view v; a sibling view writes the base
        y = x * 1.0
        v = y[1]
        loss = (v * w).sum()
        y.t()[0].zero_()
    else:                               # mul saved view v; the base itself is written
        y = x * 1.0
        v = y.t()[2]
        loss = (v * w).sum()
        y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_detach_of_view_shares_storage():
    x = tl.tensor(_data(3, 3, seed=12), requires_grad=True)
    d = x.t().detach()
    d[0].fill_(0.0)                     # no grad: reaches x's storage, as torch's .data
    assert np.all(x.numpy()[:, 0] == 0.0)
    assert not d.requires_grad


def test_deterministic_and_exact_modes_write_the_same_bits():
    a = _data(5, 6, seed=13)
    outs = []
    for mode in ("default", "deterministic", "exact"):
        prev_d, prev_e = tl.is_deterministic(), tl.is_exact()
        try:
            tl.set_deterministic(mode != "default")
            tl.set_exact(mode == "exact")
            x = tl.tensor(a)
            x.t()[1:4, ::2].mul_(1.25)
            x[..., 1].add_(x[..., 2])
            outs.append(x.numpy())
        finally:
            tl.set_exact(prev_e)
            tl.set_deterministic(prev_d)
    ref = a.copy()
    ref.T[1:4, ::2] *= np.float32(1.25)
    ref[..., 1] += ref[..., 2]
    for o in outs:
        np.testing.assert_array_equal(o, ref)


def test_views_of_a_storage_never_written_do_not_pile_up():
    """A tensor viewed every step but never written (an input): the views that are gone leave
    no reference behind, so taking a view stays O(live views), not O(views ever taken)."""
    from torchlean import inplace
    x = tl.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    for _ in range(300):
        y = x.transpose(0, 2)
        np.testing.assert_array_equal(y.numpy(), np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 1, 0))
        del y
        live = [r for fam in inplace.FAMILIES.values() for r in fam[1] if r() is not None]
    y = x.transpose(0, 2)                 # one live view: every reference x's family keeps is live
    fam = inplace.FAMILIES[id(x.value.buf)]
    assert len(fam[1]) <= len(live) + 2
    assert all(r() is not None for r in fam[1]), "dead references kept"
