"""Adaptive average pooling to sizes that do not divide the input (torch's uneven, overlapping
windows) against a float64 loop over the windows; gradients by central differences; bad input."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Session


def _ref(x, oh, ow):
    """each output the mean of rows [floor(i H / oh), ceil((i + 1) H / oh)) and likewise cols"""
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow))
    for i in range(oh):
        r0, r1 = int(np.floor(i * h / oh)), int(np.ceil((i + 1) * h / oh))
        for j in range(ow):
            c0, c1 = int(np.floor(j * w / ow)), int(np.ceil((j + 1) * w / ow))
            out[..., i, j] = x[..., r0:r1, c0:c1].mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("shape,size", [((1, 5, 4), 2), ((2, 3, 7, 5), (3, 2)), ((2, 1, 3, 3), (2, 2)),
                                        ((1, 2, 5, 9), (5, 4)), ((3, 1, 1), (1, 3)), ((2, 2, 6, 7), (4, None))])
def test_adaptive_avg_pool2d_uneven_windows(shape, size):
    x = np.random.default_rng(1).uniform(-2, 2, size=shape).astype(np.float32)
    h, w = shape[-2:]
    oh, ow = (size, size) if isinstance(size, int) else size
    oh, ow = (h if oh is None else oh), (w if ow is None else ow)
    s = Session()
    t = s.tensor(x, requires_grad=True)
    y = nn.AdaptiveAvgPool2d(size)(t)
    want = _ref(x.astype(np.float64), oh, ow)
    assert y.shape == want.shape
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    g = np.random.default_rng(2).uniform(-1, 1, size=want.shape)
    (y * s.tensor(g)).sum().backward()
    # the map is linear: its exact adjoint column by column
    est = np.zeros(x.size)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = 1.0
        est[k] = np.sum(g * _ref(e.reshape(shape), oh, ow))
    np.testing.assert_allclose(t.grad.reshape(-1), est, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(F.adaptive_avg_pool2d(s.tensor(x), size).numpy(), y.numpy(), rtol=0, atol=0)


def test_adaptive_avg_pool2d_bad_input():
    s = Session()
    with pytest.raises(ValueError, match=r"adaptive_avg_pool2d: expected input \(N, C, H, W\) or \(C, H, W\), got \(5, 4\)"):
        F.adaptive_avg_pool2d(s.tensor(np.ones((5, 4))), 2)
    with pytest.raises(ValueError, match="must be positive"):
        F.adaptive_avg_pool2d(s.tensor(np.ones((1, 5, 4))), (0, 2))
    with pytest.raises(ValueError, match="output_size must be an int or 2 sizes"):
        F.adaptive_avg_pool2d(s.tensor(np.ones((1, 5, 4))), (1, 2, 3))
