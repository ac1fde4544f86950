"""torch.save / torch.load for state_dicts and nested containers of tensors, in a safe format:
a safetensors file whose metadata holds a JSON description of the object tree.

What a file can hold: float32 Tensors and nn.Parameters (requires_grad kept), int64 / bool
IntTensors, NumPy arrays and NumPy scalars of any numeric dtype (kept), Python int / float /
bool / str / None, and dict, OrderedDict, list and tuple of those, nested. An object reached
twice (a tied weight) is stored once and loads as one object. Anything else is refused at
save() with a TypeError naming where in the tree it is, so loading never runs code: there is
no pickle, and weights_only=True (torch's default) and False load the same things.

The file is written atomically (a temporary file renamed over the path, as
torchlean.nn.checkpoint.write_atomic does), and a truncated, damaged or foreign file (a PyTorch
pickle checkpoint, a plain safetensors file) raises a ValueError naming the file.
"""
from __future__ import annotations

import collections
import json
import os
import struct

import numpy as np
import safetensors.numpy as _st

from torchlean import devices as _devices
from torchlean.factories import tensor as _tensor
from torchlean.int_tensor import IntTensor
from torchlean.nn.checkpoint import MAX_HEADER_BYTES, write_atomic
from torchlean.session import Parameter, Tensor

_TREE_KEY = "torchlean.save"      # the metadata entry holding the tree (and marking the format)
FORMAT_VERSION = 1
_LEAF_TYPES = "Tensor, Parameter, IntTensor, NumPy array or scalar, int, float, bool, str, None"


# ------------------------------------------------------------------------------ save

class _Writer:
    """Walks an object tree into JSON nodes, collecting the arrays to store."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: dict[int, str] = {}       # id(tensor or array) -> its stored name
        self.keep: list = []                 # keeps walked objects alive so ids stay unique

    def array(self, obj, a: np.ndarray) -> str:
        name = self.seen.get(id(obj))
        if name is None:
            name = f"t{len(self.arrays)}"
            self.arrays[name] = np.asarray(a, order="C")   # 0-d stays 0-d
            self.seen[id(obj)] = name
            self.keep.append(obj)
        return name

    def node(self, obj, where: str):
        if obj is None or isinstance(obj, (bool, str)):
            return {"T": "value", "v": obj}
        if isinstance(obj, int):
            return {"T": "int", "v": str(obj)}
        if isinstance(obj, float):
            return {"T": "float", "v": obj.hex()}
        if isinstance(obj, Parameter):
            return {"T": "Parameter", "id": self.array(obj, np.asarray(obj.numpy())),
                    "requires_grad": bool(obj.requires_grad)}
        if isinstance(obj, Tensor):
            return {"T": "Tensor", "id": self.array(obj, obj.detach().numpy()),
                    "requires_grad": bool(obj.requires_grad)}
        if isinstance(obj, IntTensor):
            return {"T": "IntTensor", "id": self.array(obj, obj.numpy())}
        if isinstance(obj, (np.ndarray, np.generic)):
            a = np.asarray(obj)
            if a.dtype.kind not in "biuf":
                raise TypeError(f"save: {where} is a NumPy {a.dtype} array; only bool, integer "
                                f"and float arrays can be saved")
            return {"T": "ndarray" if isinstance(obj, np.ndarray) else "npscalar",
                    "id": self.array(obj, a)}
        if isinstance(obj, dict):
            kind = "OrderedDict" if isinstance(obj, collections.OrderedDict) else "dict"
            items = []
            for k, v in obj.items():
                if not (k is None or isinstance(k, (bool, int, float, str))):
                    raise TypeError(f"save: {where} has a key of type {type(k).__name__}; "
                                    f"keys must be str, int, float, bool or None")
                items.append([self.node(k, where), self.node(v, f"{where}[{k!r}]")])
            return {"T": kind, "items": items}
        if isinstance(obj, (list, tuple)):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {"T": kind, "items": [self.node(v, f"{where}[{i}]")
                                         for i, v in enumerate(obj)]}
        raise TypeError(f"save: {where} is a {type(obj).__module__}.{type(obj).__qualname__}; "
                        f"torchlean.save stores {_LEAF_TYPES} and dict / OrderedDict / list / "
                        f"tuple of them (no pickled objects; save model.state_dict(), not the "
                        f"model)")


def save(obj, f, pickle_module=None, pickle_protocol=None, **_ignored) -> None:
    """torch.save(obj, f): f is a path (str or os.PathLike) or a binary file object opened for
    writing. pickle_module and pickle_protocol are accepted and unused (nothing is pickled)."""
    w = _Writer()
    tree = w.node(obj, "obj")
    meta = {_TREE_KEY: json.dumps({"format": FORMAT_VERSION, "tree": tree},
                                  separators=(",", ":"))}
    data = _st.save(w.arrays, metadata=meta)
    if isinstance(f, (str, os.PathLike)):
        write_atomic(f, data)
    elif hasattr(f, "write"):
        f.write(data)
    else:
        raise TypeError(f"save: f must be a path or a binary file object, got "
                        f"{type(f).__name__}")


# ------------------------------------------------------------------------------ load

def _name_of(f) -> str:
    if isinstance(f, (str, os.PathLike)):
        return os.fspath(f)
    return str(getattr(f, "name", f"<{type(f).__name__}>"))


def _bad(name: str, problem: str) -> ValueError:
    return ValueError(f"load: {name} is not a file written by torchlean.save: {problem}")


def _foreign(data: bytes, name: str, problem: str) -> ValueError:
    """The error for a file whose frame does not parse, saying what it looks like instead."""
    if data[:4] == b"PK\x03\x04" or (data[:1] == b"\x80" and data[1:2] in b"\x02\x03\x04\x05"):
        return _bad(name, "it looks like a PyTorch pickle checkpoint; torchlean never unpickles. "
                          "In PyTorch, save the state_dict with safetensors.torch.save_file and "
                          "load it with torchlean.nn.load_file")
    return _bad(name, problem)


def _header(data: bytes, name: str) -> dict:
    if len(data) < 8:
        raise _foreign(data, name, f"truncated: {len(data)} bytes, shorter than the 8-byte "
                                   f"header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER_BYTES or n > len(data) - 8:
        raise _foreign(data, name, f"header length {n} runs past the end of the file "
                                   f"({len(data)} bytes; truncated?)")
    try:
        header = json.loads(data[8:8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _foreign(data, name, f"the {n}-byte header is not JSON ({e})") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or _TREE_KEY not in meta:
        raise _bad(name, "no torchlean.save metadata (a plain safetensors file loads with "
                         "torchlean.nn.load_file)")
    try:
        doc = json.loads(meta[_TREE_KEY])
    except json.JSONDecodeError as e:
        raise _bad(name, f"its object tree is not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION or "tree" not in doc:
        raise _bad(name, f"unknown format {doc.get('format') if isinstance(doc, dict) else doc!r}"
                         f" (this torchlean reads format {FORMAT_VERSION})")
    return doc["tree"]


class _Reader:
    def __init__(self, arrays: dict, name: str):
        self.arrays, self.name, self.made = arrays, name, {}

    def array(self, node) -> np.ndarray:
        a = self.arrays.get(node.get("id"))
        if a is None:
            raise _bad(self.name, f"the tree names tensor {node.get('id')!r}, which the file "
                                  f"does not hold")
        return a

    def node(self, node):
        if not isinstance(node, dict) or "T" not in node:
            raise _bad(self.name, f"malformed tree node {node!r}")
        kind = node["T"]
        try:
            if kind == "value":
                return node["v"]
            if kind == "int":
                return int(node["v"])
            if kind == "float":
                return float.fromhex(node["v"])
            if kind in ("list", "tuple"):
                items = [self.node(v) for v in node["items"]]
                return items if kind == "list" else tuple(items)
            if kind in ("dict", "OrderedDict"):
                d = collections.OrderedDict() if kind == "OrderedDict" else {}
                for k, v in node["items"]:
                    d[self.node(k)] = self.node(v)
                return d
        except (KeyError, TypeError, ValueError) as e:
            raise _bad(self.name, f"malformed {kind} node ({type(e).__name__}: {e})") from None
        if kind not in ("Tensor", "Parameter", "IntTensor", "ndarray", "npscalar"):
            raise _bad(self.name, f"unknown node type {kind!r}")
        key = node.get("id")
        if key in self.made:                        # stored once, loaded as one object
            return self.made[key]
        a = self.array(node)
        if kind == "Tensor":
            out = _tensor(a.astype(np.float32), requires_grad=bool(node.get("requires_grad")))
        elif kind == "Parameter":
            out = Parameter(a.astype(np.float32), requires_grad=bool(node.get("requires_grad")))
        elif kind == "IntTensor":
            out = IntTensor(a)
        elif kind == "ndarray":
            out = a.copy()
        else:
            out = a[()]
        self.made[key] = out
        return out


def _check_map_location(map_location) -> None:
    """Tensors load on this process's backend; a CUDA target on the stub raises as torch
    raises without CUDA. A dict or callable map_location (torch's remapping forms) is accepted
    and has nothing to remap."""
    if map_location is None or callable(map_location) or isinstance(map_location, dict):
        return
    d = _devices.device(map_location)
    if d.type == "cuda":
        _devices.check_cuda("load(map_location='cuda')")


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None,
         **_ignored):
    """torch.load(f): the object torchlean.save wrote, from a path or a binary file object.
    weights_only=True (torch's default) and False load the same: the format holds no code."""
    _check_map_location(map_location)
    name = _name_of(f)
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as fh:
            data = fh.read()
    elif hasattr(f, "read"):
        data = f.read()
    else:
        raise TypeError(f"load: f must be a path or a binary file object, got "
                        f"{type(f).__name__}")
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"load: {name} must be opened in binary mode ('rb')")
    tree = _header(bytes(data), name)
    try:
        arrays = _st.load(bytes(data))
    except Exception as e:    # the library's own checks: offsets, sizes, dtypes
        raise _bad(name, f"{type(e).__name__}: {e}") from None
    return _Reader(arrays, name).node(tree)


__all__ = ["save", "load"]
