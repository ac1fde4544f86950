"""x[key] for keys of ints, slices (any step), None and Ellipsis: the flat positions the gather
plan reads equal NumPy's own indexing of an arange of x's shape (the reference), and the values
equal NumPy's x[key]; out-of-range ints raise NumPy's IndexError."""
import numpy as np
import pytest

import torchlean as tl
from torchlean.indexing import plan_getitem

rng = np.random.default_rng(7)


def _random_key(shape):
    key = []
    for n in shape:
        r = rng.random()
        if r < 0.25:
            key.append(int(rng.integers(-n, n)))
        elif r < 0.85:
            a, b = (int(v) for v in rng.integers(-n - 2, n + 2, size=2))
            step = int(rng.choice([1, 1, 2, 3, -1, -2]))
            key.append(slice(a if rng.random() < 0.7 else None, b if rng.random() < 0.7 else None, step))
        else:
            key.append(slice(None))
        if rng.random() < 0.15:
            key.append(None)
    if rng.random() < 0.3 and key:
        i = int(rng.integers(0, len(key)))
        key = key[:i] + [Ellipsis] + key[i + 2:]
    return tuple(key)


@pytest.mark.parametrize("shape", [(7,), (3, 5), (1, 9), (4, 1, 6), (2, 3, 4, 5), (5, 1)])
def test_positions_match_numpy(shape):
    pos = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    for _ in range(60):
        key = _random_key(shape)
        want = pos[key]
        plan = plan_getitem(shape, key, np.asarray)
        if plan.kind == "gather":
            np.testing.assert_array_equal(plan.indices.reshape(want.shape), want)
        assert tuple(plan.shape) == want.shape


def test_values_and_errors_through_the_tensor():
    a = rng.standard_normal((6, 7, 5)).astype(np.float32)
    x = tl.tensor(a)
    for key in [(Ellipsis, slice(0, 3)), (slice(None, None, 2), 1), (None, 2, slice(1, None), None),
                (slice(5, 0, 2), Ellipsis, 4), (-1, slice(None, None, 3), slice(1, 4))]:
        np.testing.assert_array_equal(x[key].numpy(), a[key])
    with pytest.raises(IndexError, match="out of bounds|invalid"):
        x[:, 7]
    with pytest.raises(IndexError):
        x[0, 0, 0, 0]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
