import numpy as np
import pytest

from torchlean import optim
from torchlean.session import Session, Parameter


def _grad_step(opt, w, t):
    s = Session()
    d = s.use(w) - s.tensor(t)
    (d * d).sum().backward()
    opt.step()
    opt.zero_grad()
    s.step()


@pytest.mark.parametrize("cls,decoupled", [(optim.Adam, False), (optim.AdamW, True)])
def test_adam_matches_numpy_reference(cls, decoupled):
    w0 = np.array([0.5, -1.0, 2.0], np.float64)
    t = np.array([1.0, 0.0, -1.0], np.float32)
    w = Parameter(w0)
    lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.1
    opt = cls([w], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    m = v = np.zeros(3)
    ref = w0.copy()
    for step in range(1, 4):
        _grad_step(opt, w, t)
        g = 2 * (ref - t)
        if not decoupled:
            g = g + wd * ref
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if decoupled:
            ref = ref - lr * wd * ref
        ref = ref - lr * (m / (1 - b1 ** step)) / (np.sqrt(v / (1 - b2 ** step)) + eps)
    np.testing.assert_allclose(w.data, ref, rtol=1e-5, atol=1e-6)


def test_sgd_momentum_nesterov_matches_reference():
    w0 = np.array([0.5, -1.0], np.float64)
    t = np.array([1.0, 0.0], np.float32)
    w = Parameter(w0)
    lr, mom, wd = 0.1, 0.9, 0.01
    opt = optim.SGD([w], lr=lr, momentum=mom, weight_decay=wd, nesterov=True)
    ref, buf = w0.copy(), None
    for _ in range(3):
        _grad_step(opt, w, t)
        g = 2 * (ref - t) + wd * ref
        buf = g.copy() if buf is None else mom * buf + g
        ref = ref - lr * (g + mom * buf)
    np.testing.assert_allclose(w.data, ref, rtol=1e-5, atol=1e-6)


def test_bad_hyperparameters():
    with pytest.raises(ValueError):
        optim.SGD([], lr=-1.0)
    with pytest.raises(ValueError):
        optim.Adam([], betas=(1.0, 0.9))


def test_state_stays_on_device():
    from torchlean.buffer import AnyBuffer
    w = Parameter(np.zeros(2))
    opt = optim.Adam([w], lr=0.1)
    _grad_step(opt, w, np.ones(2, np.float32))
    st = opt.state[id(w)]
    assert isinstance(st["m"], AnyBuffer) and isinstance(st["v"], AnyBuffer)
