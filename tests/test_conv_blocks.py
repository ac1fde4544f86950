"""The stub's convolution takes a sample's im2col columns in blocks (native/stub/conv_pool.c:
blocks of positions for the products that read them, blocks of channels for those that go
through col2im, about 2^17 floats each) and runs its GEMMs on the packed kernel of linalg.c. These
cases span several blocks of each kind, the last one short, and must still give exact mode's
reference bits: the CUDA exact kernels' CPU emulation (implicit GEMM, no columns at all,
tests/test_conv_exact_kernels.py) bit for bit, forward and both gradients, both directions.
"""
import numpy as np
import pytest

from test_conv_exact_kernels import (assert_same_bits, backend_exact, case, emu,  # noqa: F401
                                     emulate)


# N, Cin, Cout, size, kernel, stride, padding: positions x (Cin k) past 2^17 (two position blocks,
# the second short); 9 x 1024 columns per channel, so 40 channels make three channel blocks
CASES = [
    (2, 16, 9, (32, 32), (3, 3), (1, 1), (1, 1)),
    (1, 40, 5, (32, 32), (3, 3), (1, 1), (1, 1)),
    (1, 7, 40, (33, 31), (3, 3), (1, 1), (1, 1)),
    (2, 20, 6, (40, 30), (3, 2), (2, 1), (1, 0)),
]


@pytest.mark.parametrize("shape", CASES, ids=lambda s: "x".join(map(str, s[:3])) + f"-{s[3][0]}")
@pytest.mark.parametrize("transpose", [0, 1])
def test_blocked_columns_keep_the_reference_bits(emu, shape, transpose):  # noqa: F811
    N, cin, cout, size, kernel, stride, padding = shape
    g, w, b, x, gy = case(7 + cin + transpose, N, cin, cout, size, kernel, stride, padding,
                          transpose)
    got = emulate(emu, g, transpose, w, b, x, gy)
    assert_same_bits(got, backend_exact(transpose, w, b, x, gy, stride, padding))


def test_blocked_columns_match_float64():
    """the same blocked path, default mode, against a float64 direct convolution"""
    from torchlean import AnyBuffer, ops
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 16, 32, 32)).astype(np.float32)
    w = (rng.standard_normal((9, 16, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    y = ops.conv(AnyBuffer.from_numpy(w), AnyBuffer.from_numpy(b), AnyBuffer.from_numpy(x),
                 stride=1, padding=1).to_numpy()
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((2, 9, 32, 32)) + b[None, :, None, None]
    for i in range(3):
        for j in range(3):
            ref += np.einsum("oc,nchw->nohw", w[:, :, i, j], xp[:, :, i:i + 32, j:j + 32])
    assert np.abs(y - ref).max() <= 1e-4 * (1 + np.abs(ref).max())
