"""A leaf's gradient accumulates over several backward passes, summed into its buffer in place
when nothing else can see that buffer (session.py), else into a new one: a `.grad` Tensor (or a
view of it, or a NumPy array exported from it) read before a later backward keeps the values it
showed, as PyTorch keeps a held gradient that another reference shares; the accumulated values
are the float32 sums either way (references: NumPy float32 additions in the same order)."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.session import Session

RNG = np.random.default_rng(45)


def _leaf(s, shape):
    x = s.tensor(RNG.standard_normal(shape).astype(np.float32))
    x.requires_grad_(True)
    return x


@pytest.mark.parametrize("hold", ["nothing", "tensor", "view", "numpy"])
def test_leaf_gradient_sums_and_held_reads(hold):
    s = Session()
    x = _leaf(s, (3, 5))
    c = [RNG.standard_normal((3, 5)).astype(np.float32) for _ in range(3)]
    want = np.zeros((3, 5), np.float32)
    held, held_np = None, None
    for k in range(3):
        (x * s.tensor(c[k])).sum().backward()
        want = want + c[k] if k else c[k].copy()
        got = np.asarray(x.grad)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), k
        if k == 0 and hold != "nothing":
            held = {"tensor": x.grad, "view": x.grad[1], "numpy": x.grad.numpy()}[hold]
            held_np = np.array(np.asarray(held), copy=True)
    if held is not None:   # a read before the later passes still shows the first gradient
        assert np.array_equal(np.asarray(held), held_np)
        assert np.array_equal(held_np, c[0] if hold != "view" else c[0][1])


def test_parameter_gradient_sums_and_a_held_read():
    s = Session()
    lin = nn.Linear(4, 3)
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    grads = []
    held = None
    for k in range(3):
        with s:
            lin(s.tensor(x * (k + 1))).sum().backward()
        grads.append(np.array(np.asarray(lin.weight.grad), copy=True))
        if k == 0:
            held = lin.weight.grad
    assert np.array_equal(np.asarray(held), grads[0])   # held across two more passes
    # dW of sum(W x_k + b) is the column sums of x_k, the same each pass up to the factor
    per = [np.ones((6, 3), np.float32).T @ (x * (k + 1)) for k in range(3)]
    np.testing.assert_allclose(grads[2], per[0] + per[1] + per[2], rtol=1e-5)
