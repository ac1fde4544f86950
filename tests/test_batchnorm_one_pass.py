"""BatchNorm's training forward runs its kernel once: the batch mean and variance the kernel
returns (residuals no VJP reads) reach the running statistics through the tape op's hand_back
list. Checked against float64 NumPy, against the bits of the former second kernel call, with
NaN, odd sizes and N = 1, and for leaks of the handed-back buffers."""
from __future__ import annotations

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean._generated import ops as _ops
from torchlean.session import Session, manual_seed


def _count_kernel_calls(monkeypatch):
    calls = []
    real = _ops.batchnorm_channel_first

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(_ops, "batchnorm_channel_first", counted)
    return calls


def _running_ref(xs, momentum, axes):
    """float64 running mean / unbiased-variance updates, torch's rule."""
    c = xs[0].shape[-3]
    rm, rv = np.zeros(c), np.ones(c)
    for t, x in enumerate(xs, 1):
        x64 = x.astype(np.float64)
        n = x.size // c
        m = 1.0 / t if momentum is None else momentum
        rm = (1 - m) * rm + m * x64.mean(axis=axes)
        rv = (1 - m) * rv + m * x64.var(axis=axes) * n / (n - 1)
    return rm, rv


@pytest.mark.parametrize("shape,momentum", [((5, 3, 7, 3), 0.1), ((1, 2, 1, 3), 0.25),
                                            ((3, 1, 2), None), ((2, 4, 1, 1), 0.5)])
def test_training_forward_runs_the_kernel_once_and_matches_float64(monkeypatch, shape, momentum):
    manual_seed(0)
    c = shape[-3]
    bn = nn.BatchNorm2d(c, momentum=momentum)
    calls = _count_kernel_calls(monkeypatch)
    rng = np.random.default_rng(3)
    xs = [(rng.standard_normal(shape) * (2 + k) - k).astype(np.float32) for k in range(3)]
    s = Session()
    for x in xs:
        bn(s.tensor(x, requires_grad=True)).sum().backward()
        s.step()
    assert len(calls) == len(xs)
    axes = (0, 2, 3) if len(shape) == 4 else (1, 2)
    rm, rv = _running_ref(xs, momentum, axes)
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5, atol=1e-6)
    assert float(bn.num_batches_tracked.numpy()) == len(xs)


def test_running_stats_keep_the_bits_of_a_separate_kernel_call():
    """The statistics handed back are the kernel's own: folding a second call's mean/var (what
    the module did before) gives the same bits."""
    manual_seed(0)
    x = (np.random.default_rng(5).standard_normal((7, 5, 9, 11)) * 3 + 1).astype(np.float32)
    bn = nn.BatchNorm2d(5, momentum=0.3)
    s = Session()
    bn(s.tensor(x))
    s.step()
    s2 = Session()
    xt, zeros, ones = s2.tensor(x), s2.tensor(np.zeros(5)), s2.tensor(np.ones(5))
    _y, _xhat, mean, var, _inv = _ops.batchnorm_channel_first(
        xt.value, bn.weight.mirror(), bn.bias.mirror(), eps=bn.eps)
    count = x.size // 5
    want_m = _ops.axpy(_ops.scale(zeros.value, c=0.7), mean, c=0.3)
    want_v = _ops.axpy(_ops.scale(ones.value, c=0.7), var, c=0.3 * count / (count - 1))
    assert bn.running_mean.numpy().tobytes() == want_m.to_numpy().tobytes()
    assert bn.running_var.numpy().tobytes() == want_v.to_numpy().tobytes()
    for buf in (_y, _xhat, mean, var, _inv, want_m, want_v):
        buf.release()


def test_nan_in_one_channel_reaches_only_that_channels_running_stats():
    manual_seed(0)
    x = np.random.default_rng(7).standard_normal((4, 3, 5, 5)).astype(np.float32)
    x[2, 1, 3, 0] = np.nan
    bn = nn.BatchNorm2d(3)
    s = Session()
    y = bn(s.tensor(x)).numpy()
    s.step()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    assert np.isnan(rm[1]) and np.isnan(rv[1]) and np.isnan(y[:, 1]).all()
    ref_m, ref_v = _running_ref([x[:, [0, 2]]], 0.1, (0, 2, 3))
    np.testing.assert_allclose(rm[[0, 2]], ref_m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv[[0, 2]], ref_v, rtol=1e-5, atol=1e-6)


def test_batchnorm1d_and_no_grad_update_running_stats_from_one_call(monkeypatch):
    manual_seed(0)
    calls = _count_kernel_calls(monkeypatch)
    x = np.random.default_rng(9).standard_normal((6, 4, 3)).astype(np.float32)
    bn = nn.BatchNorm1d(4)
    s = Session()
    with tl.no_grad():
        bn(s.tensor(x))
    s.step()
    assert len(calls) == 1
    rm, rv = _running_ref([x[..., None]], 0.1, (0, 2, 3))
    np.testing.assert_allclose(bn.running_mean.numpy(), rm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), rv, rtol=1e-5, atol=1e-6)


def test_eval_and_untracked_forwards_take_no_statistics(monkeypatch):
    manual_seed(0)
    x = np.random.default_rng(2).standard_normal((3, 2, 4, 4)).astype(np.float32)
    bn = nn.BatchNorm2d(2, track_running_stats=False)
    calls = _count_kernel_calls(monkeypatch)
    s = Session()
    y = bn(s.tensor(x)).numpy()
    s.step()
    assert len(calls) == 1 and not hasattr(bn, "running_mean")
    ref = (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_handed_back_statistics_are_released():
    manual_seed(0)
    x = np.random.default_rng(4).standard_normal((8, 3, 6, 6)).astype(np.float32)
    bn = nn.BatchNorm2d(3)
    s = Session()

    def step():
        xt = s.tensor(x, requires_grad=True)
        bn(xt).sum().backward()
        s.step()

    step()
    live = tl.memory_stats()["live_buffers"]
    for _ in range(5):
        step()
    assert tl.memory_stats()["live_buffers"] == live


def test_tape_op_hands_back_mean_and_biased_variance():
    x = np.random.default_rng(6).standard_normal((3, 5, 2, 7)).astype(np.float32)
    s = Session()
    xt = s.tensor(x)
    g, b = s.tensor(np.ones(5, np.float32)), s.tensor(np.zeros(5, np.float32))
    got = []
    s.op("batchnorm_channel_first", xt, g, b, eps=1e-5, hand_back=got)
    assert len(got) == 2
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(got[0].to_numpy(), x64.mean((0, 2, 3)), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[1].to_numpy(), x64.var((0, 2, 3)), rtol=1e-5, atol=1e-6)
    for r in got:
        r.release()
