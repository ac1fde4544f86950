"""torch.nn losses (functional and module forms) against float64 NumPy references of torch's
documented formulas, gradients against central finite differences of those references."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session


def _rng(seed):
    return np.random.default_rng(seed)


def _fd_grad(fref, a, eps=1e-4):
    """Central differences of the scalar fref at every coordinate of a (float64)."""
    a = a.astype(np.float64)
    g = np.zeros_like(a)
    for i in range(a.size):
        p, m = a.copy().reshape(-1), a.copy().reshape(-1)
        p[i] += eps
        m[i] -= eps
        g.reshape(-1)[i] = (fref(p.reshape(a.shape)) - fref(m.reshape(a.shape))) / (2 * eps)
    return g


def _check(fn, fref, a, *, rtol=1e-5, atol=1e-6, grad=True, gtol=2e-3):
    """fn(x Tensor) vs fref(float64 array): value, and the gradient of sum(w * out)."""
    s = Session()
    x = s.tensor(a, requires_grad=True)
    y = fn(x)
    ref = fref(a.astype(np.float64))
    np.testing.assert_allclose(y.numpy(), ref, rtol=rtol, atol=atol)
    if grad:
        w = _rng(99).uniform(0.5, 1.5, size=np.shape(ref))
        (y * s.tensor(w)).sum().backward()
        fd = _fd_grad(lambda v: np.sum(w * fref(v)), a)
        np.testing.assert_allclose(x.grad, fd, rtol=gtol, atol=gtol)


def _reduce(v, reduction):
    return {"mean": np.mean, "sum": np.sum, "none": lambda u: u}[reduction](v)


def _log_softmax(z, axis):
    m = z.max(axis=axis, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(axis=axis, keepdims=True))


# ------------------------------------------------------------------- cross-entropy / NLL

def _ce_ref(z, y, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """torch's cross_entropy with class indices: class axis 1 (0 for 1-D logits)."""
    cdim = 0 if z.ndim == 1 else 1
    lp = np.moveaxis(_log_softmax(z, cdim), cdim, -1)            # (..., C)
    c = lp.shape[-1]
    w = np.ones(c) if weight is None else np.asarray(weight, np.float64)
    keep = y != ignore_index
    ys = np.where(keep, y, 0)
    picked = np.take_along_axis(lp, ys[..., None], -1)[..., 0]
    nll = np.where(keep, -w[ys] * picked, 0.0)
    smooth = np.where(keep, -(lp * w).sum(-1), 0.0)
    denom = np.sum(np.where(keep, w[ys], 0.0))
    if reduction == "none":
        return (1 - label_smoothing) * nll + label_smoothing / c * smooth
    if reduction == "sum":
        return (1 - label_smoothing) * nll.sum() + label_smoothing / c * smooth.sum()
    return ((1 - label_smoothing) * nll.sum() + label_smoothing / c * smooth.sum()) / denom


@pytest.mark.parametrize("shape", [(5, 4), (1, 1), (3, 7), (7,), (2, 3, 4), (2, 5, 3, 2)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_shapes_and_reductions(shape, reduction):
    z = _rng(1).normal(size=shape) * 2
    c = shape[0] if len(shape) == 1 else shape[1]
    lshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    y = _rng(2).integers(0, c, size=lshape)
    _check(lambda x: F.cross_entropy(x, y, reduction=reduction),
           lambda v: _ce_ref(v, y, reduction=reduction), z)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_weight_ignore_index_and_label_smoothing(reduction):
    z = _rng(3).normal(size=(6, 5, 3))
    y = _rng(4).integers(0, 5, size=(6, 3))
    y[0, 1] = y[4, 2] = 7
    w = _rng(5).uniform(0.2, 2.0, size=5)
    kw = dict(weight=w, ignore_index=7, reduction=reduction, label_smoothing=0.15)
    _check(lambda x: F.cross_entropy(x, y, **kw), lambda v: _ce_ref(v, y, **kw), z)
    loss = nn.CrossEntropyLoss(**kw)
    _check(lambda x: loss(x, y), lambda v: _ce_ref(v, y, **kw), z)


def test_cross_entropy_all_ignored_mean_is_nan_as_torch():
    s = Session()
    out = F.cross_entropy(s.tensor(np.ones((2, 3))), np.array([-100, -100]))
    assert np.isnan(out.item())
    assert F.cross_entropy(s.tensor(np.ones((2, 3))), np.array([-100, -100]),
                           reduction="sum").item() == 0.0


def test_cross_entropy_probability_targets():
    z = _rng(6).normal(size=(4, 5))
    t = _rng(7).dirichlet(np.ones(5), size=4)
    w = _rng(8).uniform(0.5, 2, size=5)

    def ref(v, reduction, eps=0.0, weight=None):
        tt = t * (1 - eps) + eps / 5
        per = -(_log_softmax(v, 1) * tt * (np.ones(5) if weight is None else weight)).sum(1)
        return _reduce(per, reduction)
    for reduction in ("mean", "sum", "none"):
        _check(lambda x: F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.1,
                                         weight=w),
               lambda v: ref(v, reduction, 0.1, w), z)


def test_cross_entropy_accepts_label_objects_with_numpy():
    class Labels:                       # an int64 Tensor-like object
        def numpy(self):
            return np.array([2, 0, 1], np.int64)
    z = _rng(9).normal(size=(3, 4))
    s = Session()
    got = F.cross_entropy(s.tensor(z), Labels()).item()
    assert got == pytest.approx(_ce_ref(z, np.array([2, 0, 1])), rel=1e-5)
    got = F.cross_entropy(s.tensor(z), [2, 0, 1]).item()
    assert got == pytest.approx(_ce_ref(z, np.array([2, 0, 1])), rel=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_matches_reference(reduction):
    lp = _log_softmax(_rng(10).normal(size=(5, 4, 3)), 1)
    y = _rng(11).integers(0, 4, size=(5, 3))
    y[1, 1] = -100
    w = _rng(12).uniform(0.5, 2, size=4)

    def ref(v):
        keep = y != -100
        ys = np.where(keep, y, 0)
        per = np.where(keep, -w[ys] * np.take_along_axis(v, ys[:, None], 1)[:, 0], 0.0)
        return per if reduction == "none" else per.sum() / (
            np.sum(np.where(keep, w[ys], 0)) if reduction == "mean" else 1.0)
    _check(lambda x: F.nll_loss(x, y, weight=w, reduction=reduction), ref, lp)
    _check(lambda x: nn.NLLLoss(weight=w, reduction=reduction)(x, y), ref, lp)


@pytest.mark.parametrize("labels, exc, msg", [
    (np.array([0, 5, 1]), IndexError, r"label 5 at row 1 is out of range for 4 classes"),
    (np.array([0, 5, 1]), ValueError, r"out of range"),
    (np.array([0.0, 1.0, 2.0]), TypeError, r"integer array, got dtype float64"),
    (np.array([[0, 1, 2]]), ValueError, r"shape \(3,\) for logits \(3, 4\), got shape \(1, 3\)"),
])
def test_class_label_errors(labels, exc, msg):
    s = Session()
    with pytest.raises(exc, match=msg):
        F.cross_entropy(s.tensor(np.ones((3, 4))), labels)
    with pytest.raises(exc, match=msg.replace("logits", "input")):
        F.nll_loss(s.tensor(np.ones((3, 4))), labels)


def test_float_tensor_labels_raise_type_error():
    s = Session()
    with pytest.raises(TypeError, match="cross_entropy: labels must be an integer array, got "
                                        "float32 Tensor"):
        F.cross_entropy(s.tensor(np.ones((3, 4))), s.tensor(np.array([0.0, 1.0, 2.0])))


def test_bad_options_raise():
    with pytest.raises(ValueError, match="reduction must be one of"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        nn.CrossEntropyLoss(label_smoothing=1.5)
    with pytest.raises(ValueError, match="weight must hold one value per class, shape \\(4,\\)"):
        F.cross_entropy(Session().tensor(np.ones((3, 4))), np.array([0, 1, 2]), weight=np.ones(3))
    with pytest.raises(ValueError, match="HuberLoss: delta must be > 0"):
        nn.HuberLoss(delta=0)
    with pytest.raises(ValueError, match="SmoothL1Loss: beta must be >= 0"):
        nn.SmoothL1Loss(beta=-1)
    with pytest.raises(ValueError, match=r"L1Loss: input \(3, 4\) and target \(4,\)"):
        nn.L1Loss()(Session().tensor(np.ones((3, 4))), np.ones(4))
    with pytest.raises(ValueError, match="'batchmean'"):
        nn.L1Loss(reduction="batchmean")


# ------------------------------------------------------------------- pointwise losses

def _pointwise_cases():
    a = _rng(20).normal(size=(3, 5)) * 2
    t = _rng(21).normal(size=(3, 5)) * 2
    t[0, 0] = a[0, 0] + 0.3          # |d| below beta / delta
    return a, t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_l1_smooth_l1_and_huber(reduction):
    a, t = _pointwise_cases()
    _check(lambda x: F.l1_loss(x, t, reduction=reduction),
           lambda v: _reduce(np.abs(v - t), reduction), a)
    for beta in (1.0, 0.5, 0.0):
        def sl1(v, beta=beta):
            d = np.abs(v - t)
            per = d if beta == 0 else np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta)
            return _reduce(per, reduction)
        _check(lambda x, beta=beta: nn.SmoothL1Loss(reduction=reduction, beta=beta)(x, t), sl1, a)
    for delta in (1.0, 2.5):
        def hub(v, delta=delta):
            d = np.abs(v - t)
            return _reduce(np.where(d <= delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)
        _check(lambda x, delta=delta: F.huber_loss(x, t, reduction=reduction, delta=delta), hub, a)
        _check(lambda x, delta=delta: nn.HuberLoss(reduction, delta)(x, t), hub, a)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction):
    p = _rng(22).uniform(0.05, 0.95, size=(4, 3))
    t = _rng(23).uniform(0, 1, size=(4, 3))
    w = _rng(24).uniform(0.5, 2, size=(3,))

    def ref(v):
        return _reduce(-w * (t * np.log(v) + (1 - t) * np.log(1 - v)), reduction)
    _check(lambda x: F.binary_cross_entropy(x, t, weight=w, reduction=reduction), ref, p,
           rtol=2e-5)
    _check(lambda x: nn.BCELoss(weight=w, reduction=reduction)(x, t), ref, p, rtol=2e-5)


def test_binary_cross_entropy_clamps_log_at_minus_100():
    s = Session()
    out = F.binary_cross_entropy(s.tensor(np.array([0.0, 1.0, 0.5])), np.array([1.0, 0.0, 1.0]),
                                 reduction="none").numpy()
    np.testing.assert_allclose(out, [100.0, 100.0, np.log(2)], rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits_and_pos_weight(reduction):
    z = _rng(25).normal(size=(5, 3)) * 4
    z[0, 0], z[1, 1] = 60.0, -60.0               # stable far out
    t = _rng(26).uniform(0, 1, size=(5, 3))
    pw = _rng(27).uniform(0.5, 3, size=(3,))
    w = _rng(28).uniform(0.5, 2, size=(5, 1))

    def logsig(v):
        return -np.logaddexp(0.0, -v)

    def ref(v, pos=None):
        pos = np.ones(3) if pos is None else pos
        return _reduce(-w * (pos * t * logsig(v) + (1 - t) * logsig(-v)), reduction)
    _check(lambda x: F.binary_cross_entropy_with_logits(x, t, weight=w, reduction=reduction),
           ref, z)
    _check(lambda x: nn.BCEWithLogitsLoss(weight=w, reduction=reduction, pos_weight=pw)(x, t),
           lambda v: ref(v, pw), z)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = _log_softmax(_rng(29).normal(size=(4, 5)), 1)
    t = _rng(30).dirichlet(np.ones(5), size=4)
    t[0, 2] = 0.0
    tt = np.log(t + 1e-3) if log_target else t

    def ref(v):
        if log_target:
            per = np.exp(tt) * (tt - v)
        else:
            per = np.where(tt > 0, tt * np.log(np.where(tt > 0, tt, 1)), 0.0) - tt * v
        return per.sum() / 4 if reduction == "batchmean" else _reduce(per, reduction)
    _check(lambda x_: F.kl_div(x_, tt, reduction=reduction, log_target=log_target), ref, x)
    # a Tensor target takes the on-device t log t path
    _check(lambda x_: nn.KLDivLoss(reduction=reduction, log_target=log_target)(
        x_, x_.session.tensor(tt)), ref, x)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_mse_functional_reduction(reduction):
    a, t = _pointwise_cases()
    _check(lambda x: F.mse_loss(x, t, reduction=reduction),
           lambda v: _reduce((v - t) ** 2, reduction), a)
