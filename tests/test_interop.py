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


def test_numpy_dlpack_follows_the_backend_device():
    """On the stub a tensor is host memory: NumPy imports it without a copy. On CUDA it is
    device memory, which NumPy cannot import: the export names the CUDA device and NumPy refuses."""
    s = Session()
    t = s.tensor(np.arange(5, dtype=np.float32))
    if tl.backend() == "stub":
        assert t.__dlpack_device__() == (interop.kDLCPU, 0)
        a = np.from_dlpack(t)
        np.testing.assert_array_equal(a, np.arange(5, dtype=np.float32))
        assert a.ctypes.data == t.value.buf.data_ptr()
    else:
        assert t.__dlpack_device__() == (interop.kDLCUDA, 0)
        with pytest.raises(BufferError, match="CUDA memory"):
            np.from_dlpack(t)


def test_import_numpy_follows_the_backend_device():
    """A NumPy array is host memory: the stub imports it without a copy; the CUDA backend
    refuses it with a ValueError naming both devices (use from_numpy to upload)."""
    s = Session()
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    if tl.backend() == "stub":
        t = interop.tensor_from_dlpack(a, session=s)
        a[0, 0] = 42.0
        assert t.numpy()[0, 0] == 42.0
        assert t.shape == (2, 3)
        with pytest.raises(TypeError):
            interop.from_dlpack(np.arange(3, dtype=np.float64))
    else:
        with pytest.raises(ValueError, match="from_dlpack.*device type 1"):
            interop.tensor_from_dlpack(a, session=s)
        t = interop.from_numpy(a, session=s)
        np.testing.assert_array_equal(t.numpy(), a)


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
