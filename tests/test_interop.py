import numpy as np
import pytest

import torchlean as tl
from torchlean import interop
from torchlean.session import Session


def test_array_and_from_numpy():
    s = Session()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = interop.from_numpy(a, session=s)
    np.testing.assert_array_equal(np.asarray(t), a)
    assert np.asarray(t, dtype=np.float64).dtype == np.float64


@pytest.mark.skipif(tl.backend() != "stub", reason="CPU DLPack path")
def test_numpy_from_dlpack_zero_copy():
    s = Session()
    t = s.tensor(np.arange(5, dtype=np.float32))
    a = np.from_dlpack(t)
    np.testing.assert_array_equal(a, np.arange(5, dtype=np.float32))
    assert a.ctypes.data == t.value.buf.data_ptr()


@pytest.mark.skipif(tl.backend() != "stub", reason="CPU DLPack path")
def test_import_numpy_zero_copy():
    s = Session()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = interop.tensor_from_dlpack(a, session=s)
    a[0, 0] = 42.0
    assert t.numpy()[0, 0] == 42.0
    assert t.shape == (2, 3)
    with pytest.raises(TypeError):
        interop.from_dlpack(np.arange(3, dtype=np.float64))


@pytest.mark.cuda
def test_torch_and_cupy_roundtrip_on_cuda():
    import torch
    import cupy
    s = Session()
    t = s.tensor(np.arange(4, dtype=np.float32))
    tt = torch.from_dlpack(t)
    assert tt.is_cuda and tt.cpu().numpy().tolist() == [0, 1, 2, 3]
    c = cupy.arange(3, dtype=cupy.float32)
    back = interop.tensor_from_dlpack(c, session=s)
    np.testing.assert_array_equal(back.numpy(), [0, 1, 2])
    with pytest.raises(ValueError):
        t.__array__(copy=False)
