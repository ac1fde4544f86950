"""Shape, joining and creation families of the catalog: every name against a float64 NumPy
reference written here (forward, and gradients by central differences), torch as an extra
reference, and bad input raising torch's kind of error naming the op."""
import numpy as np
import pytest

import torchlean as tl
from catalog_check import check, rand, torch

T = torch
A = rand(3, 4, 5)
M = rand(4, 6, seed=1)
V = rand(5, seed=2)


def _np_unfold(a, d, size, step):
    n = a.shape[d]
    wins = [np.take(a, np.arange(s, s + size), axis=d) for s in range(0, n - size + 1, step)]
    return np.moveaxis(np.stack(wins, d), d + 1, -1)


def _np_slice_scatter(a, src, d, start, end, step):
    out = a.copy()
    key = (slice(None),) * d + (slice(start, end, step),)
    out[key] = src
    return out


def _np_diag_embed(v, offset):
    k = v.shape[-1] + abs(offset)
    out = np.zeros(v.shape[:-1] + (k, k))
    for i in range(v.shape[-1]):
        r, c = (i, i + offset) if offset >= 0 else (i - offset, i)
        out[..., r, c] = v[..., i]
    return out


def _np_block_diag(*ms):
    rows = sum(m.shape[0] for m in ms)
    cols = sum(m.shape[1] for m in ms)
    out = np.zeros((rows, cols))
    r = c = 0
    for m in ms:
        out[r:r + m.shape[0], c:c + m.shape[1]] = m
        r += m.shape[0]
        c += m.shape[1]
    return out


CASES = {
    "flip": (lambda x: x.flip(0, -1), lambda a: np.flip(a, (0, -1)), [A],
             lambda x: x.flip(0, -1)),
    "flip_dims_kw": (lambda x: tl.flip(x, dims=[1]), lambda a: np.flip(a, 1), [A], None),
    "fliplr": (tl.fliplr, np.fliplr, [M], T and T.fliplr),
    "flipud": (lambda x: x.flipud(), np.flipud, [V], T and T.flipud),
    "roll_dims": (lambda x: x.roll((1, -2), (0, 2)), lambda a: np.roll(a, (1, -2), (0, 2)), [A],
                  lambda x: x.roll((1, -2), (0, 2))),
    "roll_flat": (lambda x: tl.roll(x, 7), lambda a: np.roll(a, 7), [A], lambda x: x.roll(7)),
    "rot90": (lambda x: x.rot90(3, (2, 0)), lambda a: np.rot90(a, 3, (2, 0)), [A],
              lambda x: x.rot90(3, (2, 0))),
    "rot90_neg": (lambda x: tl.rot90(x, -1), lambda a: np.rot90(a, -1), [M], None),
    "tril": (lambda x: x.tril(-1), lambda a: np.tril(a, -1), [A], lambda x: x.tril(-1)),
    "triu": (lambda x: tl.triu(x, 2), lambda a: np.triu(a, 2), [M], lambda x: x.triu(2)),
    "movedim": (lambda x: x.movedim((0, 1), (-1, 0)), lambda a: np.moveaxis(a, (0, 1), (-1, 0)),
                [A], lambda x: x.movedim((0, 1), (-1, 0))),
    "moveaxis": (lambda x: tl.moveaxis(x, -1, 0), lambda a: np.moveaxis(a, -1, 0), [A], None),
    "swapaxes": (lambda x: x.swapaxes(0, 2), lambda a: np.swapaxes(a, 0, 2), [A], None),
    "swapdims": (lambda x: tl.swapdims(x, 1, -1), lambda a: np.swapaxes(a, 1, -1), [A], None),
    "unbind": (lambda x: x.unbind(-2), lambda a: [a[:, i] for i in range(4)], [A],
               lambda x: x.unbind(-2)),
    "narrow": (lambda x: x.narrow(-1, -3, 2), lambda a: a[..., 2:4], [A],
               lambda x: x.narrow(-1, -3, 2)),
    "narrow_copy": (lambda x: tl.narrow_copy(x, 0, 1, 2), lambda a: a[1:3], [A], None),
    "select": (lambda x: x.select(1, -1), lambda a: a[:, -1], [A], lambda x: x.select(1, -1)),
    "diag_vec": (lambda v: tl.diag(v, -2), lambda a: np.diag(a, -2), [V],
                 lambda v: T.diag(v, -2)),
    "diag_mat": (lambda x: x.diag(1), lambda a: np.diag(a, 1), [M], lambda x: x.diag(1)),
    "diagonal": (lambda x: x.diagonal(1, 2, 0), lambda a: np.diagonal(a, 1, 2, 0), [A],
                 lambda x: x.diagonal(1, 2, 0)),
    "diagonal_past_end": (lambda x: x.diagonal(9), lambda a: np.diagonal(a, 9), [M], None),
    "linalg.diagonal": (lambda x: tl.linalg.diagonal(x, offset=-1),
                        lambda a: np.diagonal(a, -1, -2, -1), [A], None),
    "trace": (lambda x: x.trace(), np.trace, [M], lambda x: x.trace()),
    "diag_embed": (lambda x: x.diag_embed(1), lambda a: _np_diag_embed(a, 1), [M],
                   lambda x: x.diag_embed(1)),
    "diag_embed_neg": (lambda x: tl.diag_embed(x, -2), lambda a: _np_diag_embed(a, -2), [V],
                       None),
    "diagflat": (lambda x: tl.diagflat(x), lambda a: np.diagflat(a), [M[:2, :3]], None),
    "tile": (lambda x: x.tile((2, 1, 1, 3)), lambda a: np.tile(a, (2, 1, 1, 3)), [A],
             lambda x: x.tile((2, 1, 1, 3))),
    "tile_short": (lambda x: tl.tile(x, (2,)), lambda a: np.tile(a, (1, 2)), [M], None),
    "repeat": (lambda x: x.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), [M],
               lambda x: x.repeat(2, 1, 3)),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, 1),
                          lambda a: np.repeat(a, 2, 1), [A], None),
    "repeat_interleave_vec": (lambda x: tl.repeat_interleave(x, tl.tensor([1, 0, 2]).long(), 0),
                              lambda a: np.repeat(a, [1, 0, 2], 0), [A], None),
    "repeat_interleave_flat": (lambda x: x.repeat_interleave(3), lambda a: np.repeat(a, 3),
                               [M], lambda x: x.repeat_interleave(3)),
    "unflatten": (lambda x: x.unflatten(-1, (2, -1)), lambda a: a.reshape(4, 2, 3), [M],
                  lambda x: x.unflatten(-1, (2, -1))),
    "ravel": (lambda x: x.ravel(), np.ravel, [A], None),
    "expand_as": (lambda x: x.expand_as(tl.zeros(2, 3, 5)), lambda a: np.broadcast_to(a, (2, 3, 5)),
                  [V], None),
    "reshape_as": (lambda x: x.reshape_as(tl.zeros(5, 12)), lambda a: a.reshape(5, 12), [A], None),
    "unfold_method": (lambda x: x.unfold(2, 2, 2), lambda a: _np_unfold(a, 2, 2, 2), [A],
                      lambda x: x.unfold(2, 2, 2)),
    "unfold_step1": (lambda x: x.unfold(0, 3, 1), lambda a: _np_unfold(a, 0, 3, 1), [M], None),
    "slice_scatter": (lambda x, s: tl.slice_scatter(x, s, 1, 0, None, 2),
                      lambda a, s: _np_slice_scatter(a, s, 1, 0, None, 2),
                      [A, rand(3, 2, 5, seed=5)], lambda x, s: T.slice_scatter(x, s, 1, 0, None, 2)),
    "select_scatter": (lambda x, s: x.select_scatter(s, -1, 2),
                       lambda a, s: _np_slice_scatter(a, s[..., None], 2, 2, 3, 1),
                       [A, rand(3, 4, seed=6)], None),
    "diagonal_scatter": (lambda x, s: x.diagonal_scatter(s, 1),
                         lambda a, s: _np_diagonal_scatter(a, s, 1),
                         [M, rand(4, seed=7)], lambda x, s: x.diagonal_scatter(s, 1)),
    "H": (lambda x: x.H, lambda a: a.T, [M], None),
    "mH": (lambda x: x.mH, lambda a: np.swapaxes(a, -1, -2), [A], None),
    # joining
    "atleast_3d": (lambda x: tl.atleast_3d(x), lambda a: a.reshape(1, 5, 1), [V], None),
    "atleast_2d_many": (lambda x, y: tl.atleast_2d(x, y),
                        lambda a, b: (a.reshape(1, 5), b), [V, M], None),
    "atleast_1d": (lambda x: tl.atleast_1d(x.sum()), lambda a: a.sum().reshape(1), [V], None),
    "hstack": (lambda x, y: tl.hstack([x, y]), lambda a, b: np.hstack([a, b]),
               [M, rand(4, 2, seed=8)], None),
    "vstack": (lambda x, y: tl.vstack((x, y)), lambda a, b: np.vstack([a, b]),
               [rand(6, seed=9), M], None),
    "row_stack": (lambda x, y: tl.row_stack((x, y)), lambda a, b: np.vstack([a, b]),
                  [rand(6, seed=9), M], None),
    "dstack": (lambda x, y: tl.dstack([x, y]), lambda a, b: np.dstack([a, b]), [M, M * 2], None),
    "column_stack": (lambda x, y: tl.column_stack([x, y]),
                     lambda a, b: np.column_stack([a, b]), [rand(4, seed=3), M], None),
    "hsplit": (lambda x: x.hsplit(3), lambda a: np.hsplit(a, 3), [M], None),
    "vsplit": (lambda x: tl.vsplit(x, [1, 3]), lambda a: np.vsplit(a, [1, 3]), [M], None),
    "dsplit": (lambda x: x.dsplit([2]), lambda a: np.dsplit(a, [2]), [A], None),
    "tensor_split_sections": (lambda x: x.tensor_split(3, -1),
                              lambda a: np.array_split(a, 3, -1), [A],
                              lambda x: x.tensor_split(3, -1)),
    "tensor_split_indices": (lambda x: tl.tensor_split(x, [1, -1, 9], 1),
                             lambda a: np.split(a, [1, 5, 6], 1), [M], None),
    "split_with_sizes": (lambda x: x.split_with_sizes([1, 3], 1),
                         lambda a: np.split(a, [1], 1), [A], None),
    "unsafe_split": (lambda x: x.unsafe_split(2, 1), lambda a: np.split(a, [2], 1), [A],
                     None),
    "unsafe_chunk": (lambda x: tl.unsafe_chunk(x, 2, 0), lambda a: np.split(a, [2], 0), [A],
                     None),
    "meshgrid_ij": (lambda x, y: tl.meshgrid(x, y, indexing="ij"),
                    lambda a, b: np.meshgrid(a, b, indexing="ij"), [V, rand(3, seed=4)], None),
    "meshgrid_xy": (lambda x, y, z: tl.meshgrid(x, y, z, indexing="xy"),
                    lambda a, b, c: np.meshgrid(a, b, c, indexing="xy"),
                    [V, rand(3, seed=4), rand(2, seed=5)],
                    lambda x, y, z: T.meshgrid(x, y, z, indexing="xy")),
    "cartesian_prod": (lambda x, y: tl.cartesian_prod(x, y),
                       lambda a, b: np.array([[p, q] for p in a for q in b]),
                       [V, rand(3, seed=4)], lambda x, y: T.cartesian_prod(x, y)),
    "combinations": (lambda x: tl.combinations(x, 3),
                     lambda a: np.array([[a[i], a[j], a[k]] for i in range(5)
                                         for j in range(i + 1, 5) for k in range(j + 1, 5)]),
                     [V], lambda x: T.combinations(x, 3)),
    "combinations_repl": (lambda x: tl.combinations(x, 2, with_replacement=True),
                          lambda a: np.array([[a[i], a[j]] for i in range(5)
                                              for j in range(i, 5)]), [V], None),
    "block_diag": (lambda x, y, z: tl.block_diag(x, y, z),
                   lambda a, b, c: _np_block_diag(a, b.reshape(1, -1), c),
                   [M[:2, :3], V, M[:1, :1]], None),
    "kron": (lambda x, y: x.kron(y), np.kron, [M[:2, :3], rand(3, 2, seed=3)],
             lambda x, y: x.kron(y)),
    "kron_ranks": (lambda x, y: tl.kron(x, y), np.kron, [V[:2], A[:2, :2, :3]], None),
    "broadcast_tensors": (lambda x, y: tl.broadcast_tensors(x, y),
                          lambda a, b: np.broadcast_arrays(a, b), [V, M[:, :1]], None),
    "sum_to_size": (lambda x: x.sum_to_size(3, 1, 5), lambda a: a.sum(1, keepdims=True), [A],
                    lambda x: x.sum_to_size(3, 1, 5)),
    # creation-family values
    "fill": (lambda x: tl.fill(x, 2.5), lambda a: np.full(a.shape, 2.5), [M], None,
             {"grad": False}),
    "fill_tensor": (lambda x, v: tl.fill(x, v), lambda a, v: np.full(a.shape, v), [M, V[0]],
                    None),
    "positive": (lambda x: tl.positive(x) * 1.0, lambda a: a, [V], None),
    "conj_physical": (tl.conj_physical, lambda a: a, [V], None),
    "resolve_neg": (lambda x: x.resolve_neg() * 1.0, lambda a: a, [V], None),
    "real": (lambda x: tl.real(x) * 1.0, lambda a: a, [V], None),
    "rsub": (lambda x, y: x.rsub(y, alpha=2), lambda a, b: b - 2 * a, [M, M[:1] * 3],
             lambda x, y: T.rsub(x, y, alpha=2)),
    "true_divide": (lambda x, y: tl.true_divide(x, y), lambda a, b: a / b,
                    [M, np.abs(V[:1]) + 1], None),
    "__rdiv__": (lambda x: x.__rdiv__(3.0), lambda a: 3.0 / a, [np.abs(M) + 0.5], None),
    "view_copy": (lambda x: tl.view_copy(x, (5, 12)), lambda a: a.reshape(5, 12), [A], None),
    "permute_copy": (lambda x: tl.permute_copy(x, (2, 0, 1)), lambda a: a.transpose(2, 0, 1),
                     [A], None),
    "expand_copy": (lambda x: tl.expand_copy(x, (2, 5)), lambda a: np.broadcast_to(a, (2, 5)),
                    [V], None),
    "t_copy": (tl.t_copy, lambda a: a.T, [M], None),
    "transpose_copy": (lambda x: tl.transpose_copy(x, 0, 2), lambda a: a.transpose(2, 1, 0),
                       [A], None),
    "squeeze_copy": (lambda x: tl.squeeze_copy(x, 0), lambda a: a[0], [A[:1]], None),
    "unsqueeze_copy": (lambda x: tl.unsqueeze_copy(x, -1), lambda a: a[..., None], [M], None),
    "alias_copy": (tl.alias_copy, lambda a: a, [M], None),
    "diagonal_copy": (tl.diagonal_copy, np.diagonal, [M], None),
    "unbind_copy": (lambda x: tl.unbind_copy(x, 1), lambda a: [a[:, i] for i in range(6)],
                    [M], None),
    "unfold_copy": (lambda x: tl.unfold_copy(x, 1, 3, 2), lambda a: _np_unfold(a, 1, 3, 2),
                    [M], None),
    "split_with_sizes_copy": (lambda x: tl.split_with_sizes_copy(x, [2, 4], 1),
                              lambda a: np.split(a, [2], 1), [M], None),
}


def _np_diagonal_scatter(a, s, offset):
    out = a.copy()
    for i in range(s.shape[0]):
        out[i, i + offset] = s[i]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradient(name):
    tl_fn, np_fn, arrays, torch_fn, *opts = CASES[name]
    check(tl_fn, np_fn, *arrays, torch_fn=torch_fn, **(opts[0] if opts else {}))


def test_size_one_and_empty():
    one = rand(1, 1, seed=3)
    check(lambda x: x.flip(0, 1), lambda a: a, one)
    check(lambda x: x.tril(), np.tril, one)
    check(lambda x: x.roll(3, 1), lambda a: a, one)
    assert tl.zeros(0, 3).flip(0).shape == (0, 3)
    assert tl.zeros(3, 0).diagonal().shape == (0,)
    assert [t.shape for t in tl.tensor_split(tl.zeros(2), 4)] == [(1,), (1,), (0,), (0,)]


def test_tril_keeps_zeros_above_inf():
    x = tl.tensor([[1.0, np.inf], [np.nan, 2.0]])
    np.testing.assert_array_equal(x.tril().numpy(), [[1.0, 0.0], [np.nan, 2.0]])
    np.testing.assert_array_equal(x.triu().numpy(), [[1.0, np.inf], [0.0, 2.0]])


def test_new_factories_and_small_creators():
    x = tl.tensor(M)
    assert x.new_zeros(2, 3).numpy().tolist() == [[0.0] * 3] * 2
    assert x.new_ones((2,)).numpy().tolist() == [1.0, 1.0]
    assert x.new_full((2, 1), 7).numpy().tolist() == [[7.0], [7.0]]
    assert x.new_empty(0, 4).shape == (0, 4)
    assert x.new_empty_strided((2, 2), (2, 1)).shape == (2, 2)
    assert tl.empty_strided((3, 1), (1, 1)).shape == (3, 1)
    assert tl.empty_permuted((2, 3), (1, 0)).shape == (2, 3)
    assert tl.scalar_tensor(2.5).item() == 2.5
    np.testing.assert_allclose(tl.logspace(0, 3, 4, base=2).numpy(), [1, 2, 4, 8])
    assert x.is_floating_point() and not tl.is_complex(x)
    assert tl.broadcast_shapes((3, 1), (4,), 1) == (3, 4)
    assert x.conj() is x and x.resolve_conj() is x


BAD = [
    (lambda: tl.flip(tl.zeros(2, 3), 2), IndexError, "flip"),
    (lambda: tl.flip([1.0], 0), TypeError, "flip"),
    (lambda: tl.roll(tl.zeros(2, 3), (1, 2), 0), ValueError, "roll"),
    (lambda: tl.rot90(tl.zeros(3), 1), ValueError, "rot90"),
    (lambda: tl.tril(tl.zeros(3)), ValueError, "tril"),
    (lambda: tl.movedim(tl.zeros(2, 3), 0, 5), IndexError, "movedim"),
    (lambda: tl.movedim(tl.zeros(2, 3), (0, 0), (0, 1)), ValueError, "movedim"),
    (lambda: tl.select(tl.zeros(2, 3), 1, 3), IndexError, "select"),
    (lambda: tl.narrow(tl.zeros(2, 3), 1, 2, 2), IndexError, "narrow"),
    (lambda: tl.diagonal(tl.zeros(2, 3), 0, 1, 1), ValueError, "diagonal"),
    (lambda: tl.diag(tl.zeros(2, 3, 4)), ValueError, "diag"),
    (lambda: tl.zeros(2, 3).repeat(2), ValueError, "repeat"),
    (lambda: tl.repeat_interleave(tl.zeros(3), np.array([1, 2])), ValueError,
     "repeat_interleave"),
    (lambda: tl.unflatten(tl.zeros(6), 0, (4, -1)), ValueError, "unflatten"),
    (lambda: tl.zeros(3).unfold(0, 4, 1), ValueError, "unfold"),
    (lambda: tl.slice_scatter(tl.zeros(4, 3), tl.zeros(3, 3), 0, 0, 2), RuntimeError,
     "slice_scatter"),
    (lambda: tl.select_scatter(tl.zeros(4, 3), tl.zeros(3), 0, 4), IndexError, "select_scatter"),
    (lambda: tl.zeros(2, 3, 4).H, ValueError, "H"),
    (lambda: tl.vsplit(tl.zeros(3), 1), ValueError, "vsplit"),
    (lambda: tl.hsplit(tl.zeros(2, 5), 2), ValueError, "hsplit"),
    (lambda: tl.tensor_split(tl.zeros(3), 0), ValueError, "tensor_split"),
    (lambda: tl.meshgrid(tl.zeros(2, 2)), ValueError, "meshgrid"),
    (lambda: tl.meshgrid(tl.zeros(2), indexing="yx"), ValueError, "meshgrid"),
    (lambda: tl.combinations(tl.zeros(2, 2)), ValueError, "combinations"),
    (lambda: tl.block_diag(tl.zeros(2, 2, 2)), ValueError, "block_diag"),
    (lambda: tl.broadcast_tensors(tl.zeros(2), tl.zeros(3)), RuntimeError, "broadcast_tensors"),
    (lambda: tl.zeros(2, 3).sum_to_size(4, 3), RuntimeError, "sum_to_size"),
    (lambda: tl.fill(tl.zeros(2), tl.zeros(2)), RuntimeError, "fill"),
    (lambda: tl.zeros(2).new_zeros(-1), ValueError, "new_zeros"),
    (lambda: tl.rsub(tl.zeros(2), "a"), TypeError, "rsub"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
