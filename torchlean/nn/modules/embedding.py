"""Embedding: a lookup table of trained rows indexed by integer tensors."""
from __future__ import annotations

import numpy as np

from torchlean import _capture
from torchlean.int_tensor import IntTensor
from torchlean.session import Parameter
from torchlean.nn import init
from torchlean.nn.modules.base import Module
from torchlean.nn.arg_checks import check_numel, size_arg


class Embedding(Module):
    """torch.nn.Embedding: weight (num_embeddings, embedding_dim) ~ N(0, 1). padding_idx's row
    starts at zero and never receives a gradient (its lookups read a detached weight)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False):
        super().__init__()
        n = size_arg("Embedding", "num_embeddings", num_embeddings)
        embedding_dim = size_arg("Embedding", "embedding_dim", embedding_dim)
        check_numel("Embedding", "weight", (n, embedding_dim))
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported")
        if padding_idx is not None:
            if not -n <= int(padding_idx) < n:
                raise AssertionError(f"Embedding: padding_idx {padding_idx} must be within "
                                     f"num_embeddings ({n})")
            padding_idx = int(padding_idx) % n
        self.num_embeddings, self.embedding_dim = n, int(embedding_dim)
        self.padding_idx = padding_idx
        w = init.normal((n, int(embedding_dim))) if _weight is None else np.asarray(_weight)
        if padding_idx is not None and _weight is None:
            w[padding_idx] = 0.0
        self.weight = Parameter(w, requires_grad=not _freeze, name="weight")

    def forward(self, idx, session=None):
        """idx: integer array (any shape) -> idx.shape + (d,); session defaults to the default
        session (integer indices carry none)."""
        from torchlean.session import default_session
        s = session or getattr(idx, "session", None) or default_session()
        a = idx._a if isinstance(idx, IntTensor) and _capture.STATE.active else \
            np.asarray(idx.numpy() if hasattr(idx, "numpy") else idx)
        n = self.weight.shape[0]
        if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.round(a))):
            raise TypeError(f"Embedding: indices must be integers, got dtype {a.dtype}")
        bad = np.flatnonzero((a < 0) | (a >= n))
        if bad.size:
            raise IndexError(f"Embedding: index {a.reshape(-1)[bad[0]]} is out of range for "
                             f"{n} embeddings (indices of shape {a.shape}); expected 0 <= index "
                             f"< {n}")
        a = a.astype(np.int64, copy=not _capture.STATE.active)   # captured: read in place
        if _capture.STATE.active:   # an input of a captured step: replays check its range
            _capture.int_guard(a, 0, n, self.padding_idx)
        y = s.op("gather_rows", self.weight, indices=a)
        pad = None if self.padding_idx is None else a == self.padding_idx
        if pad is None or not pad.any():
            return y
        frozen = s.op("gather_rows", s.use(self.weight).detach(), indices=a)
        return s.op("where", s.tensor(pad[..., None].astype(np.float32)), frozen, y)
