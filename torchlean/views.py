"""PyTorch's views: transpose, permute, .T, .mT, .t(), expand, broadcast_to, narrow, select,
unbind, split, chunk, iteration, basic indexing (ints, positive-step slices, None, ...),
unsqueeze, squeeze, view, reshape, flatten and diagonal give a ViewTensor that shares its base's
storage in both directions, as in PyTorch.

Kernels stay contiguous. A view remembers its base (the root Tensor or Parameter, never another
view), its recipe (the ops that compute it from the base: the op's own kernel, an alias for a
reshape, a copy otherwise) and its layout (shape, strides, offset into the base's row-major
storage, PyTorch's). Reading a view whose base changed since its values were computed (a write
into the base's storage moved its version, or the base was rebased onto a new node by an
in-place op that records a gradient) runs the recipe again: a view's node id is a property that
checks. A write through a view computes the new values out of place and scatters them into the
base: into its storage without a gradient, or by rebasing the base onto a differentiable scatter
(PyTorch's CopySlices). Every write into a storage a view reads also bumps the version of the
view's own copy (inplace.FAMILIES), so views share their base's version counter.
Plain tensors pay nothing: only a ViewTensor has the checking id.
"""
from __future__ import annotations

import math
import operator
import threading

import numpy as np

from torchlean import composite as _composite
from torchlean import indexing as ix
from torchlean import inplace as _k
from torchlean.buffer import bump
from torchlean.mutation import _LEAF_MSG, _assign, _check_shape
from torchlean.tape import is_grad_enabled, no_grad, set_grad_enabled
from torchlean.tensor import Tensor

_get_ident = threading.get_ident
_RAW = Tensor.__dict__["id"]          # the slot holding a Tensor's node id
_raw_get, _raw_set = _RAW.__get__, _RAW.__set__
_OVERLAP_MSG = ("{op}: unsupported operation: more than one element of the written-to tensor "
                "refers to a single memory location. Please clone() the tensor before "
                "performing the operation. (a view of shape {shape} with strides {strides})")
_VIEW_LEAF_MSG = ("{op}: a view of a leaf Variable that requires grad is being used in an "
                  "in-place operation. (wrap the update in torchlean.no_grad(), or write "
                  "through .data)")


def _storage(b):
    """(key, AnyBuffer) of base b now: key changes when b is rebased or its storage swapped."""
    if b._is_parameter:
        m = b.mirror()
        return m, m
    nid = _raw_get(b)
    return nid, b.session.tape.nodes[nid].value


class ViewTensor(Tensor):
    """A Tensor whose values are those of its base's storage at its layout (module doc)."""

    __slots__ = ("_vbase", "_recipe", "_layout", "_with_grad", "_snap", "_pos", "__weakref__")

    def __del__(self):
        try:
            s = self.session
            if self.gen == s.gen and _get_ident() == s.owner:
                s.release_ref(_raw_get(self))
        except Exception:  # interpreter shutdown
            pass

    @property
    def id(self) -> int:
        rid = _raw_get(self)
        s = self.session
        if self.gen != s.gen or _get_ident() != s.owner:
            return rid                     # the caller's _check raises
        snap = self._snap
        if snap is not None:
            key, store = _storage(self._vbase)
            if (key is snap[0] or key == snap[0]) and store.buf is snap[1] \
                    and getattr(store.buf, "version", 0) == snap[2]:
                return rid
        return self._refresh()

    @id.setter
    def id(self, nid) -> None:
        _raw_set(self, nid)

    def _refresh(self) -> int:
        """Compute the values again from the base (its recipe) and point this handle at them."""
        with set_grad_enabled(self._with_grad):
            y = self._recipe(self._vbase)
        nid = y.id
        s = self.session
        s.refs[nid] = s.refs.get(nid, 0) + 1
        old = _raw_get(self)
        _raw_set(self, nid)
        s.release_ref(old)
        self._remember()
        return nid

    def _remember(self) -> None:
        key, store = _storage(self._vbase)
        self._snap = (key, store.buf, getattr(store.buf, "version", 0))
        _k.watch(store.buf, self)
        own = self.session.tape.nodes[_raw_get(self)].value.buf
        if own is not store.buf:
            _k.watch(own, self)

    def storage_written(self, buf, op: str) -> None:
        """inplace.bump_storage: `buf` was written. The base's storage: this view's own copy
        takes a new version too (a VJP that saved it raises, as with PyTorch's shared counter).
        Its own copy (written through a plain alias of it, which PyTorch would have copied):
        its values come from the base again."""
        snap = self._snap
        if snap is None:
            return
        try:
            own = self.session.tape.nodes[_raw_get(self)].value.buf
        except Exception:
            return
        if buf is snap[1]:
            if own is not buf:
                bump(own, op)
        elif buf is own:
            self._snap = None

    # ------------------------------------------------------------------ writes
    def _positions(self, op: str) -> np.ndarray:
        """The base positions this view writes; raises as PyTorch for an overlapping view."""
        pos = self._pos
        if pos is None:
            pos = ix.layout_positions(self._layout)
            if np.unique(pos).size != pos.size:
                shape, strides, _ = self._layout
                raise RuntimeError(_OVERLAP_MSG.format(op=op, shape=list(shape),
                                                       strides=list(strides)))
            self._pos = pos
        return pos

    def _inplace(self, op, compute, operands=(), kernel=None):
        """Write compute() (the new values, out of place) into the base at this view's
        positions (module doc); `kernel` is for plain storages and not used here."""
        b = self._vbase
        pos = self._positions(op)
        if is_grad_enabled() and (self.requires_grad or any(
                getattr(o, "requires_grad", False) for o in operands)):
            if b.requires_grad and b.is_leaf:
                raise RuntimeError(_VIEW_LEAF_MSG.format(op=op))
            if b._is_parameter:
                raise RuntimeError(f"{op}: an operand requires grad but the Parameter does not; "
                                   "torchlean writes Parameters only outside autograd (no_grad)")
            if not self._with_grad and b.requires_grad:
                raise RuntimeError(f"{op}: a view was created in no_grad mode and is being "
                                   "modified inplace with grad mode enabled")
            _k.bump_storage(_storage(b)[1].buf, op)   # VJPs that saved the old values raise
            out = compute()
            _check_shape(op, out.shape, self.shape)
            b._rebase(b._still_differentiable(_assign(b, tuple(b.shape), pos, out)))
            return self
        with no_grad():
            out = compute()
            _check_shape(op, out.shape, self.shape)
            new = _assign(b, tuple(b.shape), pos, out)
            _k.copy_into(_storage(b)[1], new._node().value, op)
        return self

    def _fast(self, name, other) -> bool:
        return False

    def _random(self, op, kernel):
        fresh = self.session.tensor(np.zeros(tuple(self.shape), np.float32))
        kernel(fresh._node().value)
        return self._inplace(op, lambda: fresh)

    def _rebase(self, out) -> None:
        raise RuntimeError(f"a view (shape {list(self.shape)} of a base of shape "
                           f"{list(self._vbase.shape)}) cannot be given new data of another "
                           "shape; clone() it first")

    # ------------------------------------------------------------------ identity
    def detach(self):
        """A view of the base's storage outside autograd (as torch's detach of a view)."""
        db = self._vbase.detach()
        with no_grad():
            y = self._recipe(db)
        return _new_view(y, db, self._recipe, self._layout, False)

    @property
    def _base(self):
        return self._vbase

    def is_contiguous(self, memory_format=None) -> bool:
        return ix.is_contiguous(self._layout)

    def stride(self, dim=None):
        st = self._layout[1]
        return st if dim is None else st[ix.normalize_dim(dim, len(st), "stride")]

    def storage_offset(self) -> int:
        return self._layout[2]

    def contiguous(self, memory_format=None):
        return self if ix.is_contiguous(self._layout) else self.clone()


def _new_view(y, root, recipe, layout, with_grad: bool) -> ViewTensor:
    """A ViewTensor on y's node (the values), of `root` through `recipe` at `layout`."""
    s = y.session
    nid = y.id
    v = ViewTensor.__new__(ViewTensor)
    v.session, v.gen = s, s.gen
    _raw_set(v, nid)
    s.refs[nid] = s.refs.get(nid, 0) + 1
    v._vbase, v._recipe, v._layout, v._with_grad, v._pos = root, recipe, layout, with_grad, None
    v._remember()
    return v


def _layout_of(x):
    return x._layout if x.__class__ is ViewTensor else ix.contiguous_layout(tuple(x.shape))


def _make(x, step, layout):
    """The view step(x) of x: its values now (step's ops on x), its layout(x's layout, result
    shape), its recipe from the root (x's recipe, then step)."""
    y = step(x)
    lay = layout(_layout_of(x), tuple(y.shape))
    if x.__class__ is ViewTensor:
        root, parent = x._vbase, x._recipe

        def recipe(b):
            return step(parent(b))
    else:
        root, recipe = x, step
    return _new_view(y, root, recipe, lay, is_grad_enabled())


def _alias(t):
    """t itself as a new view (an identity permutation: no op)."""
    return _composite.permute(t, tuple(range(t.ndim)))


def _same(lay, shape):
    return lay


# ---------------------------------------------------------------------- the view methods
def transpose(self, dim0, dim1):
    n = self.ndim
    a, b = (ix.normalize_dim(d, n, "transpose") for d in (dim0, dim1))
    if n < 2 or a == b:
        return _make(self, _alias, _same)
    perm = list(range(n))
    perm[a], perm[b] = perm[b], perm[a]
    return _make(self, lambda t: _composite.permute(t, perm),
                 lambda lay, _: ix.permute_layout(lay, perm))


def permute(self, *dims):
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = tuple(dims[0])
    perm = ix.normalize_permutation(dims, self.ndim)
    return _make(self, lambda t: _composite.permute(t, perm),
                 lambda lay, _: ix.permute_layout(lay, perm))


def _T(self):
    """All axes reversed (torch's .T; for 2-D the transpose)."""
    return permute(self, tuple(range(self.ndim))[::-1])


def _mT(self):
    """The last two axes swapped."""
    if self.ndim < 2:
        raise ValueError(f"mT: expected a tensor of rank >= 2, got shape {self.shape}")
    return transpose(self, -2, -1)


def t(self):
    """torch's x.t(): the transpose of a matrix; 0-d and 1-d tensors as they are (a view)."""
    if self.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dimensions, got shape {self.shape}"
                         "; use x.transpose(d0, d1) or x.mT")
    return transpose(self, 0, -1)


def expand(self, *sizes):
    return _make(self, lambda t: _composite.expand(t, sizes), ix.expand_layout)


def broadcast_to(self, size):
    """torch's x.broadcast_to(shape): x.expand(shape)."""
    return expand(self, tuple(size))


def expand_as(self, other):
    return expand(self, tuple(other.shape))


def getitem(self, key):
    parts = ix.basic_key(key)
    if parts is None:          # an advanced index: a copy, as in torch
        return _composite.getitem(self, key)
    lay = ix.getitem_layout(_layout_of(self), parts, key)   # raises torch's IndexError
    return _make(self, lambda t: _composite.getitem(t, key), lambda *_: lay)


def select(self, dim, index):
    if self.ndim == 0:
        raise IndexError("select: cannot select on a 0-d tensor")
    d = ix.normalize_dim(dim, self.ndim, "select")
    n = self.shape[d]
    i = operator.index(index)
    if not -n <= i < n:
        raise IndexError(f"select: index {i} out of range for dim {d} of size {n} "
                         f"(shape {tuple(self.shape)})")
    return getitem(self, (slice(None),) * d + (i % n,))


def narrow(self, dim, start, length):
    d = ix.normalize_dim(dim, self.ndim, "narrow")
    n = self.shape[d]
    st = int(start) + (n if int(start) < 0 else 0)
    ln = int(length)
    if not 0 <= st <= n or ln < 0 or st + ln > n:
        raise IndexError(f"narrow: start {start} and length {length} out of range for dim {d} "
                         f"of size {n} (shape {tuple(self.shape)})")
    return getitem(self, (slice(None),) * d + (slice(st, st + ln),))


def unbind(self, dim=0):
    d = ix.normalize_dim(dim, self.ndim, "unbind")
    return tuple(select(self, d, i) for i in range(self.shape[d]))


def split(self, split_size_or_sections, dim=0):
    d = ix.normalize_dim(dim, self.ndim, "split")
    out, a = [], 0
    for v in ix.split_sizes(split_size_or_sections, tuple(self.shape), d):
        out.append(narrow(self, d, a, v))
        a += v
    return tuple(out)


def chunk(self, chunks, dim=0):
    return split(self, *ix.chunk_split(chunks, tuple(self.shape), dim))


def _iter(self):
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(unbind(self, 0))


def unsqueeze(self, dim):
    d = ix.normalize_dim(dim, self.ndim + 1, "unsqueeze")
    return _make(self, lambda t: _composite.unsqueeze(t, d),
                 lambda lay, _: ix.unsqueeze_layout(lay, d))


def squeeze(self, dim=None):
    s = tuple(self.shape)
    if dim is None:
        drop = {i for i, n in enumerate(s) if n == 1}
    else:
        drop = {d for d in ix.normalize_dims(dim, len(s), "squeeze") if s and s[d] == 1}

    def layout(lay, _):
        keep = [i for i in range(len(s)) if i not in drop]
        return (tuple(lay[0][i] for i in keep), tuple(lay[1][i] for i in keep), lay[2])
    return _make(self, lambda t: _composite.squeeze(t, dim), layout)


def _target(self, shape, op):
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        shape = tuple(shape[0])
    return ix.reshape_target(tuple(self.shape), shape, op)


def _reshaped(self, target, op):
    """x.view(target) when x's strides allow it (a view), else None."""
    lay = ix.view_layout(_layout_of(self), target)
    if lay is None:
        return None
    return _make(self, lambda t: _composite.reshape(t, target, op), lambda *_: lay)


def view(self, *shape):
    """A view with another shape; raises, as torch, when the strides do not allow one."""
    target = _target(self, shape, "view")
    out = _reshaped(self, target, "view")
    if out is None:
        raise RuntimeError(f"view: view size is not compatible with input tensor's size and "
                           f"stride (at least one dimension spans across two contiguous "
                           f"subspaces): shape {tuple(self.shape)} with strides "
                           f"{self.stride()} to {target}. Use .reshape(...) instead.")
    return out


def reshape(self, *shape):
    """A view when the strides allow one, else a copy (as torch)."""
    target = _target(self, shape, "reshape")
    out = _reshaped(self, target, "reshape")
    return out if out is not None else _composite.reshape(self.clone(), target)


def flatten(self, start_dim=0, end_dim=-1):
    s = tuple(self.shape)
    if not s:
        return reshape(self, (1,))
    a = ix.normalize_dim(start_dim, len(s), "flatten")
    b = ix.normalize_dim(end_dim, len(s), "flatten")
    if a > b:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim} "
                         f"for shape {s}")
    return reshape(self, s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:])


def view_as(self, other):
    return view(self, tuple(other.shape))


def reshape_as(self, other):
    return reshape(self, tuple(other.shape))


def diagonal(self, offset=0, dim1=0, dim2=1):
    n = self.ndim
    a, b = ix.normalize_dim(dim1, n, "diagonal"), ix.normalize_dim(dim2, n, "diagonal")
    if a == b or n < 2:
        raise ValueError(f"diagonal: dim1 {dim1} and dim2 {dim2} must be two different axes "
                         f"of shape {tuple(self.shape)}")
    off = operator.index(offset)

    def step(t):
        pos = ix.layout_positions(ix.diagonal_layout(ix.contiguous_layout(tuple(t.shape)),
                                                     off, a, b))
        flat = _composite.reshape(t, (-1,))
        return _composite.reshape(_composite.getitem(flat, pos.reshape(-1)), pos.shape)
    return _make(self, step, lambda lay, _: ix.diagonal_layout(lay, off, a, b))


# plain tensors: their own base, contiguous
def _plain_base(self):
    return None


def _plain_is_contiguous(self, memory_format=None) -> bool:
    return True


def _plain_stride(self, dim=None):
    st = ix.contiguous_strides(tuple(self.shape))
    return st if dim is None else st[ix.normalize_dim(dim, len(st), "stride")]


def _plain_storage_offset(self) -> int:
    return 0


def _plain_contiguous(self, memory_format=None):
    return self


_METHODS = {"transpose": transpose, "permute": permute, "T": property(_T),
            "mT": property(_mT), "t": t, "expand": expand, "broadcast_to": broadcast_to,
            "expand_as": expand_as, "__getitem__": getitem, "select": select, "narrow": narrow,
            "unbind": unbind, "split": split, "chunk": chunk, "__iter__": _iter,
            "unsqueeze": unsqueeze, "squeeze": squeeze, "view": view, "reshape": reshape,
            "flatten": flatten, "view_as": view_as, "reshape_as": reshape_as,
            "diagonal": diagonal, "swapaxes": transpose, "swapdims": transpose,
            "_base": property(_plain_base), "is_contiguous": _plain_is_contiguous,
            "stride": _plain_stride, "storage_offset": _plain_storage_offset,
            "contiguous": _plain_contiguous}
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
del _name, _fn
