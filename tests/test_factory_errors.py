"""The factory repros of issue 33: each gives torch's value or torch's kind of error (checked
against the literal values torch gives, and against torch itself where it imports)."""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean.errors import BackendError

INF, NAN = float("inf"), float("nan")


def _same_kind_as_torch(expr_torch, err):
    """Where the installed torch refuses the call too, it raises the same kind of error (older
    torch releases accept some of these calls: then there is nothing to compare)."""
    torch = pytest.importorskip("torch")
    try:
        expr_torch(torch)
    except Exception as e:   # noqa: BLE001 - the kind is what is compared
        assert isinstance(e, err), f"torch raised {type(e).__name__}, torchlean {err.__name__}"


@pytest.mark.parametrize("args,msg", [
    ((-3,), "inconsistent with step sign"),
    ((0, 10, -1), "inconsistent with step sign"),
    ((10, 0, 1), "inconsistent with step sign"),
    ((0, 10, INF), "step must be finite"),
    ((0, 10, NAN), "step must be finite"),
    ((0, 10, 0), "step must be nonzero"),
    ((0, INF), "unsupported range"),
    ((NAN, 3.0), "unsupported range"),
])
def test_arange_bad_ranges_raise_runtime_error(args, msg):
    with pytest.raises(RuntimeError, match=msg):
        tl.arange(*args)
    _same_kind_as_torch(lambda torch: torch.arange(*args), RuntimeError)


def test_arange_values_closed_form():
    np.testing.assert_array_equal(tl.arange(0, 10, 3).numpy(), [0, 3, 6, 9])
    np.testing.assert_array_equal(tl.arange(10, 0, -3).numpy(), [10, 7, 4, 1])
    assert tl.arange(5, 5).numpy().shape == (0,)
    np.testing.assert_allclose(tl.arange(0.0, 1.0, 0.25).numpy(), [0, 0.25, 0.5, 0.75])
    np.testing.assert_array_equal(tl.arange(-7, 8, 5).numpy(), [-7, -2, 3])


@pytest.mark.parametrize("value", [NAN, INF, -INF, 1e20, -1e20, 9.3e18, 2**63])
def test_full_int64_out_of_range_raises(value):
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t without overflow"):
        tl.full((2,), value, dtype=tl.int64)
    _same_kind_as_torch(lambda torch: torch.full((2,), value, dtype=torch.int64), RuntimeError)


def test_full_int64_truncates_and_keeps_the_extremes():
    np.testing.assert_array_equal(tl.full((2,), 1.7, dtype=tl.int64).numpy(), [1, 1])
    np.testing.assert_array_equal(tl.full((1,), -1.7, dtype=tl.int64).numpy(), [-1])
    assert tl.full((1,), 2**63 - 1).numpy()[0] == 2**63 - 1
    assert tl.full((1,), -2**63).numpy()[0] == -2**63
    with pytest.raises(RuntimeError, match="without overflow"):
        tl.full((1,), 2**63)


@pytest.mark.parametrize("data", [[1e20], [NAN], [-INF], [1.0, -1e19]])
def test_tensor_int64_out_of_range_raises(data):
    with pytest.raises(RuntimeError, match="cannot be converted to type int64 without overflow"):
        tl.tensor(data, dtype=tl.int64)
    _same_kind_as_torch(lambda torch: torch.tensor(data, dtype=torch.int64), RuntimeError)


def test_tensor_int64_truncates_toward_zero():
    np.testing.assert_array_equal(tl.tensor([1.7, -1.7, 0.5], dtype=tl.int64).numpy(), [1, -1, 0])


@pytest.mark.parametrize("data", [2**63, [2**64 - 1], [1, 2**63], [-2**63 - 1], [[0], [2**70]]])
def test_python_ints_outside_int64_raise_value_error(data):
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        tl.tensor(data)
    _same_kind_as_torch(lambda torch: torch.tensor(data), ValueError)


def test_uint64_arrays_at_or_above_2_63_raise_instead_of_wrapping():
    a = np.array([1, 2**63], dtype=np.uint64)
    with pytest.raises(RuntimeError, match="without overflow"):
        tl.tensor(a)
    with pytest.raises(RuntimeError, match="without overflow"):
        tl.from_numpy(a)
    ok = np.array([3, 2**63 - 1], dtype=np.uint64)
    np.testing.assert_array_equal(tl.tensor(ok).numpy(), [3, 2**63 - 1])
    np.testing.assert_array_equal(tl.from_numpy(ok).numpy(), [3, 2**63 - 1])


def test_randperm_honours_the_dtype():
    tl.manual_seed(0)
    p = tl.randperm(9, dtype=tl.float32)
    assert isinstance(p, tl.Tensor) and p.dtype == tl.float32
    assert sorted(p.numpy().tolist()) == list(range(9))
    tl.manual_seed(0)
    np.testing.assert_array_equal(tl.randperm(9).numpy(), p.numpy().astype(np.int64))
    with pytest.raises(RuntimeError, match="negative dimension"):
        tl.randperm(-1)
    with pytest.raises(TypeError, match="'n' must be int"):
        tl.randperm(2.5)


def test_randperm_on_an_unavailable_device_raises():
    if tl.backend() == "cuda":
        pytest.skip("cuda is available on this backend")
    with pytest.raises(BackendError, match="no CUDA device"):
        tl.randperm(4, device="cuda")


def test_linspace_int64_truncates_as_torch():
    np.testing.assert_array_equal(tl.linspace(0, 10, 4, dtype=tl.int64).numpy(), [0, 3, 6, 10])
    np.testing.assert_array_equal(tl.linspace(-1.5, 10, 4, dtype=tl.int64).numpy(),
                                  [-1, 2, 6, 10])
    with pytest.raises(RuntimeError, match="non-negative"):
        tl.linspace(0, 1, -2)
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(torch.linspace(-1.5, 10, 4, dtype=torch.int64).numpy(),
                                  [-1, 2, 6, 10])


@pytest.mark.parametrize("make", [
    lambda: tl.zeros(2, requires_grad="no"), lambda: tl.ones(2, requires_grad=1),
    lambda: tl.tensor([1.0], requires_grad="no"), lambda: tl.rand(2, requires_grad="no"),
    lambda: tl.randn(2, requires_grad="no"), lambda: tl.full((2,), 1.0, requires_grad="no"),
    lambda: tl.arange(3.0, requires_grad="no"), lambda: tl.linspace(0, 1, 3, requires_grad="no"),
])
def test_requires_grad_must_be_a_bool(make):
    with pytest.raises(TypeError, match="requires_grad"):
        make()


def test_requires_grad_true_still_works():
    x = tl.zeros(2, requires_grad=True)
    assert x.requires_grad
    assert math.isclose(float(tl.full((1,), 2.5, requires_grad=np.bool_(True)).numpy()[0]), 2.5)
