"""safetensors files written by hand: 8-byte LE header length, JSON header, raw LE float32."""
from __future__ import annotations

import json
import struct

import numpy as np


def save_file(tensors: dict, path: str) -> None:
    header, off, blobs = {}, 0, []
    for name in sorted(tensors):
        a = np.asarray(tensors[name], dtype="<f4", order="C")   # keeps 0-d shapes (scalars)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load_file(path: str) -> dict:
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            raise ValueError(f"load_file: {name} has dtype {info['dtype']}, only F32 is supported")
        s, e = info["data_offsets"]
        out[name] = np.frombuffer(data[base + s:base + e], dtype="<f4").reshape(info["shape"]).copy()
    return out
