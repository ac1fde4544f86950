"""The fused transformer ops through their public paths: F.cross_entropy's plain case takes
cross_entropy_rows (compared with float64 references, closed-form gradients, central finite
differences and the composite path), including ignored rows, NaN/inf rows, one class, odd vocab
sizes and bad labels. The registry cases (tests/test_registry_ops.py) cover the op itself."""
import numpy as np
import pytest

import torchlean as tl
from torchlean.nn import functional as F
from torchlean.nn import fused
from torchlean.nn.loss_functions import TargetOutOfRange
from torchlean.session import Session


def _ce64(z, y, ignore_index=-100):
    """Per-row loss and d(sum of loss)/dz in float64; ignored rows give 0 and 0."""
    z = z.astype(np.float64)
    m = z.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(z - m).sum(axis=1))
    keep = y != ignore_index
    ys = np.where(keep, y, 0)
    loss = np.where(keep, lse - z[np.arange(len(y)), ys], 0.0)
    p = np.exp(z - lse[:, None])
    p[np.arange(len(y)), ys] -= 1.0
    return loss, p * keep[:, None]


def _run(z, y, reduction="mean", **kw):
    s = Session()
    x = s.tensor(z, requires_grad=True)
    out = F.cross_entropy(x, y, reduction=reduction, **kw)
    (out.sum() if reduction == "none" else out).backward()
    return out.numpy(), x.grad.numpy()


@pytest.mark.parametrize("n,v", [(1, 1), (1, 7), (5, 263), (3, 1031), (17, 64)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_plain_cross_entropy_matches_float64_and_closed_form_gradient(n, v, reduction):
    rng = np.random.default_rng(n * 1000 + v)
    z = rng.normal(0, 3, (n, v)).astype(np.float32)
    y = rng.integers(0, v, n)
    loss, grad = _ce64(z, y)
    scale = 1.0 / n if reduction == "mean" else 1.0
    want = {"mean": loss.mean(), "sum": loss.sum(), "none": loss}[reduction]
    got, g = _run(z, y, reduction)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(g, grad * scale, rtol=1e-5, atol=1e-6)


def test_gradient_matches_central_differences():
    rng = np.random.default_rng(3)
    z = rng.normal(0, 1, (4, 9)).astype(np.float32)
    y = np.array([8, 0, 4, 4])
    _, g = _run(z, y)
    fd = np.zeros((4, 9))
    for i in range(z.size):
        for sgn in (1, -1):
            zz = z.astype(np.float64).copy().reshape(-1)
            zz[i] += sgn * 1e-5
            fd.reshape(-1)[i] += sgn * _ce64(zz.reshape(4, 9), y)[0].mean() / 2e-5
    np.testing.assert_allclose(g, fd, rtol=1e-4, atol=1e-6)


def test_ignore_index_rows_give_zero_loss_and_gradient_and_leave_the_mean():
    rng = np.random.default_rng(5)
    z = rng.normal(0, 2, (6, 11)).astype(np.float32)
    y = np.array([3, -100, 10, -100, 0, 5])
    loss, grad = _ce64(z, y)
    got, g = _run(z, y)
    np.testing.assert_allclose(got, loss.sum() / 4, rtol=2e-6)
    np.testing.assert_allclose(g, grad / 4, rtol=1e-5, atol=1e-7)
    assert not g[[1, 3]].any()
    y2 = np.where(y == -100, 0, y)          # -100 is now an ordinary (bad) label: not allowed
    with pytest.raises(TargetOutOfRange, match=r"cross_entropy: label -100 at row 1"):
        _run(z, y, ignore_index=10)
    got, g = _run(z, y2, "none", ignore_index=10)
    assert got[2] == 0.0 and not g[2].any()
    got, _ = _run(z, np.full(6, 7), ignore_index=7)
    assert np.isnan(got)                    # torch: every row ignored gives 0 / 0


def test_nan_and_inf_rows_stay_in_their_rows():
    z = np.zeros((4, 5), np.float32)
    z[0, 2] = np.nan
    z[1, 4] = np.inf
    z[2, 1] = -np.inf
    y = np.array([1, 0, 3, 2])
    got, g = _run(z, y, "none")
    assert np.isnan(got[0]) and np.isnan(got[1])
    np.testing.assert_allclose(got[2:], [np.log(4.0), np.log(5.0)], rtol=1e-6)
    assert np.isnan(g[:2]).all()
    assert g[2, 1] == 0.0 and np.isfinite(g[2:]).all()


def test_fused_and_composite_paths_agree():
    rng = np.random.default_rng(11)
    z = rng.normal(0, 4, (9, 301)).astype(np.float32)
    y = rng.integers(0, 301, 9)
    y[4] = -100
    one = _run(z, y)
    fused.enabled = False
    try:
        composite = _run(z, y)
    finally:
        fused.enabled = True
    np.testing.assert_allclose(one[0], composite[0], rtol=1e-6)
    np.testing.assert_allclose(one[1], composite[1], rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("exact", [False, True])
def test_bits_repeat_run_to_run(exact):
    rng = np.random.default_rng(2)
    z = rng.normal(0, 3, (7, 777)).astype(np.float32)
    y = rng.integers(0, 777, 7)
    before = tl.is_exact(), tl.is_deterministic()
    tl.set_exact(exact)
    tl.set_deterministic(True)
    try:
        a, b = _run(z, y), _run(z, y)
    finally:
        tl.set_deterministic(before[1])
        tl.set_exact(before[0])
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def test_bad_labels_name_the_op_and_shapes():
    z = np.zeros((3, 4), np.float32)
    with pytest.raises(TargetOutOfRange, match=r"cross_entropy: label 4 at row 2 .* 4 classes"):
        _run(z, np.array([0, 1, 4]))
    with pytest.raises(ValueError, match=r"cross_entropy: .*shape \(3,\) for logits \(3, 4\), got "
                                         r"shape \(2,\)"):
        _run(z, np.array([0, 1]))
    with pytest.raises(TypeError, match="cross_entropy: labels must be an integer array"):
        _run(z, np.array([0.0, 1.0, 2.0]))


# ----------------------------------------------------------------------------- linear_gelu

def _gelu64(z):
    return 0.5 * z * (1.0 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))


def _linear_gelu(shape, din, dout, use_fused=True, seed=0):
    from torchlean import nn
    from torchlean.session import manual_seed
    manual_seed(seed)
    lin = nn.Linear(din, dout)
    s = Session()
    xa = np.random.default_rng(seed).normal(0, 1, shape + (din,)).astype(np.float32)
    x = s.tensor(xa, requires_grad=True)
    fused.enabled = use_fused
    try:
        y = fused.linear_gelu(lin, x)
    finally:
        fused.enabled = True
    wts = np.random.default_rng(seed + 1).uniform(0.5, 1.5, y.shape).astype(np.float32)
    (y * s.tensor(wts)).sum().backward()
    return lin, xa, wts, y.numpy(), x.grad.numpy(), lin.weight.grad.numpy(), lin.bias.grad.numpy()


@pytest.mark.parametrize("shape,din,dout", [((5,), 7, 9), ((1,), 1, 1), ((2, 3), 8, 16), ((), 4, 3)])
def test_linear_gelu_matches_float64_and_the_unfused_bits(shape, din, dout):
    lin, xa, wts, y, gx, gw, gb = _linear_gelu(shape, din, dout)
    w = lin.weight.numpy().astype(np.float64)
    b = lin.bias.numpy().astype(np.float64)
    z = xa.astype(np.float64) @ w.T + b
    np.testing.assert_allclose(y, _gelu64(z), rtol=1e-5, atol=1e-6)
    h = 1e-6                                       # d gelu / dz by central differences
    dz = wts * (_gelu64(z + h) - _gelu64(z - h)) / (2 * h)
    np.testing.assert_allclose(gx, dz @ w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, dz.reshape(-1, dout).T @ xa.reshape(-1, din), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(gb, dz.reshape(-1, dout).sum(0), rtol=1e-4, atol=1e-5)
    unfused = _linear_gelu(shape, din, dout, use_fused=False)
    for a, b_ in zip((y, gx, gw, gb), unfused[3:]):
        assert a.tobytes() == b_.tobytes()         # the stub runs linear then gelu: same bits


def test_linear_gelu_names_the_shapes_on_bad_input():
    from torchlean import nn
    lin = nn.Linear(4, 3)
    x = Session().tensor(np.zeros((2, 5), np.float32))
    with pytest.raises(ValueError, match=r"linear_gelu: expected input \(\.\.\., 4\) for weight "
                                         r"\(3, 4\), got input \(2, 5\)"):
        fused.linear_gelu(lin, x)


def test_linear_gelu_activation_is_freed_and_recomputed_with_the_same_gradients(monkeypatch):
    import gc
    from torchlean import tape
    monkeypatch.setattr(tape, "KEEP_ACTIVATIONS", False)   # recompute (CUDA's default)
    from torchlean import nn
    from torchlean.session import manual_seed
    x = np.random.default_rng(4).normal(size=(6, 5)).astype(np.float32)
    grads = []
    for use_fused in (True, False):
        manual_seed(0)
        ff1, ff2 = nn.Linear(5, 8), nn.Linear(8, 3)
        s = Session()
        fused.enabled = use_fused
        try:
            loss = ff2(fused.linear_gelu(ff1, s.tensor(x))).sum()
        finally:
            fused.enabled = True
        gc.collect()
        stale = {n.name for n in s.tape.nodes if n.stale}
        assert ("linear_gelu" if use_fused else "gelu") in stale, stale
        loss.backward()
        grads.append([p.grad.numpy().tobytes() for p in (ff1.weight, ff1.bias, ff2.weight, ff2.bias)])
    assert grads[0] == grads[1]


# ----------------------------------------------------------------------------- linear_residual

def _linear_residual(shape, din, dout, use_fused=True, seed=0):
    from torchlean import nn
    from torchlean.session import manual_seed
    manual_seed(seed)
    lin = nn.Linear(din, dout)
    s = Session()
    rng = np.random.default_rng(seed)
    xa = rng.normal(0, 1, shape + (din,)).astype(np.float32)
    ra = rng.normal(0, 1, shape + (dout,)).astype(np.float32)
    x, r = s.tensor(xa, requires_grad=True), s.tensor(ra, requires_grad=True)
    fused.enabled = use_fused
    try:
        y = fused.linear_residual(lin, x, r)
    finally:
        fused.enabled = True
    wts = np.random.default_rng(seed + 1).uniform(0.5, 1.5, y.shape).astype(np.float32)
    (y * s.tensor(wts)).sum().backward()
    return lin, xa, ra, wts, y.numpy(), x.grad.numpy(), r.grad.numpy(), lin.weight.grad.numpy(), lin.bias.grad.numpy()


@pytest.mark.parametrize("shape,din,dout", [((5,), 7, 9), ((1,), 1, 1), ((2, 3), 8, 16),
                                            ((), 4, 3), ((67,), 33, 20)])
@pytest.mark.parametrize("deterministic", [False, True])
def test_linear_residual_matches_float64_and_the_unfused_bits(shape, din, dout, deterministic):
    """linear(x) + r as one op against float64 (value and all four gradients); in
    deterministic mode (and on the stub) the same bits as linear then add."""
    was = tl.is_deterministic()
    tl.set_deterministic(deterministic)
    try:
        lin, xa, ra, wts, y, gx, gr, gw, gb = _linear_residual(shape, din, dout)
        unfused = _linear_residual(shape, din, dout, use_fused=False)
    finally:
        tl.set_deterministic(was)
    w = lin.weight.numpy().astype(np.float64)
    b = lin.bias.numpy().astype(np.float64)
    want = xa.astype(np.float64) @ w.T + b + ra
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    g = wts.astype(np.float64)
    np.testing.assert_array_equal(gr, wts)          # d/dr is the seed itself
    np.testing.assert_allclose(gx, g @ w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw, g.reshape(-1, dout).T @ xa.reshape(-1, din), rtol=1e-4,
                               atol=1e-5)
    np.testing.assert_allclose(gb, g.reshape(-1, dout).sum(0), rtol=1e-4, atol=1e-5)
    if deterministic or tl.backend() == "stub":
        for a, b_ in zip((y, gx, gr, gw, gb), unfused[4:]):
            assert a.tobytes() == b_.tobytes()     # linear's kernel then add's: same bits


def test_linear_residual_names_the_shapes_on_bad_input():
    from torchlean import nn
    lin = nn.Linear(4, 3)
    s = Session()
    x = s.tensor(np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"linear_residual: expected input \(\.\.\., 4\) and "
                                         r"residual \(\.\.\., 3\) of the same leading shape for "
                                         r"weight \(3, 4\), got input \(2, 4\) and residual "
                                         r"\(2, 4\)"):
        fused.linear_residual(lin, x, s.tensor(np.zeros((2, 4), np.float32)))


def test_linear_residual_propagates_nan_and_inf_as_linear_then_add():
    """Special values in x, r and the weight reach y as float64 linear(x) + r does: NaN where
    any term is NaN or inf meets -inf, +-inf where one infinite term dominates."""
    from torchlean import nn
    s = Session()
    lin = nn.Linear(3, 4)
    w = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]], np.float32)
    lin.weight.set(w)
    lin.bias.set(np.zeros(4, np.float32))
    xa = np.array([[np.nan, 1, 2], [np.inf, -1, 0], [1, 2, 3], [1e30, 1e30, 0]], np.float32)
    ra = np.array([[0, 0, 0, 0], [0, 0, 0, -np.inf], [np.inf, -np.inf, np.nan, 0],
                   [0, 0, 0, 0]], np.float32)
    y = fused.linear_residual(lin, s.tensor(xa), s.tensor(ra)).numpy()
    with np.errstate(invalid="ignore", over="ignore"):
        want = (xa.astype(np.float64) @ w.T.astype(np.float64) + ra).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_array_equal(y[~np.isnan(want)], want[~np.isnan(want)])
