"""The tiled grouped/depthwise CUDA convolution kernels (native/cuda/conv_grouped_tiles.cuh) run on
the CPU through the small CUDA emulation (tests/native/cuda_emu), against the loaded backend's
conv_grouped ops (the stub in CI): forward and input gradient bit for bit in every mode (they run
the formulas' chains; NaN as NaN, whatever its payload), and the default mode's kernel/bias
gradient slices close to the backend and to float64. Shapes cross tile edges (32
columns, 8 * rows rows), the plane loop wraps (a short grid), threads run in both scheduling
orders; inf, NaN and signed zeros meet padding taps."""

import numpy as np
import pytest

import torchlean as tl
from torchlean._generated import ops as O
from torchlean.buffer import AnyBuffer
from tests import reference as R
from cuda_emu import build_emu


@pytest.fixture(scope="module")
def emu():
    return build_emu("conv_grouped_emu.so", "the tiled grouped convolution kernels", """
        int emu_gconv_tiled(const int *g, int dinput, int rows, const float *w, const float *b,
                            const float *src, float *dst, int cap, int reverse);
        int emu_gconv_wgrad(const int *g, const float *x, const float *gy, float *dw, float *db,
                            long long want, int reverse);
    """)


def _data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, size=shape).astype(np.float32)


def _bits(a):
    """the bits, every NaN as one pattern (the CPU emulation and a GPU write different NaNs)"""
    a = np.ascontiguousarray(a, np.float32)
    return np.where(np.isnan(a), np.uint32(0x7fc00000), a.view(np.uint32))


class Case:
    """one convolution: data, the geometry as the emulation reads it, the backend's results"""

    def __init__(self, n, cin, cout, groups, hw, k, stride=1, padding=None, dilation=1, seed=0):
        pad = k // 2 * dilation if padding is None else padding
        self.attrs = dict(stride=stride, padding=pad, dilation=dilation, groups=groups)
        self.w = _data(cout * groups, cin, k, k, seed=seed)
        self.b = _data(cout * groups, seed=seed + 1)
        self.x = _data(n, cin * groups, *hw, seed=seed + 2)
        oh, ow = ((s + 2 * pad - dilation * (k - 1) - 1) // stride + 1 for s in hw)
        self.gy = _data(n, cout * groups, oh, ow, seed=seed + 3)
        self.g = np.array([n, cin, cout, groups, *hw, k, k, oh, ow, stride, stride, pad, pad,
                           dilation, dilation], np.int32)

    def backend(self):
        W, B, X, G = (AnyBuffer.from_numpy(a) for a in (self.w, self.b, self.x, self.gy))
        y = O.conv_grouped(W, B, X, **self.attrs).to_numpy()
        dw, db, dx = (o.to_numpy() for o in O.conv_grouped_backward(W, X, G, **self.attrs))
        return y, dw, db, dx


def _ptr(ffi, a):
    return ffi.cast("float *", ffi.from_buffer(a))


def tiled(emu, c, dinput, rows=4, cap=65535, reverse=False):
    ffi, lib = emu
    out = np.full(c.x.shape if dinput else c.gy.shape, np.nan, np.float32)
    src = c.gy if dinput else c.x
    st = lib.emu_gconv_tiled(ffi.cast("int *", ffi.from_buffer(c.g)), int(dinput), rows,
                             _ptr(ffi, c.w), _ptr(ffi, c.b), _ptr(ffi, src), _ptr(ffi, out), cap,
                             int(reverse))
    assert st == 0, st
    return out


CASES = [  # n, cin, cout (per group), groups, (H, W), k, stride, padding, dilation
    (2, 1, 1, 3, (37, 35), 3, 1, None, 1),      # depthwise, two tiles each way
    (1, 1, 1, 2, (9, 40), 5, 1, None, 2),       # depthwise 5x5, dilated
    (2, 1, 1, 2, (11, 13), 7, 1, 3, 1),         # depthwise 7x7
    (1, 1, 1, 2, (1, 1), 3, 1, 1, 1),           # a 1x1 image: every tap but one in the padding
    (2, 1, 1, 2, (12, 34), 3, 1, 0, 1),         # no padding
    (1, 3, 5, 2, (10, 33), 3, 1, None, 1),      # grouped, channels not a multiple of 8
    (1, 9, 4, 2, (9, 9), 3, 1, 2, 1),           # grouped, more padding than the halo
    (2, 2, 3, 2, (8, 11), 5, 1, None, 1),       # grouped 5x5
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows", [1, 4])
def test_tiled_forward_and_input_gradient_are_the_backend_bit_for_bit(emu, case, rows):
    c = Case(*case)
    y, _, _, dx = c.backend()
    np.testing.assert_array_equal(_bits(tiled(emu, c, False, rows)), _bits(y))
    np.testing.assert_array_equal(_bits(tiled(emu, c, True, rows, cap=3, reverse=True)), _bits(dx))


@pytest.mark.parametrize("case", [(3, 1, 1, 2, (19, 21), 3, 2, 1, 1),
                                  (1, 1, 1, 3, (40, 37), 5, 2, 2, 1),
                                  (2, 1, 1, 2, (17, 35), 3, 3, 2, 2),
                                  (1, 1, 1, 2, (9, 8), 7, 2, 3, 1)])
@pytest.mark.parametrize("rows", [1, 2])
def test_strided_depthwise_forward_and_input_gradient_are_tiled(emu, case, rows):
    c = Case(*case)
    y, _, _, dx = c.backend()
    np.testing.assert_array_equal(_bits(tiled(emu, c, False, rows, cap=2)), _bits(y))
    np.testing.assert_array_equal(_bits(tiled(emu, c, True, rows, cap=5, reverse=True)), _bits(dx))


def test_strided_grouped_input_gradient_is_not_tiled(emu):
    c = Case(1, 2, 3, 2, (17, 40), 3, 2, 1, 1)
    np.testing.assert_array_equal(_bits(tiled(emu, c, False, 1, cap=2)), _bits(c.backend()[0]))
    ffi, lib = emu
    out = np.zeros_like(c.x)
    assert lib.emu_gconv_tiled(ffi.cast("int *", ffi.from_buffer(c.g)), 1, 1, _ptr(ffi, c.w),
                               _ptr(ffi, c.b), _ptr(ffi, c.gy), _ptr(ffi, out), 9, 0) == -1


def test_inf_nan_and_signed_zeros_meet_the_padding_as_in_the_formulas(emu):
    for groups_case in ((1, 1, 1, 2, (5, 6), 3, 1, 1, 1), (1, 2, 2, 2, (5, 6), 3, 1, 1, 1),
                        (1, 1, 1, 2, (7, 6), 3, 2, 1, 1)):
        c = Case(*groups_case, seed=7)
        c.w[0, 0, 0, 0] = np.inf         # reads padding in the forward (inf * 0 = NaN)
        c.w[-1, -1, 2, 2] = -np.inf      # reaches off the plane in the input gradient (skipped)
        c.x[0, -1, 2, 3] = np.nan
        c.gy[0, 0, 1, :] = -0.0
        c.gy[0, -1, -1, -1] = np.inf
        y, _, _, dx = c.backend()
        for rows in (1, 2):
            np.testing.assert_array_equal(_bits(tiled(emu, c, False, rows)), _bits(y))
            np.testing.assert_array_equal(_bits(tiled(emu, c, True, rows, reverse=True)), _bits(dx))


def _wgrad(emu, c, want, reverse=False):
    ffi, lib = emu
    dw = np.full(c.w.shape, np.nan, np.float32)
    db = np.full(c.b.shape, np.nan, np.float32)
    st = lib.emu_gconv_wgrad(ffi.cast("int *", ffi.from_buffer(c.g)), _ptr(ffi, c.x),
                             _ptr(ffi, c.gy), _ptr(ffi, dw), _ptr(ffi, db), want, int(reverse))
    assert st == 0, st
    return dw, db


@pytest.mark.parametrize("case,want", [
    ((3, 1, 1, 3, (13, 17), 3, 1, None, 1), 256),    # slices cross samples
    ((2, 1, 1, 2, (9, 10), 7, 1, 3, 1), 100000),     # one slice
    ((2, 1, 1, 2, (15, 16), 3, 2, 1, 1), 300),       # strided
    ((1, 3, 2, 2, (7, 9), 5, 1, 2, 1), 256),         # grouped
])
def test_kernel_gradient_slices_against_backend_and_float64(emu, case, want):
    c = Case(*case)
    _, dw_b, db_b, _ = c.backend()
    dw, db = _wgrad(emu, c, want)
    np.testing.assert_allclose(dw, dw_b, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(db, db_b, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(db, c.gy.astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-5)
    # float64: dL/dw[o, i, u, v] = <conv(e_oiuv), gy>
    x64, g64 = c.x.astype(np.float64), c.gy.astype(np.float64)
    for idx in [(0, 0, 0, 0), tuple(s - 1 for s in c.w.shape), (c.w.shape[0] // 2, 0, 1, 1)]:
        e = np.zeros(c.w.shape)
        e[idx] = 1
        want64 = np.sum(R.conv_grouped(e, np.zeros(c.b.shape), x64, stride=c.attrs["stride"],
                                       padding=c.attrs["padding"], dilation=c.attrs["dilation"],
                                       groups=c.attrs["groups"]) * g64)
        np.testing.assert_allclose(dw[idx], want64, rtol=1e-5, atol=1e-5)
    # the schedule fixes the order: the other scheduling order gives the same bits
    dw2, db2 = _wgrad(emu, c, want, reverse=True)
    np.testing.assert_array_equal(_bits(dw2), _bits(dw))
    np.testing.assert_array_equal(_bits(db2), _bits(db))
