"""Arguments torch refuses are refused (float sizes, crops past the size, attention masks of
the wrong shape, an LSTM state that is not a pair, Nesterov without momentum, probabilities
outside [0, 1], complex state), with torch's kind of error naming the op; calls torch accepts
work (x / 0, Linear(0, n), kl_div's NaN for a negative target, silu(-inf) = NaN).
References: closed forms and float64 NumPy; torch as an extra check where installed."""
from __future__ import annotations

import math

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.nn import functional as F

RNG = np.random.default_rng(31)


def T(a):
    return tl.tensor(np.asarray(a, np.float32))


# ------------------------------------------------------------------ float sizes: TypeError
@pytest.mark.parametrize("call, op", [
    (lambda: F.pad(T(np.ones((3, 4))), (1.5, 1.5)), "pad"),
    (lambda: F.pad(T(np.ones((3, 4))), (1, 2.0)), "pad"),
    (lambda: F.interpolate(T(np.ones((1, 1, 4, 4))), size=(2.5, 3)), "interpolate"),
    (lambda: F.interpolate(T(np.ones((1, 1, 4, 4))), size=2.0), "interpolate"),
    (lambda: nn.RNN(4, 2.5), "RNN"),
    (lambda: nn.LSTM(4.0, 2), "LSTM"),
    (lambda: nn.GRU(4, 2, num_layers=1.5), "GRU"),
    (lambda: nn.MultiheadAttention(4.5, 2), "MultiheadAttention"),
    (lambda: nn.MultiheadAttention(4, 2.0), "MultiheadAttention"),
    (lambda: F.cross_entropy(T(np.ones((3, 4))), tl.IntTensor(np.array([0, 1, 2])),
                             ignore_index=1.5), "cross_entropy"),
    (lambda: F.nll_loss(T(np.ones((3, 4))), tl.IntTensor(np.array([0, 1, 2])),
                        ignore_index=0.0), "nll_loss"),
    (lambda: nn.Linear(2.5, 3), "Linear"),
    (lambda: nn.Conv2d(1, 2, 2.5), "Conv2d"),
    (lambda: nn.Embedding(3, 2.5), "Embedding"),
    (lambda: nn.BatchNorm1d(2.5), "BatchNorm1d"),
    (lambda: nn.LayerNorm(2.5), "LayerNorm"),
])
def test_float_size_is_a_type_error_naming_the_op(call, op):
    with pytest.raises(TypeError, match=op):
        call()


@pytest.mark.parametrize("call, op", [
    (lambda: nn.Linear(-1, 3), "Linear: in_features must be >= 0"),
    (lambda: nn.Linear(2 ** 70, 3), "Linear: in_features"),
    (lambda: nn.Linear(2 ** 20, 2 ** 20), "Linear: weight of shape"),
    (lambda: nn.Embedding(-1, 2), "Embedding: num_embeddings must be >= 0"),
    (lambda: nn.Conv2d(1, 2 ** 63, 3), "Conv2d: out_channels"),
    (lambda: nn.RNN(4, 2 ** 70), "RNN: hidden_size"),
    (lambda: nn.BatchNorm1d(-1), "BatchNorm1d: num_features must be >= 1"),
    (lambda: F.pad(T(np.ones((2, 2))), (2 ** 70, 0)), "pad: output of shape"),
    (lambda: F.interpolate(T(np.ones((1, 1, 2, 2))), scale_factor=math.inf), "interpolate"),
    (lambda: F.cross_entropy(T(np.ones((2, 2))), tl.IntTensor(np.array([0, 1])),
                             ignore_index=2 ** 70), "cross_entropy: ignore_index"),
])
def test_bad_sizes_raise_value_error_naming_the_op(call, op):
    with pytest.raises(ValueError, match=op):
        call()


# ------------------------------------------------------------------ pad crops
def test_pad_crop_within_the_size_matches_numpy_and_past_it_raises():
    a = RNG.standard_normal((3, 4)).astype(np.float32)
    x = T(a)
    np.testing.assert_array_equal(F.pad(x, (-1, -2)).numpy(), a[:, 1:2])
    assert F.pad(x, (-2, -2)).shape == (3, 0)             # exactly the size: empty, as torch
    np.testing.assert_array_equal(F.pad(x, (-4, 1)).numpy(), np.zeros((3, 1), np.float32))
    np.testing.assert_array_equal(F.pad(x, (-2, 5)).numpy(),
                                  np.pad(a[:, 2:], ((0, 0), (0, 5))))
    for bad in ((-3, -3), (-5, 1), (1, -5), (-5, 6), (0, 0, -2, -2)):
        with pytest.raises(ValueError, match="pad: pads .* crop more than"):
            F.pad(x, bad)


# ------------------------------------------------------------------ attention masks
def test_multihead_attention_refuses_mask_shapes_torch_refuses():
    mha = nn.MultiheadAttention(4, 2)
    q = T(RNG.standard_normal((3, 1, 4)))
    ok = mha(q, q, q, attn_mask=np.zeros((3, 3), bool))[0]
    assert ok.shape == (3, 1, 4)
    assert mha(q, q, q, attn_mask=np.zeros((2, 3, 3), np.float32))[0].shape == (3, 1, 4)
    for shape in [(3,), (1, 3), (3, 1), (1, 3, 3), (2, 1, 3), (1, 1, 3, 3)]:
        with pytest.raises(ValueError, match=rf"MultiheadAttention: attn_mask of shape "
                                             rf"\({shape[0]},"):
            mha(q, q, q, attn_mask=np.zeros(shape, bool))
    with pytest.raises(ValueError, match="MultiheadAttention: attn_mask"):
        mha(q, q, q, attn_mask=T(np.zeros((1, 3))))      # a float Tensor mask too
    with pytest.raises(ValueError, match="MultiheadAttention: key_padding_mask"):
        mha(q, q, q, key_padding_mask=np.zeros((3,), bool))


# ------------------------------------------------------------------ recurrent state
def test_lstm_state_must_be_a_pair_and_rnn_state_one_tensor():
    lstm = nn.LSTM(4, 3)
    x = T(RNG.standard_normal((2, 1, 4)))
    h0 = T(np.zeros((1, 1, 3)))
    out, (h, c) = lstm(x, (h0, h0))
    assert h.shape == (1, 1, 3) and c.shape == (1, 1, 3)
    with pytest.raises(TypeError, match=r"LSTM: hx must be a tuple \(h_0, c_0\)"):
        lstm(x, T(np.zeros((2, 1, 1, 3))))                # one stacked Tensor
    with pytest.raises(TypeError, match="LSTM: hx must be a tuple"):
        lstm(x, (h0, h0, h0))
    with pytest.raises(TypeError, match="GRU: expected h_0 to be one Tensor"):
        nn.GRU(4, 3)(x, (h0,))


# ------------------------------------------------------------------ optimizers, losses
def test_sgd_nesterov_needs_momentum_and_zero_dampening():
    p = [nn.Parameter(np.zeros(2, np.float32))]
    with pytest.raises(ValueError, match="SGD: Nesterov momentum requires a momentum and zero "
                                         "dampening"):
        tl.optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="SGD: Nesterov"):
        tl.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, nesterov=True)
    tl.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True)


@pytest.mark.parametrize("x, y, what", [([0.5, 1.5], [0.5, 0.5], "input"),
                                        ([0.5, -0.1], [0.5, 0.5], "input"),
                                        ([0.5, math.nan], [0.5, 0.5], "input"),
                                        ([0.5, 0.5], [0.5, 1.5], "target"),
                                        ([0.5, 0.5], [-0.5, 0.5], "target")])
def test_binary_cross_entropy_refuses_values_outside_0_1(x, y, what):
    with pytest.raises(RuntimeError, match=f"binary_cross_entropy: all elements of {what} "
                                           "should be between 0 and 1"):
        F.binary_cross_entropy(T(x), T(y))


def test_binary_cross_entropy_at_the_ends_of_0_1_is_torchs_clamped_log():
    got = F.binary_cross_entropy(T([0.0, 1.0, 0.25]), T([1.0, 1.0, 0.0]),
                                 reduction="none").numpy()
    np.testing.assert_allclose(got, [100.0, 0.0, -math.log(0.75)], rtol=1e-6)


def test_kl_div_tensor_target_negative_gives_nan_zero_gives_zero():
    x = np.log(np.array([[0.2, 0.3, 0.5]], np.float64))
    t = np.array([[0.0, 0.5, 0.5]])
    got = F.kl_div(T(x), T(t), reduction="sum").item()
    want = sum(ti * (math.log(ti) - xi) for ti, xi in zip(t[0], x[0]) if ti > 0)
    assert got == pytest.approx(want, rel=1e-6)
    assert math.isnan(F.kl_div(T(x), T([[-0.5, 1.0, 0.5]]), reduction="sum").item())
    got = F.kl_div(T(x), T([[-0.5, 1.0, 0.5]]), reduction="none").numpy()
    assert np.isnan(got[0, 0]) and np.isfinite(got[0, 1:]).all()


# ------------------------------------------------------------------ state_dict
def test_load_state_dict_refuses_complex_values_and_loads_nothing():
    m = nn.Linear(2, 2)
    before = {k: np.array(v) for k, v in m.state_dict().items()}
    sd = {k: np.asarray(v, np.complex64) + 1j for k, v in before.items()}
    with pytest.raises(TypeError, match="load_state_dict: 'weight' holds complex values"):
        m.load_state_dict(sd)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(np.asarray(v), before[k])
    m.load_state_dict({k: np.asarray(v, np.float64) + 1 for k, v in before.items()})
    np.testing.assert_allclose(np.asarray(m.state_dict()["bias"]), before["bias"] + 1)


# ------------------------------------------------------------------ valid calls that work
def test_division_by_zero_is_ieee_as_torch():
    x = T([[0.0, 1.5, -2.0]])
    got = (x / 0).numpy()
    assert np.isnan(got[0, 0]) and got[0, 1] == np.inf and got[0, 2] == -np.inf
    got = (x / -0.0).numpy()
    assert got[0, 1] == -np.inf and got[0, 2] == np.inf
    w = tl.tensor([[0.0, 1.5, -2.0]], requires_grad=True)
    (w / 0).sum().backward()
    assert np.all(np.isinf(w.grad.numpy() if hasattr(w.grad, "numpy") else np.asarray(w.grad)))
    np.testing.assert_allclose((x / 4).numpy(), [[0.0, 0.375, -0.5]])


def test_linear_and_conv_with_zero_inputs_give_the_bias():
    m = nn.Linear(0, 3)
    y = m(T(np.ones((2, 0))))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(np.asarray(m.bias.numpy()),
                                                              (2, 3)))
    assert np.all(np.asarray(m.bias.numpy()) == 0)        # bound 1/sqrt(0) taken as 0
    assert nn.Conv2d(0, 2, 3).weight.shape == (2, 0, 3, 3)


def test_silu_of_minus_inf_is_nan_as_torch():
    y = F.silu(T([-math.inf, math.inf, math.nan, -200.0, 0.0, 2.0])).numpy()
    assert np.isnan(y[0]) and y[1] == math.inf and np.isnan(y[2])
    assert y[3] == 0.0 and np.signbit(y[3])                # -200 * sigmoid(-200) = -0
    assert y[5] == pytest.approx(2.0 / (1.0 + math.exp(-2.0)), rel=1e-6)


def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as TF
    xs = [-math.inf, math.inf, -200.0, 0.5]
    np.testing.assert_array_equal(F.silu(T(xs)).numpy(), TF.silu(torch.tensor(xs)).numpy())
    with pytest.raises(RuntimeError):
        TF.pad(torch.ones(3, 4), (-3, -3))
    with pytest.raises(TypeError):
        TF.pad(torch.ones(3, 4), (1.5, 1.5))
    with pytest.raises(ValueError):
        torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.1, nesterov=True)
    with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
        TF.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([1.5]))
