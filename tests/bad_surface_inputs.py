"""Bad calls on torchlean's PyTorch-style surfaces, beyond the registry table of bad_inputs.py:
factories, IntTensor, the losses, RNN/LSTM/GRU, MultiheadAttention, interpolate/pad,
checkpoints, schedulers, in-place ops and item assignment.

Each case is (family, label, op, kinds, call): `call(tl)` makes one bad call, which must raise
an exception whose type name is in `kinds` (PyTorch's kind) and whose message names `op` (for
an in-place op, its name without the trailing underscore also counts: "clamp" for clamp_). A
result, another exception type, a crash or a hang fails the case. The worker in bad_inputs.py
runs them by index ("@surface <index>"), so a crash fails only its case.
"""
from __future__ import annotations

import math

import numpy as np

V, T, I, R = ("ValueError", "ShapeError"), ("TypeError",), ("IndexError",), ("RuntimeError",)
IDX = ("IndexError", "TargetOutOfRange")
OVER = ("Int64OverflowError",)
DIV0 = ("IntegerDivisionByZero",)
KEY = ("KeyError",)


def _x(tl, *shape, requires_grad=False):
    n = math.prod(shape)
    return tl.tensor(np.linspace(0.1, 0.9, n, dtype=np.float32).reshape(shape),
                     requires_grad=requires_grad)


def _i(tl, a):
    return tl.IntTensor(np.asarray(a, dtype=np.int64))


def _opt(tl):
    return tl.optim.SGD([tl.nn.Parameter(np.zeros(2, np.float32))], lr=0.1)


def _mha_call(tl, **kw):
    mha = tl.nn.MultiheadAttention(4, 2)
    q = _x(tl, 3, 1, 4)
    return mha(q, q, q, **kw)


def _garbage_file(tl):
    import tempfile
    from torchlean.nn.checkpoint import load_file
    with tempfile.NamedTemporaryFile(suffix=".safetensors", delete=False) as f:
        f.write(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json at all}")
        path = f.name
    return load_file(path)


def _truncated_file(tl):
    import os
    import tempfile
    from torchlean.nn.checkpoint import load_file, save_file
    path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    save_file({"w": np.ones((4, 4), np.float32)}, path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-8])
    return load_file(path)


def _setitem(t, key, value):
    t[key] = value


def _lstm(tl, hx):
    return tl.nn.LSTM(4, 3)(_x(tl, 2, 1, 4), hx)


CASES = [
    # ---------------------------------------------------------------- factories
    ("factories", "zeros negative", "zeros", V, lambda tl: tl.zeros(-1)),
    ("factories", "zeros float size", "zeros", T, lambda tl: tl.zeros(2.5)),
    ("factories", "ones huge", "ones", V + ("MemoryError",), lambda tl: tl.ones(2 ** 70)),
    ("factories", "full float size", "full", T, lambda tl: tl.full((1.5,), 1.0)),
    ("factories", "randn negative", "randn", V, lambda tl: tl.randn(-2, 3)),
    ("factories", "rand str size", "rand", T, lambda tl: tl.rand("3")),
    ("factories", "arange zero step", "arange", V + R, lambda tl: tl.arange(0, 10, 0)),
    ("factories", "arange nan", "arange", V + R, lambda tl: tl.arange(0, float("nan"))),
    ("factories", "linspace negative steps", "linspace", V + R,
     lambda tl: tl.linspace(0, 1, -1)),
    ("factories", "eye negative", "eye", V + R, lambda tl: tl.eye(-1)),
    ("factories", "randint low >= high", "randint", V + R, lambda tl: tl.randint(5, 2, (3,))),
    ("factories", "randperm negative", "randperm", V + R, lambda tl: tl.randperm(-1)),
    ("factories", "tensor ragged", "tensor", V + T, lambda tl: tl.tensor([[1.0, 2.0], [3.0]])),
    ("factories", "tensor str", "tensor", T + V, lambda tl: tl.tensor("abc")),
    ("factories", "zeros bad dtype", "zeros", T + V, lambda tl: tl.zeros(2, dtype="float99")),
    # ---------------------------------------------------------------- IntTensor
    ("int", "uint64 past int64", "IntTensor", OVER,
     lambda tl: tl.IntTensor(np.array([2 ** 63], np.uint64))),
    ("int", "float data", "IntTensor", T, lambda tl: tl.IntTensor(np.array([1.5]))),
    ("int", "add 2**63", "__add__", OVER, lambda tl: _i(tl, [1]) + 2 ** 63),
    ("int", "sub -2**63-1", "__sub__", OVER, lambda tl: _i(tl, [1]) - (-(2 ** 63) - 1)),
    ("int", "mul 2**70", "__mul__", OVER, lambda tl: _i(tl, [1]) * 2 ** 70),
    ("int", "floordiv 0", "__floordiv__", DIV0, lambda tl: _i(tl, [1, 2]) // 0),
    ("int", "mod 0", "__mod__", DIV0, lambda tl: _i(tl, [1, 2]) % 0),
    ("int", "floordiv tensor with 0", "__floordiv__", DIV0,
     lambda tl: _i(tl, [1, 2]) // _i(tl, [1, 0])),
    ("int", "rfloordiv by 0", "__rfloordiv__", DIV0, lambda tl: 5 // _i(tl, [0])),
    ("int", "rmod by 0", "__rmod__", DIV0, lambda tl: 5 % _i(tl, [0])),
    ("int", "index out of range", "__getitem__", I, lambda tl: _i(tl, [1, 2])[5]),
    ("int", "float index", "__getitem__", I, lambda tl: _i(tl, [1, 2])[1.5]),
    ("int", "reshape bad", "reshape", V, lambda tl: _i(tl, [1, 2, 3]).reshape(2, 2)),
    ("int", "view -2", "reshape", V, lambda tl: _i(tl, [1, 2]).view(-2)),
    ("int", "sum dim 5", "sum", I, lambda tl: _i(tl, [[1, 2]]).sum(5)),
    ("int", "sum float dim", "sum", T, lambda tl: _i(tl, [[1, 2]]).sum(1.5)),
    ("int", "max float dim", "max", T, lambda tl: _i(tl, [[1, 2]]).max(dim=1.5)),
    ("int", "max empty", "max", V, lambda tl: _i(tl, np.zeros((0,), np.int64)).max()),
    ("int", "permute repeat", "permute", V, lambda tl: _i(tl, [[1, 2]]).permute(0, 0)),
    ("int", "transpose dim 5", "transpose", I, lambda tl: _i(tl, [[1, 2]]).transpose(0, 5)),
    ("int", "unsqueeze 9", "unsqueeze", I, lambda tl: _i(tl, [1]).unsqueeze(9)),
    ("int", "mean", "mean", T, lambda tl: _i(tl, [1, 2]).mean()),
    ("int", "item of many", "item", V, lambda tl: _i(tl, [1, 2]).item()),
    ("int", "matmul shapes", "matmul", V, lambda tl: _i(tl, [[1, 2]]) @ _i(tl, [[1, 2]])),
    ("int", "matmul 0-d", "matmul", V, lambda tl: _i(tl, 3) @ _i(tl, [1])),
    ("int", "matmul float", "matmul", R, lambda tl: _i(tl, [[1, 2]]) @ _x(tl, 2, 1)),
    ("int", "gather float index", "gather", T,
     lambda tl: _i(tl, [[1, 2]]).gather(1, _x(tl, 1, 1))),
    ("int", "gather out of range", "gather", I,
     lambda tl: _i(tl, [[1, 2]]).gather(1, _i(tl, [[2]]))),
    ("int", "gather negative", "gather", I,
     lambda tl: _i(tl, [[1, 2]]).gather(1, _i(tl, [[-1]]))),
    ("int", "gather rank", "gather", V, lambda tl: _i(tl, [[1, 2]]).gather(1, _i(tl, [0]))),
    ("int", "gather float dim", "gather", T,
     lambda tl: _i(tl, [[1, 2]]).gather(1.0, _i(tl, [[0]]))),
    ("int", "repeat too few", "repeat", V, lambda tl: _i(tl, [[1, 2]]).repeat(2)),
    ("int", "repeat negative", "repeat", V, lambda tl: _i(tl, [[1, 2]]).repeat(1, -1)),
    ("int", "repeat float", "repeat", T, lambda tl: _i(tl, [[1, 2]]).repeat(1, 2.0)),
    ("int", "tile negative", "tile", V, lambda tl: _i(tl, [1, 2]).tile((-1,))),
    ("int", "flip twice", "flip", V, lambda tl: _i(tl, [[1, 2]]).flip((0, 0))),
    ("int", "flip dim 3", "flip", I, lambda tl: _i(tl, [[1, 2]]).flip(3)),
    ("int", "roll misaligned", "roll", V, lambda tl: _i(tl, [[1, 2]]).roll((1, 1), (0,))),
    ("int", "roll two shifts no dims", "roll", V, lambda tl: _i(tl, [[1, 2]]).roll((1, 1))),
    ("int", "roll dim 4", "roll", I, lambda tl: _i(tl, [[1, 2]]).roll(1, 4)),
    ("int", "roll float shift", "roll", T, lambda tl: _i(tl, [[1, 2]]).roll(1.5, 0)),
    ("int", "clamp none", "clamp", V, lambda tl: _i(tl, [1]).clamp()),
    ("int", "clamp 2**63", "clamp", OVER, lambda tl: _i(tl, [1]).clamp(min=2 ** 63)),
    ("int", "bincount negative", "bincount", V, lambda tl: _i(tl, [-1, 2]).bincount()),
    ("int", "bincount 2-d", "bincount", V, lambda tl: _i(tl, [[1, 2]]).bincount()),
    ("int", "cat empty list", "cat", V, lambda tl: tl.cat([])),
    ("int", "cat shapes", "cat", V, lambda tl: tl.cat([_i(tl, [[1, 2]]), _i(tl, [[1]])])),
    ("int", "cat 0-d", "cat", V, lambda tl: tl.cat([_i(tl, 1), _i(tl, 2)])),
    ("int", "cat dim 3", "cat", I, lambda tl: tl.cat([_i(tl, [1]), _i(tl, [2])], 3)),
    ("int", "stack shapes", "stack", V, lambda tl: tl.stack([_i(tl, [1, 2]), _i(tl, [1])])),
    ("int", "stack dim 5", "stack", I, lambda tl: tl.stack([_i(tl, [1]), _i(tl, [2])], 5)),
    ("int", "where broadcast", "where", V,
     lambda tl: tl.where(_i(tl, [1, 0, 1]) > 0, _i(tl, [1, 2]), 0)),
    ("int", "where 2**63", "where", OVER, lambda tl: tl.where(_i(tl, [1]) > 0, _i(tl, [1]),
                                                            2 ** 63)),
    ("int", "where str condition", "where", T,
     lambda tl: tl.where(np.array(["a"]), _i(tl, [1]), 0)),
    # ---------------------------------------------------------------- item assignment
    ("setitem", "int nan", "__setitem__", OVER,
     lambda tl: _setitem(_i(tl, [1, 2]), 0, float("nan"))),
    ("setitem", "int inf", "__setitem__", OVER,
     lambda tl: _setitem(_i(tl, [1, 2]), 0, float("inf"))),
    ("setitem", "int 1e20", "__setitem__", OVER, lambda tl: _setitem(_i(tl, [1, 2]), 0, 1e20)),
    ("setitem", "int 2**64", "__setitem__", OVER,
     lambda tl: _setitem(_i(tl, [1, 2]), 0, 2 ** 64)),
    ("setitem", "int float tensor nan", "__setitem__", OVER,
     lambda tl: _setitem(_i(tl, [1, 2]), 0, tl.tensor([float("nan")]))),
    ("setitem", "int index out of range", "__setitem__", I,
     lambda tl: _setitem(_i(tl, [1, 2]), 5, 1)),
    ("setitem", "int shape mismatch", "__setitem__", R,
     lambda tl: _setitem(_i(tl, [[1, 2], [3, 4]]), 0, _i(tl, [1, 2, 3]))),
    ("setitem", "int str value", "__setitem__", T,
     lambda tl: _setitem(_i(tl, [1, 2]), 0, "x")),
    ("setitem", "int complex value", "__setitem__", T,
     lambda tl: _setitem(_i(tl, [1, 2]), 0, 1 + 2j)),
    ("setitem", "bool str value", "__setitem__", T,
     lambda tl: _setitem(_i(tl, [1, 2]) > 0, 0, "x")),
    # ---------------------------------------------------------------- losses
    ("losses", "cross_entropy label out of range", "cross_entropy", IDX + V,
     lambda tl: tl.nn.functional.cross_entropy(_x(tl, 2, 3), _i(tl, [0, 3]))),
    ("losses", "cross_entropy float ignore_index", "cross_entropy", T,
     lambda tl: tl.nn.functional.cross_entropy(_x(tl, 2, 3), _i(tl, [0, 1]), ignore_index=1.5)),
    ("losses", "cross_entropy bad reduction", "cross_entropy", V,
     lambda tl: tl.nn.functional.cross_entropy(_x(tl, 2, 3), _i(tl, [0, 1]), reduction="avg")),
    ("losses", "cross_entropy target rows", "cross_entropy", V,
     lambda tl: tl.nn.functional.cross_entropy(_x(tl, 2, 3), _i(tl, [0, 1, 2]))),
    ("losses", "cross_entropy weight shape", "cross_entropy", V,
     lambda tl: tl.nn.functional.cross_entropy(_x(tl, 2, 3), _i(tl, [0, 1]),
                                               weight=np.ones(2))),
    ("losses", "nll_loss float labels", "nll_loss", T,
     lambda tl: tl.nn.functional.nll_loss(_x(tl, 2, 3), _x(tl, 2))),
    ("losses", "nll_loss 0-d input", "nll_loss", V,
     lambda tl: tl.nn.functional.nll_loss(_x(tl, 1).sum(), _i(tl, 0))),
    ("losses", "mse shapes", "mse_loss", V,
     lambda tl: tl.nn.functional.mse_loss(_x(tl, 2, 3), _x(tl, 3, 2))),
    ("losses", "mse bad reduction", "mse_loss", V,
     lambda tl: tl.nn.functional.mse_loss(_x(tl, 2), _x(tl, 2), reduction="bogus")),
    ("losses", "l1 shapes", "l1_loss", V,
     lambda tl: tl.nn.functional.l1_loss(_x(tl, 2, 3), _x(tl, 4))),
    ("losses", "bce input > 1", "binary_cross_entropy", R,
     lambda tl: tl.nn.functional.binary_cross_entropy(tl.tensor([1.5]), tl.tensor([0.5]))),
    ("losses", "bce target < 0", "binary_cross_entropy", R,
     lambda tl: tl.nn.functional.binary_cross_entropy(tl.tensor([0.5]), tl.tensor([-0.5]))),
    ("losses", "bce nan input", "binary_cross_entropy", R,
     lambda tl: tl.nn.functional.binary_cross_entropy(tl.tensor([float("nan")]),
                                                      tl.tensor([0.5]))),
    ("losses", "bce_with_logits pos_weight shape", "binary_cross_entropy_with_logits", V,
     lambda tl: tl.nn.functional.binary_cross_entropy_with_logits(
         _x(tl, 2, 3), _x(tl, 2, 3), pos_weight=_x(tl, 2))),
    ("losses", "kl_div bad reduction", "kl_div", V,
     lambda tl: tl.nn.functional.kl_div(_x(tl, 2), _x(tl, 2), reduction="mean_all")),
    ("losses", "smooth_l1 negative beta", "smooth_l1_loss", V,
     lambda tl: tl.nn.functional.smooth_l1_loss(_x(tl, 2), _x(tl, 2), beta=-1.0)),
    ("losses", "huber negative delta", "huber_loss", V,
     lambda tl: tl.nn.functional.huber_loss(_x(tl, 2), _x(tl, 2), delta=-1.0)),
    ("losses", "CrossEntropyLoss label_smoothing 2", "CrossEntropyLoss", V,
     lambda tl: tl.nn.CrossEntropyLoss(label_smoothing=2.0)(_x(tl, 2, 3), _i(tl, [0, 1]))),
    # ---------------------------------------------------------------- RNN / LSTM / GRU
    ("rnn", "RNN float hidden", "RNN", T, lambda tl: tl.nn.RNN(4, 2.5)),
    ("rnn", "RNN float layers", "RNN", T, lambda tl: tl.nn.RNN(4, 2, num_layers=1.5)),
    ("rnn", "LSTM float input", "LSTM", T, lambda tl: tl.nn.LSTM(4.0, 2)),
    ("rnn", "GRU zero hidden", "GRU", V, lambda tl: tl.nn.GRU(4, 0)),
    ("rnn", "RNN negative", "RNN", V, lambda tl: tl.nn.RNN(-4, 2)),
    ("rnn", "RNN huge", "RNN", V, lambda tl: tl.nn.RNN(4, 2 ** 70)),
    ("rnn", "RNN bad nonlinearity", "RNN", V, lambda tl: tl.nn.RNN(4, 2, nonlinearity="gelu")),
    ("rnn", "RNN dropout 2", "RNN", V, lambda tl: tl.nn.RNN(4, 2, dropout=2.0)),
    ("rnn", "RNN input rank 4", "RNN", V, lambda tl: tl.nn.RNN(4, 2)(_x(tl, 1, 2, 1, 4))),
    ("rnn", "RNN input features", "RNN", V, lambda tl: tl.nn.RNN(4, 2)(_x(tl, 2, 1, 5))),
    ("rnn", "RNN hx shape", "RNN", V,
     lambda tl: tl.nn.RNN(4, 2)(_x(tl, 2, 1, 4), _x(tl, 2, 1, 2))),
    ("rnn", "RNN hx tuple", "RNN", T,
     lambda tl: tl.nn.RNN(4, 2)(_x(tl, 2, 1, 4), (_x(tl, 1, 1, 2),))),
    ("rnn", "GRU hx tuple", "GRU", T,
     lambda tl: tl.nn.GRU(4, 2)(_x(tl, 2, 1, 4), (_x(tl, 1, 1, 2), _x(tl, 1, 1, 2)))),
    ("rnn", "LSTM hx stacked", "LSTM", T, lambda tl: _lstm(tl, _x(tl, 2, 1, 1, 3))),
    ("rnn", "LSTM hx triple", "LSTM", T,
     lambda tl: _lstm(tl, (_x(tl, 1, 1, 3),) * 3)),
    ("rnn", "LSTM c0 shape", "LSTM", V,
     lambda tl: _lstm(tl, (_x(tl, 1, 1, 3), _x(tl, 1, 2, 3)))),
    ("rnn", "LSTM bidirectional hx", "LSTM", V,
     lambda tl: tl.nn.LSTM(4, 3, bidirectional=True)(_x(tl, 2, 1, 4),
                                                     (_x(tl, 1, 1, 3), _x(tl, 1, 1, 3)))),
    # ---------------------------------------------------------------- MultiheadAttention
    ("mha", "embed not divisible", "MultiheadAttention", V + ("AssertionError",),
     lambda tl: tl.nn.MultiheadAttention(5, 2)),
    ("mha", "float embed", "MultiheadAttention", T, lambda tl: tl.nn.MultiheadAttention(4.5, 2)),
    ("mha", "float heads", "MultiheadAttention", T, lambda tl: tl.nn.MultiheadAttention(4, 2.0)),
    ("mha", "huge embed", "MultiheadAttention", V,
     lambda tl: tl.nn.MultiheadAttention(2 ** 40, 2 ** 39)),
    ("mha", "mask 1-d", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, attn_mask=np.zeros(3, bool))),
    ("mha", "mask (1, 3)", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, attn_mask=np.zeros((1, 3), bool))),
    ("mha", "mask (1, 3, 3)", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, attn_mask=np.zeros((1, 3, 3), bool))),
    ("mha", "mask 4-d", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, attn_mask=np.zeros((1, 2, 3, 3), bool))),
    ("mha", "float tensor mask (1, 3)", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, attn_mask=_x(tl, 1, 3))),
    ("mha", "int mask", "MultiheadAttention", T,
     lambda tl: _mha_call(tl, attn_mask=np.zeros((3, 3), np.int64))),
    ("mha", "nan mask", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, attn_mask=np.full((3, 3), np.nan, np.float32))),
    ("mha", "key_padding_mask 1-d", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, key_padding_mask=np.zeros(3, bool))),
    ("mha", "key_padding_mask keys", "MultiheadAttention", V,
     lambda tl: _mha_call(tl, key_padding_mask=np.zeros((1, 2), bool))),
    ("mha", "query features", "MultiheadAttention", V,
     lambda tl: tl.nn.MultiheadAttention(4, 2)(_x(tl, 3, 1, 5), _x(tl, 3, 1, 5),
                                               _x(tl, 3, 1, 5))),
    # ---------------------------------------------------------------- interpolate / pad
    ("resample", "pad float", "pad", T, lambda tl: tl.nn.functional.pad(_x(tl, 3, 4), (1.5, 1.5))),
    ("resample", "pad crop past size", "pad", V,
     lambda tl: tl.nn.functional.pad(_x(tl, 3, 4), (-3, -3))),
    ("resample", "pad crop left past size", "pad", V,
     lambda tl: tl.nn.functional.pad(_x(tl, 3, 4), (-5, 1))),
    ("resample", "pad odd length", "pad", V, lambda tl: tl.nn.functional.pad(_x(tl, 3, 4), (1,))),
    ("resample", "pad too many axes", "pad", V,
     lambda tl: tl.nn.functional.pad(_x(tl, 4), (1, 1, 1, 1))),
    ("resample", "pad huge", "pad", V, lambda tl: tl.nn.functional.pad(_x(tl, 4), (2 ** 70, 0))),
    ("resample", "pad reflect negative", "pad", V,
     lambda tl: tl.nn.functional.pad(_x(tl, 1, 1, 4), (-1, 1), mode="reflect")),
    ("resample", "pad reflect too wide", "pad", V,
     lambda tl: tl.nn.functional.pad(_x(tl, 1, 1, 4), (4, 0), mode="reflect")),
    ("resample", "pad value with reflect", "pad", V,
     lambda tl: tl.nn.functional.pad(_x(tl, 1, 1, 4), (1, 1), mode="reflect", value=2.0)),
    ("resample", "pad str", "pad", T, lambda tl: tl.nn.functional.pad(_x(tl, 4), "ab")),
    ("resample", "interpolate float size", "interpolate", T,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), size=(2.5, 3))),
    ("resample", "interpolate both", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), size=2, scale_factor=2.0)),
    ("resample", "interpolate neither", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4))),
    ("resample", "interpolate scale inf", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), scale_factor=math.inf)),
    ("resample", "interpolate scale nan", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), scale_factor=math.nan)),
    ("resample", "interpolate scale negative", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), scale_factor=-2.0)),
    ("resample", "interpolate size 0", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), size=0)),
    ("resample", "interpolate size length", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), size=(2, 2, 2))),
    ("resample", "interpolate huge", "interpolate", V,
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), size=(2 ** 20, 2 ** 20))),
    ("resample", "interpolate bad mode", "interpolate", V + ("NotImplementedError",),
     lambda tl: tl.nn.functional.interpolate(_x(tl, 1, 1, 4, 4), size=2, mode="cubic9")),
    # ---------------------------------------------------------------- checkpoints
    ("checkpoint", "load missing file", "m.safetensors", ("FileNotFoundError",),
     lambda tl: __import__("torchlean.nn.checkpoint", fromlist=["x"]).load_file(
         "/nonexistent/torchlean/m.safetensors")),
    ("checkpoint", "load garbage", "load_file", V, lambda tl: _garbage_file(tl)),
    ("checkpoint", "load truncated", "load_file", V, lambda tl: _truncated_file(tl)),
    ("checkpoint", "state_dict missing key", "load_state_dict", KEY,
     lambda tl: tl.nn.Linear(2, 2).load_state_dict({"weight": np.zeros((2, 2))})),
    ("checkpoint", "state_dict wrong shape", "set", V,
     lambda tl: tl.nn.Linear(2, 2).load_state_dict({"weight": np.zeros((3, 2)),
                                                     "bias": np.zeros(2)})),
    ("checkpoint", "state_dict complex", "load_state_dict", T,
     lambda tl: tl.nn.Linear(2, 2).load_state_dict({"weight": np.zeros((2, 2), np.complex64),
                                                     "bias": np.zeros(2)})),
    # ---------------------------------------------------------------- schedulers / optimizers
    ("sched", "StepLR step 0", "StepLR", V,
     lambda tl: tl.optim.lr_scheduler.StepLR(_opt(tl), step_size=0)),
    ("sched", "StepLR float step", "StepLR", T,
     lambda tl: tl.optim.lr_scheduler.StepLR(_opt(tl), step_size=1.5)),
    ("sched", "MultiStepLR float milestone", "MultiStepLR", T,
     lambda tl: tl.optim.lr_scheduler.MultiStepLR(_opt(tl), milestones=[2.5])),
    ("sched", "MultiStepLR string milestone", "MultiStepLR", T,
     lambda tl: tl.optim.lr_scheduler.MultiStepLR(_opt(tl), milestones=["a"])),
    ("sched", "MultiStepLR negative milestone", "MultiStepLR", V,
     lambda tl: tl.optim.lr_scheduler.MultiStepLR(_opt(tl), milestones=[2, -1])),
    ("sched", "MultiStepLR milestones not a list", "MultiStepLR", T,
     lambda tl: tl.optim.lr_scheduler.MultiStepLR(_opt(tl), milestones=3)),
    ("sched", "SequentialLR float milestone", "SequentialLR", T,
     lambda tl: tl.optim.lr_scheduler.SequentialLR(
         o := _opt(tl), [tl.optim.lr_scheduler.StepLR(o, 1), tl.optim.lr_scheduler.StepLR(o, 2)],
         milestones=[1.5])),
    ("sched", "CosineAnnealingLR T_max 0", "CosineAnnealingLR", V + ("ZeroDivisionError",),
     lambda tl: tl.optim.lr_scheduler.CosineAnnealingLR(_opt(tl), T_max=0).step()),
    ("sched", "LambdaLR not callable", "LambdaLR", T,
     lambda tl: tl.optim.lr_scheduler.LambdaLR(_opt(tl), lr_lambda=3)),
    ("sched", "LambdaLR list not callable", "LambdaLR", T,
     lambda tl: tl.optim.lr_scheduler.LambdaLR(_opt(tl), lr_lambda=[None])),
    ("sched", "ExponentialLR not an optimizer", "ExponentialLR", T,
     lambda tl: tl.optim.lr_scheduler.ExponentialLR(object(), gamma=0.9)),
    ("sched", "LambdaLR not an optimizer", "LambdaLR", T,
     lambda tl: tl.optim.lr_scheduler.LambdaLR([0.1], lr_lambda=lambda e: 1.0)),
    ("sched", "OneCycleLR not an optimizer", "OneCycleLR", T,
     lambda tl: tl.optim.lr_scheduler.OneCycleLR(None, max_lr=0.1, total_steps=4)),
    ("sched", "ReduceLROnPlateau not an optimizer", "ReduceLROnPlateau", T,
     lambda tl: tl.optim.lr_scheduler.ReduceLROnPlateau({"lr": 0.1})),
    ("sched", "OneCycleLR no total", "OneCycleLR", V,
     lambda tl: tl.optim.lr_scheduler.OneCycleLR(_opt(tl), max_lr=0.1)),
    ("sched", "ReduceLROnPlateau factor 1", "ReduceLROnPlateau", V,
     lambda tl: tl.optim.lr_scheduler.ReduceLROnPlateau(_opt(tl), factor=1.0)),
    ("sched", "ReduceLROnPlateau mode", "ReduceLROnPlateau", V,
     lambda tl: tl.optim.lr_scheduler.ReduceLROnPlateau(_opt(tl), mode="middle")),
    ("sched", "SGD nesterov without momentum", "SGD", V,
     lambda tl: tl.optim.SGD([tl.nn.Parameter(np.zeros(2, np.float32))], lr=0.1,
                             nesterov=True)),
    ("sched", "SGD negative lr", "SGD", V,
     lambda tl: tl.optim.SGD([tl.nn.Parameter(np.zeros(2, np.float32))], lr=-0.1)),
    ("sched", "Adam beta 1", "Adam", V,
     lambda tl: tl.optim.Adam([tl.nn.Parameter(np.zeros(2, np.float32))], betas=(1.0, 0.9))),
    # ---------------------------------------------------------------- modules' sizes
    ("modules", "Linear float", "Linear", T, lambda tl: tl.nn.Linear(2.5, 3)),
    ("modules", "Linear negative", "Linear", V, lambda tl: tl.nn.Linear(-1, 3)),
    ("modules", "Linear too many elements", "Linear", V,
     lambda tl: tl.nn.Linear(2 ** 20, 2 ** 20)),
    ("modules", "Embedding negative", "Embedding", V, lambda tl: tl.nn.Embedding(-1, 2)),
    ("modules", "Embedding float", "Embedding", T, lambda tl: tl.nn.Embedding(3, 2.5)),
    ("modules", "Conv2d float kernel", "Conv2d", T, lambda tl: tl.nn.Conv2d(1, 2, 2.5)),
    ("modules", "Conv2d huge", "Conv2d", V, lambda tl: tl.nn.Conv2d(1, 2 ** 63, 3)),
    ("modules", "Conv2d groups", "Conv2d", V, lambda tl: tl.nn.Conv2d(3, 4, 3, groups=2)),
    ("modules", "LayerNorm float", "LayerNorm", T, lambda tl: tl.nn.LayerNorm(2.5)),
    ("modules", "BatchNorm1d negative", "BatchNorm1d", V, lambda tl: tl.nn.BatchNorm1d(-1)),
    ("modules", "GroupNorm float", "GroupNorm", T, lambda tl: tl.nn.GroupNorm(2.5, 4)),
    # ---------------------------------------------------------------- in-place ops
    ("inplace", "add_ shape", "add", V + R,
     lambda tl: _x(tl, 2, 3).add_(_x(tl, 4, 2, 3))),
    ("inplace", "add_ str", "add", T + V, lambda tl: _x(tl, 2).add_("x")),
    ("inplace", "mul_ broadcast grows", "mul", V + R,
     lambda tl: _x(tl, 1, 3).mul_(_x(tl, 2, 3))),
    ("inplace", "copy_ shape", "copy", V + R, lambda tl: _x(tl, 2, 3).copy_(_x(tl, 3, 2))),
    ("inplace", "fill_ many", "fill", V + R, lambda tl: _x(tl, 2).fill_(_x(tl, 3))),
    ("inplace", "clamp_ none", "clamp", V + R, lambda tl: _x(tl, 2).clamp_()),
    ("inplace", "leaf requires grad", "add", R,
     lambda tl: _x(tl, 2, requires_grad=True).add_(1.0)),
    ("inplace", "float setitem shape", "__setitem__", V + R,
     lambda tl: _setitem(_x(tl, 2, 3), 0, _x(tl, 4))),
    ("inplace", "float setitem out of range", "__setitem__", I,
     lambda tl: _setitem(_x(tl, 2, 3), 5, 1.0)),
    ("inplace", "float setitem float index", "__setitem__", I + T,
     lambda tl: _setitem(_x(tl, 2, 3), 1.5, 1.0)),
    ("inplace", "float setitem str", "__setitem__", T + V,
     lambda tl: _setitem(_x(tl, 2, 3), 0, "x")),
]

FAMILIES = ("factories", "int", "setitem", "losses", "rnn", "mha", "resample", "checkpoint",
            "sched", "modules", "inplace")
# families whose cases wait for the in-place mutation model (Tensor.add_, x[idx] = v)
NEEDS_MUTATION = ("inplace",)
# cases whose fix belongs to code another branch owns this round: they must not crash or hang;
# the kind and the op in the message are expected once that branch lands
PENDING = {
    "arange nan": "factories.py (torchapi): arange's bounds are checked there",
    "tensor ragged": "factories.py (torchapi): tensor() reports NumPy's message",
}


def run_surface_case(tl, idx: int):
    """Run case idx; ("ok", "") or (exception type name, message)."""
    call = CASES[idx][4]
    try:
        call(tl)
        return "ok", ""
    except Exception as e:  # noqa: BLE001 - the outcome is what we report
        return type(e).__name__, str(e)
