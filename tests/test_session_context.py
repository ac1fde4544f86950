"""`with Session() as s:` makes s the current session: what carries no Tensor (torchlean.tensor,
Embedding of integer indices, DataLoader tensors) records on s inside the block."""
import numpy as np
import pytest

import torchlean as tl
from torchlean import nn
from torchlean.session import Session, default_session


def test_tensor_and_embedding_land_on_the_entered_session():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5)).astype(np.float32)
    emb = nn.Embedding(7, 5)
    idx = np.array([[6, 0, 3], [3, 3, 1]])
    with Session() as s:
        assert default_session() is s
        x = tl.tensor(a)
        assert x.session is s
        y = s.tensor(b) + x            # an explicit and an implicit tensor mix freely
        np.testing.assert_allclose(y.numpy(), a.astype(np.float64) + b, rtol=1e-6)
        e = emb(idx)                   # integer NumPy indices carry no session
        assert e.session is s
        np.testing.assert_array_equal(e.numpy(), emb.weight.numpy()[idx])
        # the gradient reaches the embedding table: row r gets the sum of its weights
        w = rng.standard_normal((2, 3, 5))
        (e * s.tensor(w)).sum().backward()
        want = np.zeros((7, 5))
        np.add.at(want, idx.reshape(-1), w.reshape(-1, 5))
        np.testing.assert_allclose(emb.weight.grad, want, rtol=1e-5, atol=1e-6)
    assert default_session() is not s
    with pytest.raises(ValueError, match="released"):
        x.numpy()                      # the block's step was released on exit


def test_nested_blocks_and_exceptions_restore_the_outer_session():
    outer_default = default_session()
    with Session() as s1:
        with Session() as s2:
            assert default_session() is s2
        assert default_session() is s1
        with pytest.raises(RuntimeError):
            with Session() as s3:
                assert default_session() is s3
                raise RuntimeError("boom")
        assert default_session() is s1
    assert default_session() is outer_default


def test_dataloader_tensors_follow_the_entered_session():
    from torchlean.data import DataLoader
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    loader = DataLoader(x, batch_size=4, as_tensor=True)
    with Session() as s:
        first = next(iter(loader))
        assert first.session is s
        np.testing.assert_array_equal(first.numpy(), x[:4])
