"""nn.functional.linear: PyTorch's y = x W^T + b through the fused `linear` op, any leading dims.

References are float64 NumPy; gradients are checked against central finite differences of the
float64 loss sum(y * r) for a fixed random r."""
import numpy as np
import pytest

from torchlean import nn
from torchlean.nn import functional as F
from torchlean.session import Parameter, Session


def _ref(x, w, b):
    y = x.astype(np.float64) @ w.astype(np.float64).T
    return y if b is None else y + b.astype(np.float64)


def _fd(f, a, eps=1e-4):
    """Central differences of the scalar f at every element of the float64 array a."""
    g = np.zeros_like(a)
    for i in np.ndindex(a.shape):
        old = a[i]
        a[i] = old + eps
        hi = f()
        a[i] = old - eps
        lo = f()
        a[i] = old
        g[i] = (hi - lo) / (2 * eps)
    return g


def _ops_recorded(s):
    return [n.name for n in s.tape.nodes if n.parents]


SHAPES = [((5,), 3), ((1,), 1), ((4, 5), 3), ((1, 1), 2), ((2, 3, 5), 4), ((2, 1, 3, 7), 3),
          ((3, 2, 1, 2, 5), 1)]


@pytest.mark.parametrize("xshape,out", SHAPES, ids=lambda v: "x".join(map(str, v))
                         if isinstance(v, tuple) else str(v))
@pytest.mark.parametrize("with_bias", [True, False])
def test_forward_and_grads(xshape, out, with_bias):
    rng = np.random.default_rng(len(xshape) * 100 + out * 10 + with_bias)
    fin = xshape[-1]
    x = rng.standard_normal(xshape).astype(np.float32)
    w = rng.standard_normal((out, fin)).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32) if with_bias else None
    r = rng.standard_normal(xshape[:-1] + (out,))
    s = Session()
    xt = s.tensor(x, requires_grad=True)
    wp = Parameter(w)
    bp = Parameter(b) if with_bias else None
    y = F.linear(xt, wp, bp)
    assert y.shape == xshape[:-1] + (out,)
    np.testing.assert_allclose(y.numpy(), _ref(x, w, b), rtol=1e-5, atol=1e-5)
    assert _ops_recorded(s).count("linear") == 1 and "matmul" not in _ops_recorded(s)
    (y * s.tensor(r.astype(np.float32))).sum().backward()

    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    b64 = None if b is None else b.astype(np.float64)
    loss = lambda: float(np.sum(_ref(x64, w64, b64) * r))
    np.testing.assert_allclose(xt.grad, _fd(loss, x64), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(wp.grad, _fd(loss, w64), rtol=1e-4, atol=1e-4)
    if with_bias:
        np.testing.assert_allclose(bp.grad, _fd(loss, b64), rtol=1e-4, atol=1e-4)
    s.step()


def test_zero_rows_in_leading_dims():
    s = Session()
    y = F.linear(s.tensor(np.ones((2, 0, 3))), Parameter(np.ones((4, 3))), None)
    assert y.shape == (2, 0, 4)


def test_module_uses_the_fused_op():
    s = Session()
    m = nn.Linear(6, 2)
    x = np.random.default_rng(3).standard_normal((3, 4, 6)).astype(np.float32)
    y = m(s.tensor(x))
    np.testing.assert_allclose(y.numpy(), _ref(x, m.weight.numpy(), m.bias.numpy()), rtol=1e-5,
                               atol=1e-5)
    assert _ops_recorded(s) == ["reshape", "linear", "reshape"]


@pytest.mark.parametrize("xshape,wshape,bshape", [
    ((3, 4), (2, 5), None),          # in differs
    ((3, 2, 4), (2, 5), (2,)),       # in differs, leading dims
    ((4,), (2, 4), (3,)),            # bias length
    ((4,), (2, 4), (1, 2)),          # bias rank
    ((), (2, 1), None),              # 0-d input
    ((3, 4), (4,), None),            # 1-d weight
])
def test_errors_name_linear_and_shapes(xshape, wshape, bshape):
    s = Session()
    x = s.tensor(np.ones(xshape))
    b = None if bshape is None else Parameter(np.ones(bshape))
    with pytest.raises(ValueError, match=r"^linear: expected.*got input") as e:
        F.linear(x, Parameter(np.ones(wshape)), b)
    msg = str(e.value)
    assert str(tuple(xshape)) in msg and str(tuple(wshape)) in msg
    assert "matmul" not in msg and "reshape" not in msg
