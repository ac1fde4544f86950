"""torch.Generator on torchlean's SplitMix64 stream, generator= on the random factories,
multinomial, DataLoader shuffling and random_split / Subset.

References: the key schedule key_of(seed, counter) of DESIGN.md "Determinism and RNG" and the
pure-Python uniform / normal reference of torchlean.random; multinomial by its probabilities
(binomial tolerances from the sample size); random_split lengths by torch's rule in closed form.
"""
import math

import numpy as np
import pytest

import torchlean as tl
from torchlean import random as R
from torchlean.utils.data import DataLoader, Subset, TensorDataset, random_split


def _np(t):
    return np.asarray(t.numpy())


# ------------------------------------------------------------------ Generator


def test_generator_draws_follow_the_key_schedule():
    g = tl.Generator().manual_seed(1234)
    a = _np(tl.rand(7, 3, generator=g))
    b = _np(tl.rand(5, generator=g))
    np.testing.assert_array_equal(a.ravel(), R.uniform(21, R.key_of(1234, 0)))
    np.testing.assert_array_equal(b, R.uniform(5, R.key_of(1234, 1)))
    n = _np(tl.randn(9, generator=g))
    np.testing.assert_array_equal(n, R.normal(9, R.key_of(1234, 2)))


def test_same_seed_same_draws_other_seed_other_draws():
    def draws(seed):
        g = tl.Generator().manual_seed(seed)
        return (_np(tl.rand(11, generator=g)), _np(tl.randn(4, 3, generator=g)),
                tl.randint(0, 1000, (13,), generator=g).numpy(),
                tl.randperm(17, generator=g).numpy(),
                tl.multinomial(tl.tensor([1.0, 2.0, 3.0]), 2, generator=g).numpy())
    a, b, c = draws(5), draws(5), draws(6)
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(a[0], c[0]) and not np.array_equal(a[3], c[3])


def test_generator_stream_is_independent_of_the_global_one():
    tl.manual_seed(3)
    before = tl.get_rng_state().copy()
    g = tl.Generator().manual_seed(9)
    ref = _np(tl.rand(6, generator=g))
    tl.randperm(5, generator=g)
    np.testing.assert_array_equal(tl.get_rng_state(), before)   # the global counter stood still
    g2 = tl.Generator().manual_seed(9)
    tl.rand(100)                      # global draws in between do not move g2
    tl.randn(3)
    np.testing.assert_array_equal(_np(tl.rand(6, generator=g2)), ref)


def test_get_state_set_state_replays_and_initial_seed():
    g = tl.Generator()
    assert g.initial_seed() == 67280421310721          # torch.Generator()'s default seed
    g.manual_seed(77)
    tl.rand(3, generator=g)
    state = g.get_state()
    x = _np(tl.rand(8, generator=g))
    tl.rand(2, generator=g)
    g.set_state(state)
    np.testing.assert_array_equal(_np(tl.rand(8, generator=g)), x)
    assert g.initial_seed() == 77
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s
    with pytest.raises(ValueError, match="Generator.set_state"):
        g.set_state(np.zeros(3, dtype=np.uint64))


def test_manual_seed_returns_the_default_generator():
    gen = tl.manual_seed(42)
    assert gen is tl.default_generator
    assert tl.initial_seed() == 42 and gen.initial_seed() == 42
    x = _np(tl.rand(4))
    tl.manual_seed(42)
    np.testing.assert_array_equal(_np(tl.rand(4, generator=tl.default_generator)), x)


@pytest.mark.parametrize("seed,expect", [(2**64 - 1, 2**64 - 1), (-1, 2**64 - 1),
                                         (-2**63, 2**63), (7, 7)])
def test_manual_seed_accepts_torchs_range(seed, expect):
    tl.manual_seed(seed)
    assert tl.initial_seed() == expect
    assert tl.Generator().manual_seed(seed).initial_seed() == expect


@pytest.mark.parametrize("seed", [2**64, 2**70, -2**63 - 1])
def test_manual_seed_out_of_range_raises(seed):
    tl.manual_seed(5)
    with pytest.raises(ValueError, match="Overflow when unpacking long"):
        tl.manual_seed(seed)
    assert tl.initial_seed() == 5                       # the stream was left as it was
    with pytest.raises(ValueError, match="Overflow"):
        tl.Generator().manual_seed(seed)


def test_manual_seed_out_of_range_matches_torchs_kind():
    torch = pytest.importorskip("torch")
    for seed in (2**64, 2**70):
        # torch.manual_seed would also queue the seed for CUDA, whose later lazy init in this
        # process then fails: a CPU generator raises the same error without that
        with pytest.raises(Exception) as theirs:
            torch.Generator().manual_seed(seed)
        with pytest.raises(Exception) as ours:
            tl.manual_seed(seed)
        assert isinstance(ours.value, type(theirs.value))
    assert torch.Generator().initial_seed() == tl.Generator().initial_seed()


def test_generator_of_the_wrong_kind_is_refused():
    with pytest.raises(TypeError, match="randperm: generator must be a torchlean.Generator"):
        tl.randperm(3, generator=np.random.default_rng(0))


def test_like_factories_take_a_generator():
    x = tl.zeros(3, 2)
    a = _np(tl.rand_like(x, generator=tl.Generator().manual_seed(4)))
    np.testing.assert_array_equal(a.ravel(), R.uniform(6, R.key_of(4, 0)))
    b = tl.randint_like(x, 10, generator=tl.Generator().manual_seed(4)).numpy()
    assert b.shape == (3, 2) and b.min() >= 0 and b.max() < 10


# ------------------------------------------------------------------ multinomial


def test_multinomial_with_replacement_matches_the_probabilities():
    w = np.array([1.0, 2.0, 0.0, 3.0, 4.0])
    n = 20000
    s = tl.multinomial(tl.tensor(w), n, replacement=True,
                       generator=tl.Generator().manual_seed(0)).numpy()
    assert s.dtype == np.int64 and s.shape == (n,)
    p = w / w.sum()
    freq = np.bincount(s, minlength=5) / n
    assert freq[2] == 0                                  # weight 0 is never drawn
    tol = 5 * np.sqrt(p * (1 - p) / n) + 1e-12
    assert np.all(np.abs(freq - p) <= tol), (freq, p)


def test_multinomial_without_replacement_is_sequential_sampling():
    w = np.array([1.0, 2.0, 3.0])
    rows = 30000
    s = tl.multinomial(tl.tensor(np.tile(w, (rows, 1))), 2,
                       generator=tl.Generator().manual_seed(1)).numpy()
    assert s.shape == (rows, 2) and np.all(s[:, 0] != s[:, 1])
    W = w.sum()
    for i in range(3):
        for j in range(3):
            if i == j:
                continue
            p = w[i] / W * w[j] / (W - w[i])
            f = np.mean((s[:, 0] == i) & (s[:, 1] == j))
            assert abs(f - p) <= 5 * math.sqrt(p * (1 - p) / rows), (i, j, f, p)


def test_multinomial_zero_weights_come_last_and_method_form():
    x = tl.tensor([[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]])
    s = x.multinomial(4).numpy()
    np.testing.assert_array_equal(s, [[1, 0, 2, 3], [3, 0, 1, 2]])
    assert tl.multinomial(tl.zeros(0, 3) + 1.0, 2).numpy().shape == (0, 2)


def test_multinomial_global_stream_is_seeded():
    w = tl.tensor([0.2, 0.3, 0.5])
    tl.manual_seed(8)
    a = tl.multinomial(w, 50, True).numpy()
    tl.manual_seed(8)
    np.testing.assert_array_equal(tl.multinomial(w, 50, True).numpy(), a)


@pytest.mark.parametrize("args,err,msg", [
    (([1.0, 0.0, -1.0], 1), RuntimeError, "element < 0"),
    (([1.0, float("inf")], 1), RuntimeError, "`inf`, `nan`"),
    (([1.0, float("nan")], 1), RuntimeError, "`inf`, `nan`"),
    (([0.0, 0.0], 1), RuntimeError, "sum of probabilities <= 0"),
    (([1.0, 1.0], 3), RuntimeError, "n_sample > prob_dist.size"),
    (([1.0, 1.0], 0), RuntimeError, "n_sample <= 0"),
    ((1.0, 1), RuntimeError, "1 or 2 dim"),
])
def test_multinomial_bad_input(args, err, msg):
    data, n = args
    with pytest.raises(err, match=msg):
        tl.multinomial(tl.tensor(data), n)
    torch = pytest.importorskip("torch")
    with pytest.raises(err):
        torch.multinomial(torch.tensor(data), n)


def test_multinomial_type_errors():
    with pytest.raises(TypeError, match="num_samples"):
        tl.multinomial(tl.tensor([1.0, 1.0]), 1.5)
    with pytest.raises(RuntimeError, match="floating-point"):
        tl.multinomial(tl.tensor([1, 1]), 1)


# ------------------------------------------------------------------ DataLoader, random_split


def _loader_order(loader):
    return np.concatenate([yb.numpy() for _, yb in loader])


def test_dataloader_generator_shuffles_reproducibly_and_independently():
    ds = TensorDataset(np.arange(23, dtype=np.float32), np.arange(23))
    a = DataLoader(ds, batch_size=5, shuffle=True, generator=tl.Generator().manual_seed(3))
    e1, e2 = _loader_order(a), _loader_order(a)
    assert sorted(e1) == list(range(23)) and sorted(e2) == list(range(23))
    assert not np.array_equal(e1, e2)                   # a new permutation each epoch
    np.testing.assert_array_equal(e1, R.permutation(23, R.key_of(3, 0)))
    np.testing.assert_array_equal(e2, R.permutation(23, R.key_of(3, 1)))
    tl.manual_seed(0)
    before = tl.get_rng_state().copy()
    b = DataLoader(ds, batch_size=5, shuffle=True, generator=tl.Generator().manual_seed(3))
    np.testing.assert_array_equal(_loader_order(b), e1)
    np.testing.assert_array_equal(tl.get_rng_state(), before)


def test_dataloader_without_generator_follows_manual_seed_per_epoch():
    ds = TensorDataset(np.zeros((9, 2), dtype=np.float32), np.arange(9))
    tl.manual_seed(11)
    loader = DataLoader(ds, batch_size=4, shuffle=True)
    first = _loader_order(loader)
    np.testing.assert_array_equal(first, R.permutation(9, R.key_of(11, 0)))
    tl.manual_seed(11)
    np.testing.assert_array_equal(_loader_order(loader), first)
    assert np.array_equal(_loader_order(DataLoader(ds, batch_size=4)), np.arange(9))


def test_dataloader_custom_dataset_and_collate_fn():
    class Squares:
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return np.float32(i * i)

    (batch,) = list(DataLoader(Squares(), batch_size=5))
    np.testing.assert_array_equal(batch.numpy(), [0, 1, 4, 9, 16])
    got = list(DataLoader(Squares(), batch_size=2, collate_fn=lambda items: sum(items)))
    assert got == [1.0, 13.0, 16.0]


def test_random_split_lengths_fractions_and_cover():
    ds = TensorDataset(np.arange(10, dtype=np.float32), np.arange(10))
    parts = random_split(ds, [0.33, 0.33, 0.34], generator=tl.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [4, 3, 3]          # floors 3,3,3 + remainder to the first
    idx = np.concatenate([p.indices for p in parts])
    np.testing.assert_array_equal(idx, R.permutation(10, R.key_of(0, 0)))
    a, b = random_split(range(7), [5, 2], generator=tl.Generator().manual_seed(0))
    assert sorted(list(a) + list(b)) == list(range(7))
    torch = pytest.importorskip("torch")
    theirs = torch.utils.data.random_split(range(10), [0.33, 0.33, 0.34])
    assert [len(p) for p in theirs] == [len(p) for p in parts]


def test_random_split_bad_lengths():
    with pytest.raises(ValueError, match="does not equal the length"):
        random_split(range(5), [2, 2])
    with pytest.raises(ValueError, match="Fraction at index 1"):
        random_split(range(5), [0.5, 1.5, -1.0])


def test_subset_indexes_through():
    ds = TensorDataset(np.arange(6, dtype=np.float32) * 10, np.arange(6))
    sub = Subset(ds, [4, 0, 2])
    assert len(sub) == 3 and sub[0][1] == 4 and sub[2][0] == 20.0
    xb, yb = next(iter(DataLoader(sub, batch_size=3)))
    np.testing.assert_array_equal(yb.numpy(), [4, 0, 2])


def test_dataset_subclass_of_tensors_batches_as_torch():
    from torchlean.utils.data import Dataset

    class Pairs(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return tl.tensor([float(i), 2.0 * i]), i % 2

    xb, yb = next(iter(DataLoader(Pairs(), batch_size=3)))
    assert isinstance(xb, tl.Tensor) and isinstance(yb, tl.IntTensor)
    np.testing.assert_array_equal(xb.numpy(), [[0, 0], [1, 2], [2, 4]])
    np.testing.assert_array_equal(yb.numpy(), [0, 1, 0])


def test_generator_copies_continue_the_stream_and_cuda_is_checked():
    import copy
    import pickle
    g = tl.Generator().manual_seed(21)
    tl.rand(3, generator=g)
    c1, c2 = copy.deepcopy(g), pickle.loads(pickle.dumps(g))
    want = _np(tl.rand(4, generator=g))
    np.testing.assert_array_equal(_np(tl.rand(4, generator=c1)), want)
    np.testing.assert_array_equal(_np(tl.rand(4, generator=c2)), want)
    assert copy.deepcopy(tl.default_generator) is tl.default_generator
    if tl.backend() != "cuda":
        with pytest.raises(RuntimeError, match="no CUDA device"):
            tl.Generator(device="cuda")
