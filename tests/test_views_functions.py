"""The free-function forms of view ops (torch.split, chunk, split_with_sizes, diagonal, narrow,
unbind, select) return views as the methods do: a write into a piece reaches the base, a write
into the base is seen by the piece, and gradients flow back to the base. References: NumPy
views of the same array, closed-form gradients."""
import numpy as np
import pytest

import torchlean as tl


def _base(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return tl.tensor(a), a.copy()


@pytest.mark.parametrize("n, size", [(7, 3), (1, 1), (6, 2)])
def test_split_and_chunk_pieces_write_into_the_base(n, size):
    x, ref = _base((n, 2))
    pieces = tl.split(x, size)
    pieces[-1].fill_(5.0)
    ref[(len(pieces) - 1) * size:] = 5.0
    np.testing.assert_array_equal(x.numpy(), ref)
    x2, ref2 = _base((n, 2), 1)
    first = tl.chunk(x2, 2, dim=0)[0]
    first.mul_(2.0)
    k = -(-n // 2)
    ref2[:k] *= 2.0
    np.testing.assert_array_equal(x2.numpy(), ref2)


def test_split_with_sizes_and_unbind_and_narrow_are_views():
    x, ref = _base((5, 3))
    a, b = tl.split_with_sizes(x, [2, 3], dim=0)
    b.add_(1.0)
    ref[2:] += 1.0
    np.testing.assert_array_equal(x.numpy(), ref)
    rows = tl.unbind(x, dim=1)
    rows[2].zero_()
    ref[:, 2] = 0.0
    np.testing.assert_array_equal(x.numpy(), ref)
    tl.narrow(x, 0, 1, 2).fill_(-3.0)
    ref[1:3] = -3.0
    np.testing.assert_array_equal(x.numpy(), ref)


@pytest.mark.parametrize("offset", [0, 1, -2])
def test_diagonal_is_a_view_both_ways(offset):
    x, ref = _base((4, 5))
    d = tl.diagonal(x, offset)
    np.testing.assert_array_equal(d.numpy(), np.diagonal(ref, offset))
    d.fill_(9.0)
    idx = np.arange(len(np.diagonal(ref, offset)))
    rows, cols = (idx, idx + offset) if offset >= 0 else (idx - offset, idx)
    ref[rows, cols] = 9.0
    np.testing.assert_array_equal(x.numpy(), ref)
    with tl.no_grad():
        x.add_(1.0)                                  # the base changes: the view sees it
    np.testing.assert_array_equal(d.numpy(), np.diagonal(ref + 1.0, offset))


def test_diagonal_gradient_is_the_weight_on_the_diagonal():
    a = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    w = np.array([2.0, -1.0, 0.5], np.float32)
    x = tl.tensor(a, requires_grad=True)
    loss = (tl.diagonal(x) * tl.tensor(w)).sum()
    loss.backward()
    want = np.zeros_like(a)
    want[np.arange(3), np.arange(3)] = w
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_unsafe_split_and_unsafe_chunk_are_views_as_torch():
    x, ref = _base((6, 2), 4)
    tl.unsafe_split(x, 4)[1].fill_(2.0)
    ref[4:] = 2.0
    tl.unsafe_chunk(x, 3)[0].mul_(-1.0)
    ref[:2] *= -1.0
    np.testing.assert_array_equal(x.numpy(), ref)


@pytest.mark.parametrize("sizes", [3, 1, 7, 9, [2, 0, 5], [7]])
def test_split_sizes_are_torchs_in_the_view_and_the_composite_forms(sizes):
    """Tensor.split (views) and composite.split (copies) cut the same pieces: equal sizes with
    a shorter last one, or the given sections; NumPy's split at the same offsets is the
    reference."""
    from torchlean import composite
    x, ref = _base((7, 3), 5)
    lens = [min(sizes, 7 - a) for a in range(0, 7, sizes)] if isinstance(sizes, int) else sizes
    want = np.split(ref, np.cumsum(lens)[:-1], axis=0)
    for pieces in (x.split(sizes), composite.split(x, sizes, 0)):
        assert [tuple(p.shape) for p in pieces] == [w.shape for w in want]
        for p, w in zip(pieces, want):
            np.testing.assert_array_equal(p.numpy(), w)


@pytest.mark.parametrize("sizes, message", [(0, "split_size must be a positive int, got 0"),
                                            ([3, 3], r"sections \[3, 3\] must be >= 0 and sum "
                                                     r"to the size 7 of dim 0 \(shape \(7, 3\)\)"),
                                            ([8, -1], "must be >= 0")])
def test_split_refuses_sizes_that_do_not_cover_the_axis(sizes, message):
    from torchlean import composite
    x, _ = _base((7, 3))
    for split in (x.split, lambda s: composite.split(x, s, 0)):
        with pytest.raises(ValueError, match=message):
            split(sizes)


@pytest.mark.parametrize("join", ["cat", "stack"])
def test_cat_and_stack_name_themselves_on_an_empty_sequence(join):
    with pytest.raises(ValueError, match=f"^{join}: expected a non-empty sequence of tensors"):
        getattr(tl, join)([])


@pytest.mark.parametrize("n, chunks", [(7, 3), (7, 7), (7, 10), (1, 4), (6, 4)])
def test_chunk_pieces_hold_ceil_n_over_chunks(n, chunks):
    """torch.chunk: pieces of ceil(n / chunks), so fewer than `chunks` pieces may come back
    (np.array_split would balance them instead); both forms agree with that closed form."""
    from torchlean import composite
    x, ref = _base((n, 2), 6)
    size = -(-n // chunks)
    want = [ref[a:a + size] for a in range(0, n, size)]
    for pieces in (x.chunk(chunks), composite.chunk(x, chunks, 0)):
        assert len(pieces) == len(want)
        for p, w in zip(pieces, want):
            np.testing.assert_array_equal(p.numpy(), w)
    with pytest.raises(ValueError, match="chunk: chunks must be a positive int, got 0"):
        x.chunk(0)
