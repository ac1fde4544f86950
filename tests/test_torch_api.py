"""torch's top level over torchlean: factories (against torchlean.random's pure-Python draws and
NumPy), torch.X forms of methods, int64/bool tensors (IntTensor), the device idiom, and the bad
inputs torch rejects."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import functions, nn, random as tlr
from torchlean.data import DataLoader


def _key_after_seed(seed, counter=0):
    return tlr.key_of(seed, counter)


# ------------------------------------------------------------------------------ factories

@pytest.mark.parametrize("shape", [(7,), (3, 5), (1,), (2, 1, 3)])
def test_rand_and_randn_match_the_reference_draws(shape):
    n = int(np.prod(shape))
    tl.manual_seed(11)
    u = tl.rand(*shape)
    z = tl.randn(shape)                      # a tuple works as well as varargs
    assert u.shape == shape and z.shape == shape
    np.testing.assert_array_equal(u.numpy().reshape(-1), tlr.uniform(n, _key_after_seed(11, 0)))
    np.testing.assert_array_equal(z.numpy().reshape(-1), tlr.normal(n, _key_after_seed(11, 1)))
    assert 0.0 <= u.numpy().min() and u.numpy().max() < 1.0


def test_manual_seed_replays_and_the_counter_advances():
    tl.manual_seed(5)
    a, b = tl.randn(4, 3).numpy(), tl.randn(4, 3).numpy()
    tl.manual_seed(5)
    np.testing.assert_array_equal(tl.randn(4, 3).numpy(), a)
    assert not np.array_equal(a, b)


def test_randint_is_multiply_shift_of_splitmix64_draws():
    tl.manual_seed(9)
    r = tl.randint(-3, 4, (1000,))
    key = _key_after_seed(9, 0)
    want = [-3 + (((tlr.splitmix64(key + i) & 0xFFFFFFFF) * 7) >> 32) for i in range(1000)]
    assert r.dtype == tl.int64 and r.shape == (1000,)
    assert r.tolist() == want
    assert set(want) == set(range(-3, 4))
    assert tl.randint(10, (2, 3)).shape == (2, 3)             # randint(high, size)


def test_randperm_is_a_permutation():
    tl.manual_seed(2)
    p = tl.randperm(17)
    assert sorted(p.tolist()) == list(range(17)) and p.tolist() != list(range(17))


def test_filled_factories_shapes_and_dtypes():
    assert tl.zeros(2, 3).numpy().tolist() == [[0.0] * 3] * 2
    assert tl.ones((4,)).numpy().tolist() == [1.0] * 4
    assert tl.empty(0, 5).shape == (0, 5) and tl.zeros(()).shape == ()
    np.testing.assert_array_equal(tl.full((2, 2), 2.5).numpy(), np.full((2, 2), 2.5))
    assert tl.full((3,), 7).dtype == tl.int64 and tl.full((3,), 7).tolist() == [7, 7, 7]
    assert tl.full((1,), True).dtype == tl.bool
    assert tl.zeros(3, dtype=tl.long).tolist() == [0, 0, 0]
    x = tl.randn(3, 2)
    for f in (tl.zeros_like, tl.ones_like, tl.rand_like, tl.randn_like, tl.empty_like):
        y = f(x)
        assert y.shape == (3, 2) and y.dtype == tl.float32
    assert tl.full_like(x, -1.5).numpy().tolist() == [[-1.5, -1.5]] * 3
    assert tl.zeros_like(tl.tensor([1, 2])).dtype == tl.int64
    r = tl.randint_like(x, 5)
    assert r.dtype == tl.float32 and set(np.unique(r.numpy())) <= set(range(5))
    np.testing.assert_array_equal(tl.eye(3, 2).numpy(), np.eye(3, 2))
    np.testing.assert_allclose(tl.linspace(-1, 1, 5).numpy(), [-1, -0.5, 0, 0.5, 1])


def test_arange_follows_torch_dtype_and_length_rules():
    a = tl.arange(5)
    assert a.dtype == tl.int64 and a.tolist() == [0, 1, 2, 3, 4]
    assert tl.arange(2, 11, 3).tolist() == [2, 5, 8] and tl.arange(5, 0, -2).tolist() == [5, 3, 1]
    f = tl.arange(0, 1, 0.1)
    assert f.dtype == tl.float32 and f.shape == (10,)
    np.testing.assert_array_equal(f.numpy(), (np.arange(10) * 0.1).astype(np.float32))
    assert tl.arange(3, dtype=tl.float32).numpy().tolist() == [0.0, 1.0, 2.0]
    assert tl.arange(0).shape == (0,)


def test_factory_results_take_gradients():
    x = tl.randn(2, 3, requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad, 2 * x.numpy(), rtol=1e-6)
    z = tl.zeros(4, requires_grad=True)
    (z * tl.arange(4.0)).sum().backward()
    np.testing.assert_array_equal(z.grad, [0, 1, 2, 3])


def test_tensor_infers_torch_dtypes():
    assert tl.tensor([1, 2]).dtype == tl.int64
    assert tl.tensor(np.array([1, 2], np.int32)).dtype == tl.int64
    assert tl.tensor([True, False]).dtype == tl.bool
    assert tl.tensor([1.5]).dtype == tl.float32
    assert tl.tensor([1, 2], dtype=tl.float32).numpy().tolist() == [1.0, 2.0]
    assert tl.tensor([1.9, -1.9], dtype=tl.long).tolist() == [1, -1]
    a = np.arange(3)
    t = tl.from_numpy(a)
    a[0] = 7                              # from_numpy shares int64 memory, as in torch
    assert t.tolist() == [7, 1, 2]


def test_bad_factory_arguments():
    with pytest.raises(TypeError, match="zeros: sizes must be ints"):
        tl.zeros(2.5)
    with pytest.raises(ValueError, match="negative dimension"):
        tl.ones(2, -1)
    with pytest.raises(ValueError, match="randint: expected low < high"):
        tl.randint(5, 5, (2,))
    with pytest.raises(TypeError, match="randint"):
        tl.randint(5)
    with pytest.raises(TypeError, match="only floating point tensors can require gradients"):
        tl.tensor([1, 2], requires_grad=True)
    with pytest.raises(TypeError, match="randn: draws float32"):
        tl.randn(3, dtype=tl.int64)
    with pytest.raises(TypeError, match="float32, int64 or bool"):
        tl.zeros(2, dtype=np.float64)
    with pytest.raises(TypeError, match="arange: step"):
        tl.arange(0, 3, "1")


# ------------------------------------------------------------------------------ torch.X forms

def test_module_functions_equal_the_methods():
    x = tl.tensor(np.random.default_rng(0).uniform(0.5, 2.0, (3, 4)).astype(np.float32))
    calls = {"sum": ((), {"dim": 1}), "mean": ((0,), {}), "amax": ((1,), {}),
             "max": ((1,), {}), "min": ((), {}), "var": ((1,), {}), "std": ((), {}),
             "logsumexp": ((1,), {}), "flatten": ((), {}), "reshape": (((4, 3),), {}),
             "transpose": ((0, 1), {}), "permute": ((1, 0),), "unsqueeze": ((0,), {}),
             "squeeze": ((), {}), "amin": ((0,), {}), "clamp": ((), {}),
             "gather": ((1, tl.tensor(np.array([[0], [3], [1]]))), {}),
             "broadcast_to": (((2, 3, 4),), {})}
    for name in functions.METHODS:
        if name in ("clamp", "numel", "detach"):
            continue
        args, kw = (calls.get(name, ((), {})) + ({},))[:2]
        got, want = getattr(tl, name)(x, *args, **kw), getattr(x, name)(*args, **kw)
        if isinstance(got, tuple):
            got, want = got[0], want[0]
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name)
    xs = x.numpy().astype(np.float64)
    np.testing.assert_allclose(tl.exp(x).numpy(), np.exp(xs), rtol=1e-6)
    np.testing.assert_allclose(tl.sigmoid(x).numpy(), 1 / (1 + np.exp(-xs)), rtol=1e-6)
    np.testing.assert_allclose(tl.matmul(x, x.t()).numpy(), xs @ xs.T, rtol=1e-5)
    np.testing.assert_allclose(tl.add(x, x, alpha=2).numpy(), 3 * xs, rtol=1e-6)
    np.testing.assert_allclose(tl.maximum(x, x * 0.0 + 1.0).numpy(), np.maximum(xs, 1.0))
    np.testing.assert_array_equal(tl.clamp(x, 0.8, 1.5).numpy(), np.clip(x.numpy(), 0.8, 1.5))
    np.testing.assert_array_equal(tl.clip(x, min=1.0).numpy(), np.maximum(x.numpy(), 1.0))
    np.testing.assert_array_equal(tl.clamp(x, max=1.0).numpy(), np.minimum(x.numpy(), 1.0))
    inf = tl.tensor([np.inf, -np.inf, 0.5])
    assert tl.clamp(inf, min=0.0).numpy().tolist() == [np.inf, 0.0, 0.5]
    assert tl.clamp(tl.tensor([-3, 0, 9]), 0, 5).tolist() == [0, 0, 5]
    assert tl.numel(x) == 12 and tl.is_tensor(x) and not tl.is_tensor(xs)
    with pytest.raises(TypeError, match=r"torchlean.exp\(\): argument 'input' must be a Tensor"):
        tl.exp(xs)


def test_every_torch_function_method_is_at_top_level():
    # torch's top-level functions that are also Tensor methods; each method torchlean's Tensor
    # has must be there as torchlean.X too
    torch_names = ["abs", "add", "amax", "amin", "argmax", "argmin", "bmm", "chunk", "clamp",
                   "clip", "clone", "detach", "div", "eq", "erf", "exp", "flatten", "ge",
                   "gt", "le", "log", "log_softmax", "logsumexp", "lt", "matmul", "max",
                   "maximum", "mean", "min", "minimum", "mm", "mul", "ne", "neg", "numel",
                   "permute", "pow", "reciprocal", "relu", "reshape", "rsqrt", "sigmoid",
                   "softmax", "split", "sqrt", "square", "squeeze", "std", "sub", "sum", "t",
                   "tanh", "transpose", "unsqueeze", "var", "where", "gather", "broadcast_to"]
    x = tl.tensor([1.0])
    missing = [n for n in torch_names if hasattr(x, n) and not callable(getattr(tl, n, None))]
    assert missing == []


@pytest.mark.parametrize("shape,dim,ishape", [((3, 4), 1, (3, 2)), ((3, 4), 0, (2, 4)),
                                               ((2, 3, 5), -1, (2, 1, 7)), ((4,), 0, (6,)),
                                               ((2, 3, 5), 1, (1, 3, 2))])
def test_gather_is_take_along_axis_with_a_scatter_add_gradient(shape, dim, ishape):
    rng = np.random.default_rng(5)
    xs = rng.standard_normal(shape).astype(np.float32)
    idx = rng.integers(0, shape[dim], ishape)
    x = tl.tensor(xs, requires_grad=True)
    y = tl.gather(x, dim, tl.tensor(idx))
    sub = xs[tuple(slice(0, n) if a != dim % len(shape) else slice(None)
                   for a, n in enumerate(ishape))]
    np.testing.assert_array_equal(y.numpy(), np.take_along_axis(sub, idx, axis=dim))
    g = rng.standard_normal(ishape)
    (y * tl.tensor(g.astype(np.float32))).sum().backward()
    want = np.zeros(shape)
    grid = list(np.indices(ishape))
    grid[dim % len(shape)] = idx
    np.add.at(want, tuple(grid), g.astype(np.float32).astype(np.float64))
    grad = x.grad.numpy() if hasattr(x.grad, "numpy") else np.asarray(x.grad)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(x.gather(dim, idx).numpy(), y.numpy())   # a NumPy index too
    try:
        import torch
    except ImportError:
        return
    want_t = torch.gather(torch.tensor(xs), dim, torch.tensor(idx)).numpy()
    np.testing.assert_array_equal(y.numpy(), want_t)


def test_gather_and_broadcast_to_bad_inputs():
    x = tl.randn(3, 4)
    with pytest.raises(TypeError, match="gather: index must be an int64 tensor"):
        x.gather(1, tl.randn(3, 1))
    with pytest.raises(IndexError, match=r"gather: index out of range \[0, 4\)"):
        tl.gather(x, 1, tl.tensor(np.array([[4], [0], [0]])))
    with pytest.raises(ValueError, match="must have the input's rank 2"):
        x.gather(0, np.array([1, 2]))
    with pytest.raises(ValueError, match="exceeds input shape"):
        x.gather(1, np.zeros((4, 1), np.int64))
    with pytest.raises(TypeError, match="dim must be an int"):
        x.gather("1", np.zeros((3, 1), np.int64))
    assert tl.broadcast_to(tl.tensor([[1.0], [2.0]]), (3, 2, 2)).numpy().tolist() == \
        [[[1.0, 1.0], [2.0, 2.0]]] * 3


# ------------------------------------------------------------------------------ IntTensor

def test_int_tensor_does_what_a_training_loop_needs():
    logits = tl.tensor(np.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5], [0.2, 0.1, 0.9],
                                 [1.0, 1.5, 1.2]], np.float32))
    labels = tl.tensor([1, 0, 0, 1])
    pred = logits.argmax(1)
    assert pred.dtype == tl.int64 and pred.tolist() == [1, 0, 2, 1]
    correct = (pred == labels).sum()
    assert correct.item() == 3 and isinstance(correct.item(), int)
    assert labels.size(0) == 4 and labels.numel() == 4 and len(labels) == 4
    assert labels.float().dtype == tl.float32 and labels.float().numpy().tolist() == [1, 0, 0, 1]
    values, idx = logits.max(dim=1)
    assert idx.tolist() == [1, 0, 2, 1]
    np.testing.assert_array_equal(values.numpy(), np.float32([2.0, 3.0, 0.9, 1.5]))
    assert labels[1:].tolist() == [0, 0, 1] and labels[labels == 1].tolist() == [1, 1]
    assert pred.eq(labels.view_as(pred)).sum().item() == 3
    assert (labels * 2 + 1).tolist() == [3, 1, 1, 3] and (labels // 2).dtype == tl.int64
    assert (labels / 2).dtype == tl.float32 and (labels + 0.5).numpy().tolist()[0] == 1.5
    with pytest.raises(TypeError, match="mean"):
        labels.mean()
    # as loss labels and Embedding indices
    loss = nn.CrossEntropyLoss()(logits, labels)
    z = logits.numpy().astype(np.float64)
    lse = np.log(np.exp(z).sum(1))
    want = np.mean(lse - z[np.arange(4), [1, 0, 0, 1]])
    assert loss.item() == pytest.approx(want, rel=1e-6)
    emb = nn.Embedding(5, 3)
    out = emb(tl.tensor([[4, 0], [2, 2]]))
    np.testing.assert_array_equal(out.numpy(), emb.weight.numpy()[[[4, 0], [2, 2]]])
    x = tl.tensor(np.arange(12.0).reshape(4, 3))
    np.testing.assert_array_equal(x[labels].numpy(), np.arange(12.0).reshape(4, 3)[[1, 0, 0, 1]])


def test_data_loader_as_tensor_gives_int_labels():
    X = np.arange(20.0).reshape(10, 2)
    y = np.arange(10) % 3
    xb, yb = next(iter(DataLoader((X, y), batch_size=4, as_tensor=True)))
    assert xb.dtype == tl.float32 and yb.dtype == tl.int64 and yb.tolist() == [0, 1, 2, 0]
    with pytest.raises(TypeError, match="batch_size must be an int"):
        DataLoader((X, y), batch_size=2.7)


# ------------------------------------------------------------------------------ devices

def test_device_idiom():
    dev = tl.device("cuda" if tl.cuda.is_available() else "cpu")
    assert str(dev) == ("cuda" if tl.backend() == "cuda" else "cpu")
    assert tl.device("cuda:1") == tl.device("cuda", 1) and tl.device("cpu") == "cpu"
    x = tl.randn(3, 2)
    assert x.to(dev) is x and x.cpu() is x and x.to(dev, tl.float32) is x
    assert x.device == tl.device("cuda", 0) if tl.backend() == "cuda" else x.device == "cpu"
    assert x.to(tl.long).dtype == tl.int64 and x.to(dtype=tl.bool).dtype == tl.bool
    if tl.backend() == "stub":
        with pytest.raises(tl.BackendError, match="cuda: torchlean runs on the stub backend"):
            x.cuda()
        with pytest.raises(tl.BackendError, match="no CUDA device"):
            x.to("cuda")
    with pytest.raises(ValueError, match="expected 'cpu' or 'cuda'"):
        tl.device("tpu")


def test_t_len_clone_tolist_and_parameter_numel():
    a = np.arange(6.0, dtype=np.float32).reshape(2, 3)
    x = tl.tensor(a, requires_grad=True)
    np.testing.assert_array_equal(x.t().numpy(), a.T)
    assert tl.tensor([1.0, 2.0]).t().shape == (2,) and len(x) == 2 and x.tolist() == a.tolist()
    c = x.clone()
    (c * c).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * a)
    with pytest.raises(ValueError, match="t: expects a tensor with <= 2 dimensions"):
        tl.zeros(2, 2, 2).t()
    with pytest.raises(TypeError, match="len"):
        len(tl.tensor(1.0))
    m = nn.Linear(4, 3)
    assert sum(p.numel() for p in m.parameters()) == 15 and m.weight.size(1) == 4
    w = tl.tensor([1.5, -2.0]).requires_grad_()
    (w * w * w).sum().backward()
    np.testing.assert_array_equal(w.grad, [3 * 1.5 ** 2, 3 * 4.0])
    with pytest.raises(RuntimeError, match="only leaf tensors"):
        (w * 2.0).requires_grad_()
    assert np.array_equal(w.data.numpy(), [1.5, -2.0]) and not w.data.requires_grad


# ------------------------------------------------------------------------------ bad inputs

def test_bad_inputs_raise_torch_kinds_of_error():
    x = tl.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    with pytest.raises(IndexError, match="float32 Tensor of shape"):
        x[tl.tensor([0.0, 1.0])]
    with pytest.raises(TypeError, match="max: dim must be an int"):
        x.max(dim="1")
    with pytest.raises(TypeError, match="set_exact: flag must be True or False"):
        tl.set_exact("no")
    with pytest.raises(TypeError, match="set_deterministic"):
        tl.set_deterministic("yes")
    assert not tl.is_exact()
    with pytest.raises(TypeError, match=r"matmul: expected float operands, got int64 data of shape \(3, 1\)"):
        x @ tl.tensor([[1], [2], [3]])
    with pytest.raises(TypeError, match="matmul: expected float operands"):
        x @ np.ones((3, 1), np.int64)
    with pytest.raises(TypeError, match="got an int64 tensor of shape"):
        nn.Linear(3, 1)(tl.tensor([[1, 2, 3]]))
    # elementwise, int64 data promote to float32 as torch promotes int64 tensors
    np.testing.assert_array_equal((x * np.array([1, 2, 3])).numpy(), x.numpy() * [1, 2, 3])
    np.testing.assert_array_equal((x + tl.tensor([1, 2, 3])).numpy(), x.numpy() + [1, 2, 3])


@pytest.mark.skipif(tl.backend() != "stub", reason="NumPy producers live in host memory")
def test_from_dlpack_copies_float64_and_strided_producers():
    a = np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0
    np.testing.assert_array_equal(tl.from_dlpack(a).numpy(), a.astype(np.float32))
    b = np.arange(30, dtype=np.float32).reshape(5, 6)[::2, 1::2]
    t = tl.from_dlpack(b)
    np.testing.assert_array_equal(t.numpy(), b)
    np.testing.assert_array_equal(tl.from_dlpack(a.T).numpy(), a.T.astype(np.float32))
