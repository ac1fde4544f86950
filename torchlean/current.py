"""Which Session the calling thread records on, asked from layers below the Session.

Tensor, Parameter and IntTensor sit below torchlean.session but must sometimes record on the
thread's current Session (a Parameter has none of its own; int64 values promote to float32
Tensors of it). torchlean.session registers its default_session() here when it is imported, so
the lower layers ask this module and never import the one above them.
"""
from __future__ import annotations

_provider = []   # [default_session], set once by torchlean.session


def register(default_session) -> None:
    """Called by torchlean.session at import: the function that answers session()."""
    _provider[:] = [default_session]


def session():
    """The calling thread's current Session (torchlean.session.default_session)."""
    return _provider[0]()
