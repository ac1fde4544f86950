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
        with pytest.raises(TypeError, match="expected float32 or float64"):
            interop.from_dlpack(np.arange(3, dtype=np.int64))
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


# ---------------------------------------------------------------- DLPack lifetimes and versions
# The consumer is NumPy on the stub (host memory) and torchlean's own from_dlpack on CUDA
# (NumPy cannot import device memory): both hold the payload until their deleter runs.


class _Capsule:
    """Hands a consumer one prepared capsule (from_dlpack wants a producer object)."""

    def __init__(self, cap):
        self.cap = cap

    def __dlpack__(self, **kw):
        return self.cap

    def __dlpack_device__(self):
        return interop.device()


def _consume(producer):
    """(consumer object, read()): zero-copy import by NumPy (stub) or torchlean (CUDA)."""
    if tl.backend() == "stub":
        a = np.from_dlpack(producer)
        return a, lambda: np.array(a)
    if isinstance(producer, tl.Tensor):   # a CUDA consumer names its stream
        producer = _Capsule(producer.__dlpack__(max_version=(1, 0), stream=1))
    b = interop.from_dlpack(producer)
    return b, b.to_numpy


def _churn(s, n=200):
    """Many allocations of the exported size: a freed payload would be reused and overwritten."""
    keep = [s.tensor(np.full(4, 7.0, np.float32)) * 1.0 for _ in range(n)]
    return sum(float(k.numpy()[0]) for k in keep)


def test_export_outlives_session_step_until_the_consumer_lets_go():
    s = Session()
    before = tl.memory_stats()["live_bytes"]
    x = s.tensor(np.arange(4.0, dtype=np.float32)) * 2.0
    a, read = _consume(x)
    s.step()
    _churn(s)
    s.step()
    np.testing.assert_array_equal(read(), [0.0, 2.0, 4.0, 6.0])
    assert tl.memory_stats()["live_bytes"] == before + 16   # only the exported payload remains
    del a, read                                              # the consumer's deleter frees it
    assert tl.memory_stats()["live_bytes"] == before


def test_export_survives_buffer_release_and_each_consumer_pins_it():
    buf = tl.AnyBuffer.from_numpy(np.array([1.0, -2.0, 3.0], np.float32))
    before = tl.memory_stats()["live_bytes"]
    a, read_a = _consume(_Capsule(interop.to_dlpack(buf)))
    b, read_b = _consume(_Capsule(interop.to_dlpack(buf, versioned=True)))
    assert buf.release() == 1 and buf.release() == 0
    with pytest.raises(ValueError, match="released"):
        buf.to_numpy()
    s = Session()
    _churn(s)
    s.step()
    np.testing.assert_array_equal(read_a(), [1.0, -2.0, 3.0])
    del a, read_a
    np.testing.assert_array_equal(read_b(), [1.0, -2.0, 3.0])
    assert tl.memory_stats()["live_bytes"] == before
    del b, read_b
    assert tl.memory_stats()["live_bytes"] == before - 12


def test_unconsumed_capsule_unpins_its_buffer():
    buf = tl.AnyBuffer.from_numpy(np.ones(5, np.float32))
    before = tl.memory_stats()["live_bytes"]
    for versioned in (False, True):
        cap = interop.to_dlpack(buf, versioned=versioned)
        del cap
    assert not tl.buffer.EXPORTS
    buf.release()
    assert tl.memory_stats()["live_bytes"] == before - 20


def test_versioned_capsule_round_trip_and_max_version():
    s = Session()
    x = s.tensor(np.array([[1.5, 2.5, -3.0]], np.float32))
    stream = None if tl.backend() == "stub" else 1
    cap = x.__dlpack__(max_version=(1, 2), stream=stream)
    assert interop._api.PyCapsule_IsValid(cap, b"dltensor_versioned") == 1
    legacy = x.__dlpack__(stream=stream)
    assert interop._api.PyCapsule_IsValid(legacy, b"dltensor") == 1
    del cap, legacy
    # from_dlpack asks for a versioned capsule; both directions round-trip without a copy
    back = interop.tensor_from_dlpack(_Capsule(x.__dlpack__(max_version=(1, 0), stream=stream)),
                                      session=s)
    np.testing.assert_array_equal(back.numpy(), [[1.5, 2.5, -3.0]])
    assert back.value.buf.data_ptr() == x.value.buf.data_ptr()
    a, read = _consume(x)
    np.testing.assert_array_equal(read(), [[1.5, 2.5, -3.0]])


def test_import_keeps_the_producer_alive_until_the_wrapper_dies():
    import gc
    import weakref

    class Producer:
        """A DLPack producer whose memory is reachable only through the producer."""

        def __init__(self, buf):
            self.buf = buf

        def __dlpack__(self, max_version=None, **kw):
            return interop.to_dlpack(self.buf, versioned=max_version is not None)

        def __dlpack_device__(self):
            return interop.device()

    src = np.arange(6, dtype=np.float32) * 1.5
    p = Producer(tl.AnyBuffer.from_numpy(src))
    alive = weakref.ref(p)
    buf = interop.from_dlpack(p)
    del p
    gc.collect()
    assert alive() is not None
    s = Session()
    _churn(s)
    np.testing.assert_array_equal(buf.to_numpy(), src)
    del buf
    gc.collect()
    assert alive() is None


def test_read_only_versioned_import_is_copied():
    import ctypes
    src = tl.AnyBuffer.from_numpy(np.arange(3, dtype=np.float32))
    cap = interop.to_dlpack(src, versioned=True)
    p = interop._api.PyCapsule_GetPointer(cap, b"dltensor_versioned")
    mt = ctypes.cast(p, ctypes.POINTER(interop.DLManagedTensorVersioned)).contents
    mt.flags |= interop.FLAG_READ_ONLY
    buf = interop.from_dlpack(_Capsule(cap))
    np.testing.assert_array_equal(buf.to_numpy(), [0.0, 1.0, 2.0])
    assert buf.buf.data_ptr() != src.buf.data_ptr()
    del cap
    assert not tl.buffer.EXPORTS     # the producer's capsule was released after the copy
