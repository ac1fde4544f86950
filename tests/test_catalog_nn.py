"""nn.functional names of the catalog (activations, losses, distances, layers, resampling)
against float64 NumPy references written here (forward; gradients by central differences),
torch as an extra reference, and bad input raising torch's kind of error naming the op."""
import math

import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from catalog_check import check, rand, torch

TF = torch.nn.functional if torch is not None else None
X = rand(3, 5, low=0.05)            # away from the kinks at 0
X4 = rand(2, 6, 3, 4, seed=1)


def _t(f):
    return f if TF is not None else None


def sigmoid(a):
    return 1 / (1 + np.exp(-a))


def softplus(a):
    return np.logaddexp(0, a)


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _np_norm_axes(a, axes, eps=1e-5):
    mu = a.mean(axes, keepdims=True)
    var = a.var(axes, keepdims=True)
    return (a - mu) / np.sqrt(var + eps)


def _np_cos(a, b, axis, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(axis, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(axis, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(axis)


def _np_pairwise(a, b, p=2, eps=1e-6):
    return (np.abs(a - b + eps) ** p).sum(-1) ** (1 / p)


def _np_unfold(a, k, pad, stride):
    n, c, h, w = a.shape
    ap = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    cols = np.zeros((n, c, k, k, oh, ow))
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = ap[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
    return cols.reshape(n, c * k * k, oh * ow)


def _np_fold(cols, size, k, pad, stride):
    n = cols.shape[0]
    c = cols.shape[1] // (k * k)
    h, w = size
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = np.zeros((n, c, h + 2 * pad, w + 2 * pad))
    cols = cols.reshape(n, c, k, k, oh, ow)
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride] += cols[:, :, i, j]
    return out[:, :, pad:pad + h, pad:pad + w]


def _np_pixel_shuffle(a, r):
    n, c, h, w = a.shape
    return a.reshape(n, c // (r * r), r, r, h, w).transpose(0, 1, 4, 2, 5, 3).reshape(
        n, c // (r * r), h * r, w * r)


def _np_adaptive(a, out, reduce):
    d, h, w = a.shape[-3:]

    def win(n, m, i):
        return slice((i * n) // m, -((-(i + 1) * n) // m))
    res = np.zeros(a.shape[:-3] + tuple(out))
    for i in range(out[0]):
        for j in range(out[1]):
            for k in range(out[2]):
                block = a[..., win(d, out[0], i), win(h, out[1], j), win(w, out[2], k)]
                res[..., i, j, k] = reduce(block.reshape(block.shape[:-3] + (-1,)), -1)
    return res


def _np_conv_transpose1d(x, w, stride):
    n, cin, length = x.shape
    cout, k = w.shape[1], w.shape[2]
    out = np.zeros((n, cout, (length - 1) * stride + k))
    for i in range(length):
        out[:, :, i * stride:i * stride + k] += np.einsum("nc,cok->nok", x[:, :, i], w)
    return out


def _np_conv_transpose3d(x, w, stride):
    n, cin = x.shape[:2]
    cout, k = w.shape[1], w.shape[2:]
    size = [(i - 1) * s + kk for i, s, kk in zip(x.shape[2:], stride, k)]
    out = np.zeros((n, cout, *size))
    for p in np.ndindex(*x.shape[2:]):
        o = [a * s for a, s in zip(p, stride)]
        out[:, :, o[0]:o[0] + k[0], o[1]:o[1] + k[1], o[2]:o[2] + k[2]] += np.einsum(
            "nc,coijk->noijk", x[(slice(None), slice(None)) + p], w)
    return out


def _np_multi_margin(a, y, p, margin, weight):
    n, c = a.shape
    loss = np.zeros(n)
    for i in range(n):
        for j in range(c):
            if j != y[i]:
                loss[i] += weight[y[i]] * max(0.0, margin - a[i, y[i]] + a[i, j]) ** p
    return (loss / c).mean()


def _np_multilabel_margin(a, y):
    n, c = a.shape
    loss = np.zeros(n)
    for i in range(n):
        labels = []
        for v in y[i]:
            if v < 0:
                break
            labels.append(v)
        for j in labels:
            for k in range(c):
                if k not in labels:
                    loss[i] += max(0.0, 1 - (a[i, j] - a[i, k]))
    return (loss / c).mean()


LABELS = np.array([0, 4, 2])


def _np_cross_entropy(logits, y, smoothing):
    logp = logits - logits.max(1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
    k = logits.shape[1]
    target = np.full(logits.shape, smoothing / k)
    target[np.arange(len(y)), y] += 1 - smoothing
    return -(target * logp).sum(1).mean()
MULTI = np.array([[3, 0, -1, 0, 0], [1, -1, 0, 0, 0], [0, 1, 2, 3, 4]])
SIGNS = np.array([1.0, -1.0, 1.0], np.float32)

CASES = {
    "hardswish": (F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6, [X * 4],
                  _t(TF and TF.hardswish)),
    "hardsigmoid": (F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6, [X * 4],
                    _t(TF and TF.hardsigmoid)),
    "hardtanh": (lambda x: F.hardtanh(x, -0.5, 0.8), lambda a: np.clip(a, -0.5, 0.8), [X], None),
    "relu6": (F.relu6, lambda a: np.clip(a, 0, 6), [X * 5], _t(TF and TF.relu6)),
    "mish": (F.mish, lambda a: a * np.tanh(softplus(a)), [X * 3], _t(TF and TF.mish)),
    "logsigmoid": (F.logsigmoid, lambda a: -softplus(-a), [X * 30], _t(TF and TF.logsigmoid)),
    "glu": (lambda x: F.glu(x, 0), lambda a: a[:1] * sigmoid(a[1:2]), [X[:2]], None),
    "glu_last": (F.glu, lambda a: a[..., :2] * sigmoid(a[..., 2:]), [rand(3, 4)],
                 _t(TF and TF.glu)),
    "prelu": (lambda x, w: F.prelu(x, w), lambda a, w: np.where(a > 0, a, w[:, None, None] * a),
              [X4, rand(6, seed=2)], _t(TF and TF.prelu)),
    "prelu_one": (lambda x, w: tl.prelu(x, w), lambda a, w: np.where(a > 0, a, w * a),
                  [X, np.array([0.25], np.float32)], None),
    "selu": (F.selu, lambda a: 1.0507009873554805 * np.where(
        a > 0, a, 1.6732632423543772 * (np.exp(a) - 1)), [X], _t(TF and TF.selu)),
    "celu": (lambda x: F.celu(x, 0.7), lambda a: np.where(a > 0, a, 0.7 * (np.exp(a / 0.7) - 1)),
             [X], None),
    "rrelu_eval": (F.rrelu, lambda a: np.where(a > 0, a, a * (1 / 8 + 1 / 3) / 2), [X],
                   _t(TF and TF.rrelu)),
    "softsign": (F.softsign, lambda a: a / (1 + np.abs(a)), [X], _t(TF and TF.softsign)),
    "softshrink": (lambda x: F.softshrink(x, 0.3), lambda a: np.where(
        a > 0.3, a - 0.3, np.where(a < -0.3, a + 0.3, 0)), [X + 0.013], None),
    "hardshrink": (lambda x: x.hardshrink(0.3), lambda a: np.where(np.abs(a) > 0.3, a, 0),
                   [X + 0.013], None),
    "tanhshrink": (F.tanhshrink, lambda a: a - np.tanh(a), [X], _t(TF and TF.tanhshrink)),
    "threshold": (lambda x: F.threshold(x, 0.1, -3.0), lambda a: np.where(a > 0.1, a, -3.0),
                  [X + 0.013], None),
    "softmin": (lambda x: F.softmin(x, -1), lambda a: _np_softmax(-a, -1), [X], None),
    "softmin_implicit": (F.softmin, lambda a: _np_softmax(-a, 1), [X4], None),
    # distances and losses
    "cosine_similarity": (F.cosine_similarity, lambda a, b: _np_cos(a, b, 1), [X, X[::-1] * 2],
                          _t(TF and TF.cosine_similarity)),
    "cosine_similarity_bcast": (lambda x, y: F.cosine_similarity(x, y, dim=-1),
                                lambda a, b: _np_cos(a, b, -1), [X, X[:1]], None),
    "pairwise_distance": (F.pairwise_distance, _np_pairwise, [X, X[::-1] * 0.7 + 0.1],
                          _t(TF and TF.pairwise_distance)),
    "pairwise_distance_p1": (lambda x, y: F.pairwise_distance(x, y, 1, keepdim=True),
                             lambda a, b: _np_pairwise(a, b, 1)[:, None], [X, X[:1] * 0.3],
                             None),
    "pdist": (F.pdist, lambda a: np.array([np.sqrt(((a[i] - a[j]) ** 2).sum())
                                           for i in range(3) for j in range(i + 1, 3)]),
              [X], _t(TF and TF.pdist)),
    "cosine_embedding_loss": (lambda a, b: F.cosine_embedding_loss(a, b, tl.tensor(SIGNS), 0.1),
                              lambda a, b: np.mean(np.where(SIGNS > 0, 1 - (a * b).sum(1) / np.sqrt(
                                  ((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12)),
                                  np.maximum(0, (a * b).sum(1) / np.sqrt(
                                      ((a * a).sum(1) + 1e-12) * ((b * b).sum(1) + 1e-12)) - 0.1))),
                              [X, X[::-1] * 0.5 + 0.1], None),
    "gaussian_nll_loss": (lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True),
                          lambda x, t, v: np.mean(0.5 * (np.log(v) + (x - t) ** 2 / v)
                                                  + 0.5 * math.log(2 * math.pi)),
                          [X, X[::-1], np.abs(X) + 0.1], None),
    "gaussian_nll_loss_short_var": (lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction="sum"),
                                    lambda x, t, v: np.sum(0.5 * (np.log(v[:, None]) + (
                                        x - t) ** 2 / v[:, None])),
                                    [X, X[::-1], np.abs(X[:, 0]) + 0.1], None),
    "hinge_embedding_loss": (lambda x: F.hinge_embedding_loss(x, tl.tensor(SIGNS[:, None]), 0.5),
                             lambda a: np.mean(np.where(SIGNS[:, None] > 0, a,
                                                        np.maximum(0, 0.5 - a))), [X], None),
    "margin_ranking_loss": (lambda a, b: F.margin_ranking_loss(a, b, tl.tensor(SIGNS), 0.2),
                            lambda a, b: np.mean(np.maximum(0, -SIGNS * (a - b) + 0.2)),
                            [X[:, 0], X[:, 1]], None),
    "multi_margin_loss": (lambda x: F.multi_margin_loss(x, LABELS, p=2, margin=0.7,
                                                        weight=tl.tensor([1, 2, 3, 4, .5])),
                          lambda a: _np_multi_margin(a, LABELS, 2, 0.7, [1, 2, 3, 4, .5]),
                          [X], None),
    "multi_margin_loss_p1": (lambda x: F.multi_margin_loss(x, LABELS),
                             lambda a: _np_multi_margin(a, LABELS, 1, 1.0, [1] * 5), [X], None),
    "multilabel_margin_loss": (lambda x: F.multilabel_margin_loss(x, MULTI),
                               lambda a: _np_multilabel_margin(a, MULTI), [X], None),
    "multilabel_soft_margin_loss": (
        lambda x: F.multilabel_soft_margin_loss(x, tl.tensor((X > 0).astype(np.float32))),
        lambda a: np.mean(np.mean(-((X > 0) * -softplus(-a) + (X <= 0) * -softplus(a)), 1)),
        [X * 2], None),
    "poisson_nll_loss": (lambda x, t: F.poisson_nll_loss(x, t),
                         lambda x, t: np.mean(np.exp(x) - t * x), [X, np.abs(X) * 3], None),
    "poisson_nll_loss_full": (lambda x, t: F.poisson_nll_loss(x, t, log_input=False, full=True,
                                                              reduction="none"),
                              lambda x, t: x - t * np.log(x + 1e-8) + np.where(
                                  t > 1, t * np.log(t) - t + 0.5 * np.log(2 * np.pi * t), 0),
                              [np.abs(X) + 0.5, np.abs(X[::-1]) * 3], None),
    "soft_margin_loss": (lambda x: F.soft_margin_loss(x, tl.tensor(np.sign(X[::-1]))),
                         lambda a: np.mean(softplus(-np.sign(X[::-1]) * a)), [X], None),
    "triplet_margin_loss": (lambda a, p, n: F.triplet_margin_loss(a, p, n, swap=True),
                            lambda a, p, n: np.mean(np.maximum(0, 1 + _np_pairwise(a, p) - np.minimum(
                                _np_pairwise(a, n), _np_pairwise(p, n)))),
                            [X, X * 0.5, X[::-1] * 0.7 + 0.1], None),
    "triplet_margin_with_distance_loss": (
        lambda a, p, n: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: ((u - v) ** 2).sum(-1), margin=2.0,
            reduction="sum"),
        lambda a, p, n: np.sum(np.maximum(0, 2 + ((a - p) ** 2).sum(-1) - ((a - n) ** 2).sum(-1))),
        [X, X * 0.5, X[::-1]], None),
    "linear_cross_entropy": (lambda x, w: F.linear_cross_entropy(x, w, LABELS,
                                                                  label_smoothing=0.1),
                             lambda x, w: _np_cross_entropy(x @ w.T, LABELS, 0.1),
                             [X, rand(5, 5, seed=9)], None),
    # layers
    "embedding_padding": (lambda w: F.embedding(np.array([[0, 2], [2, 3]]), w, padding_idx=2),
                          lambda w: w[np.array([[0, 2], [2, 3]])], [rand(4, 3)], None,
                          {"grad": False}),
    "embedding_bag_mean": (lambda w: F.embedding_bag(np.array([0, 2, 2, 3, 1]), w,
                                                     np.array([0, 3, 3])),
                           lambda w: np.stack([w[[0, 2, 2]].mean(0), np.zeros(3),
                                               w[[3, 1]].mean(0)]), [rand(4, 3)], None),
    "embedding_bag_sum_2d": (lambda w: F.embedding_bag(np.array([[0, 1], [3, 3]]), w, mode="sum"),
                             lambda w: np.stack([w[0] + w[1], 2 * w[3]]), [rand(4, 3)], None),
    "embedding_bag_max": (lambda w: F.embedding_bag(np.array([[0, 1], [3, 2]]), w, mode="max"),
                          lambda w: np.stack([w[[0, 1]].max(0), w[[3, 2]].max(0)]), [rand(4, 3)],
                          None),
    "batch_norm_train": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                         lambda x, w, b: _np_norm_axes(x, (0, 2, 3)) * w[:, None, None] + b[:, None, None],
                         [X4, rand(6, seed=3), rand(6, seed=4)], None),
    "batch_norm_eval": (lambda x, m, v: F.batch_norm(x, m, v),
                        lambda x, m, v: (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5),
                        [X4, rand(6, seed=3), np.abs(rand(6, seed=4)) + 0.5], None),
    "instance_norm": (F.instance_norm, lambda x: _np_norm_axes(x, (2, 3)), [X4],
                      _t(TF and TF.instance_norm)),
    "group_norm": (lambda x, w: F.group_norm(x, 3, w),
                   lambda x, w: _np_norm_axes(x.reshape(2, 3, -1), (2,)).reshape(x.shape)
                   * w[:, None, None], [X4, rand(6, seed=3)], None),
    "rms_norm": (lambda x, w: F.rms_norm(x, (3, 4), w, eps=1e-6),
                 lambda x, w: x / np.sqrt((x * x).mean((2, 3), keepdims=True) + 1e-6) * w,
                 [X4, rand(3, 4, seed=5)], None),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3, alpha=0.1),
                            lambda x: x / (1 + 0.1 / 3 * np.stack([
                                (x[:, max(c - 1, 0):c + 2] ** 2).sum(1) for c in range(6)], 1))
                            ** 0.75, [X4], _t(TF and (lambda x: TF.local_response_norm(x, 3, 0.1)))),
    "bilinear": (lambda a, b, w, bias: F.bilinear(a, b, w, bias),
                 lambda a, b, w, bias: np.einsum("ni,kij,nj->nk", a, w, b) + bias,
                 [X, rand(3, 2, seed=6), rand(4, 5, 2, seed=7), rand(4, seed=8)],
                 _t(TF and TF.bilinear)),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), lambda a: _np_pixel_shuffle(a, 2),
                      [rand(2, 8, 3, 5)], None),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2),
                        lambda a: a.reshape(2, 2, 3, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(
                            2, 8, 3, 2), [rand(2, 2, 6, 4)], None),
    "channel_shuffle": (lambda x: F.channel_shuffle(x, 3),
                        lambda a: a.reshape(2, 3, 2, 3, 4).transpose(0, 2, 1, 3, 4).reshape(
                            a.shape), [X4], None),
    "unfold": (lambda x: F.unfold(x, 2, padding=1, stride=2), lambda a: _np_unfold(a, 2, 1, 2),
               [X4], _t(TF and (lambda x: TF.unfold(x, 2, padding=1, stride=2)))),
    "fold": (lambda c: F.fold(c, (3, 4), 2, padding=1, stride=1),
             lambda c: _np_fold(c, (3, 4), 2, 1, 1), [rand(2, 12, 20, seed=3)], None),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)),
                            lambda a: _np_adaptive(a, (2, 3, 3), np.mean), [rand(2, 3, 5, 4, 5)],
                            None),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, (2, None, 3)),
                            lambda a: _np_adaptive(a, (2, 4, 3), np.max), [rand(3, 5, 4, 5)],
                            None),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=2),
                         lambda x, w: _np_conv_transpose1d(x, w, 2),
                         [rand(2, 3, 4), rand(3, 2, 3, seed=2)], None),
    "conv_transpose1d_outpad": (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1,
                                                                   output_padding=1),
                                lambda x, w, b: np.pad(_np_conv_transpose1d(x, w, 2),
                                                       ((0, 0), (0, 0), (0, 1)))[:, :, 1:9]
                                + b[:, None],
                                [rand(2, 3, 4), rand(3, 2, 3, seed=2), rand(2, seed=3)], None),
    "conv_transpose3d": (lambda x, w, b: F.conv_transpose3d(x, w, b, stride=(1, 2, 1)),
                         lambda x, w, b: _np_conv_transpose3d(x, w, (1, 2, 1)) + b[:, None, None, None],
                         [rand(1, 2, 2, 3, 2), rand(2, 3, 2, 2, 1, seed=2), rand(3, seed=3)],
                         _t(TF and (lambda x, w, b: TF.conv_transpose3d(x, w, b, stride=(1, 2, 1))))),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn, *opts = CASES[name]
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn, grad_tol=(3e-3, 3e-4),
          **(opts[0] if opts else {}))


def test_one_hot():
    y = np.array([[0, 3], [2, 1]])
    out = F.one_hot(y)
    assert out.dtype == tl.int64
    np.testing.assert_array_equal(out.numpy(), np.eye(4, dtype=np.int64)[y])
    assert F.one_hot(tl.tensor([1, 0]).long(), 3).numpy().tolist() == [[0, 1, 0], [1, 0, 0]]


def test_embedding_padding_row_gets_no_gradient():
    w = tl.tensor(rand(4, 3), requires_grad=True)
    F.embedding(np.array([2, 2, 1]), w, padding_idx=2).sum().backward()
    np.testing.assert_array_equal(w.grad, [[0] * 3, [1] * 3, [0] * 3, [0] * 3])


def test_batch_norm_updates_running_stats_in_place():
    x = rand(4, 3, 5)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    F.batch_norm(tl.tensor(x), rm, rv, training=True, momentum=0.25)
    np.testing.assert_allclose(rm, 0.25 * x.mean((0, 2)), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(rv, 0.75 + 0.25 * x.var((0, 2), ddof=1), rtol=1e-5)


def test_random_layers_statistics_and_eval_identity():
    x = tl.tensor(rand(200, 50))
    for f in (F.alpha_dropout, F.feature_alpha_dropout):
        assert f(x, 0.3) is x or np.array_equal(f(x, 0.3).numpy(), x.numpy())
    y = F.alpha_dropout(tl.tensor(rand(100000)), 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    z = F.feature_alpha_dropout(tl.tensor(rand(8, 40, 6)), 0.5, training=True).numpy()
    dropped = np.isclose(z, z[..., :1]).all(-1)          # a dropped channel is constant
    assert 0.2 < dropped.mean() < 0.8
    d3 = F.dropout3d(tl.ones(4, 30, 2, 2, 2), 0.5).numpy()
    assert set(np.unique(d3)) <= {0.0, 2.0} and (d3.reshape(4, 30, -1).std(-1) == 0).all()
    d1 = F.dropout1d(tl.ones(30, 5), 0.5).numpy()
    assert set(np.unique(d1)) <= {0.0, 2.0}
    r = F.rrelu(tl.tensor(-np.ones(10000, np.float32)), training=True).numpy()
    assert (r <= -1 / 8 + 1e-6).all() and (r >= -1 / 3 - 1e-6).all()


def test_upsample_aliases():
    x = rand(1, 2, 3, 4)
    np.testing.assert_array_equal(F.upsample_nearest(tl.tensor(x), scale_factor=2).numpy(),
                                  x.repeat(2, 2).repeat(2, 3))
    y = F.upsample_bilinear(tl.tensor(x), size=(5, 7)).numpy()
    np.testing.assert_allclose(y[..., 0, 0], x[..., 0, 0], rtol=1e-6)    # corners aligned
    np.testing.assert_allclose(y[..., -1, -1], x[..., -1, -1], rtol=1e-6)
    assert F.upsample(tl.tensor(x), scale_factor=3).shape == (1, 2, 9, 12)


BAD = [
    (lambda: F.hardtanh(tl.zeros(2), 1.0, 0.0), ValueError, "hardtanh"),
    (lambda: F.glu(tl.zeros(3, 5)), RuntimeError, "glu"),
    (lambda: F.glu(tl.zeros(3, 4), 2), IndexError, "glu"),
    (lambda: F.prelu(tl.zeros(2, 3), tl.zeros(2)), RuntimeError, "prelu"),
    (lambda: F.celu(tl.zeros(2), 0.0), RuntimeError, "celu"),
    (lambda: F.rrelu(tl.zeros(2), 0.5, 0.1), ValueError, "rrelu"),
    (lambda: F.softshrink(tl.zeros(2), -1.0), RuntimeError, "softshrink"),
    (lambda: F.hardswish([1.0]), TypeError, "hardswish"),
    (lambda: F.cosine_similarity(tl.zeros(2, 3), tl.zeros(2, 4)), RuntimeError,
     "cosine_similarity"),
    (lambda: F.pdist(tl.zeros(2)), RuntimeError, "pdist"),
    (lambda: F.cosine_embedding_loss(tl.zeros(2, 3), tl.zeros(2, 4), tl.zeros(2)), RuntimeError,
     "cosine_embedding_loss"),
    (lambda: F.gaussian_nll_loss(tl.zeros(2, 3), tl.zeros(2, 3), tl.zeros(3, 2)), ValueError,
     "gaussian_nll_loss"),
    (lambda: F.gaussian_nll_loss(tl.zeros(2), tl.zeros(2), -tl.ones(2)), ValueError,
     "gaussian_nll_loss"),
    (lambda: F.margin_ranking_loss(tl.zeros(2), tl.zeros(3), tl.zeros(2)), RuntimeError,
     "margin_ranking_loss"),
    (lambda: F.multi_margin_loss(tl.zeros(2, 3), np.array([0, 3])), IndexError,
     "multi_margin_loss"),
    (lambda: F.multi_margin_loss(tl.zeros(2, 3), np.array([0.0, 1.0])), TypeError,
     "multi_margin_loss"),
    (lambda: F.multilabel_margin_loss(tl.zeros(1, 3), np.array([[5, -1, 0]])), IndexError,
     "multilabel_margin_loss"),
    (lambda: F.soft_margin_loss(tl.zeros(2), tl.zeros(3)), ValueError, "soft_margin_loss"),
    (lambda: F.triplet_margin_loss(tl.zeros(2, 3), tl.zeros(3), tl.zeros(3)), RuntimeError,
     "triplet_margin_loss"),
    (lambda: F.poisson_nll_loss(tl.zeros(2), tl.zeros(2), reduction="avg"), ValueError,
     "poisson_nll_loss"),
    (lambda: F.one_hot(np.array([0, 3]), 3), RuntimeError, "one_hot"),
    (lambda: F.one_hot(np.array([-1])), RuntimeError, "one_hot"),
    (lambda: F.embedding(np.array([4]), tl.zeros(4, 2)), IndexError, "embedding"),
    (lambda: F.embedding_bag(np.array([0]), tl.zeros(4, 2)), ValueError, "embedding_bag"),
    (lambda: F.batch_norm(tl.zeros(1, 3), None, None, training=True), ValueError, "batch_norm"),
    (lambda: F.group_norm(tl.zeros(2, 5, 3), 2), RuntimeError, "group_norm"),
    (lambda: F.instance_norm(tl.zeros(2, 3)), ValueError, "instance_norm"),
    (lambda: F.rms_norm(tl.zeros(2, 3), (2,)), RuntimeError, "rms_norm"),
    (lambda: F.bilinear(tl.zeros(2, 3), tl.zeros(2, 4), tl.zeros(1, 3, 3)), RuntimeError,
     "bilinear"),
    (lambda: F.pixel_shuffle(tl.zeros(1, 3, 2, 2), 2), RuntimeError, "pixel_shuffle"),
    (lambda: F.pixel_unshuffle(tl.zeros(1, 1, 3, 2), 2), RuntimeError, "pixel_unshuffle"),
    (lambda: F.channel_shuffle(tl.zeros(1, 3, 2), 2), RuntimeError, "channel_shuffle"),
    (lambda: F.unfold(tl.zeros(1, 1, 2, 2), 3), RuntimeError, "unfold"),
    (lambda: F.fold(tl.zeros(1, 4, 3), (3, 3), 2), RuntimeError, "fold"),
    (lambda: F.alpha_dropout(tl.zeros(2), 1.5, True), ValueError, "alpha_dropout"),
    (lambda: F.dropout3d(tl.zeros(2, 2), 0.5), ValueError, "dropout3d"),
    (lambda: F.adaptive_avg_pool3d(tl.zeros(2, 3, 4), 2), ValueError, "adaptive_avg_pool3d"),
    (lambda: F.adaptive_max_pool3d(tl.zeros(1, 2, 2, 2), 1, return_indices=True),
     NotImplementedError, "adaptive_max_pool3d"),
    (lambda: F.conv_transpose1d(tl.zeros(1, 2, 4), tl.zeros(3, 2, 2)), ValueError,
     "conv_transpose1d"),
    (lambda: F.conv_transpose3d(tl.zeros(1, 2, 2, 2, 2), tl.zeros(2, 1, 1, 1, 1), groups=2),
     NotImplementedError, "conv_transpose3d"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
