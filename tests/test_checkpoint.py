"""Checkpoints: round trips through the safetensors library, files written with other dtypes
(PyTorch's int64 buffers), and damaged files that must raise ValueError naming the file."""
import json
import resource
import struct

import numpy as np
import pytest
import safetensors.numpy as st

import torchlean as tl
from torchlean import nn


def _write_raw(path, header: dict, data: bytes, pad=True):
    h = json.dumps(header).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)
    return path


def test_round_trip_keeps_values_and_shapes(tmp_path):
    rng = np.random.default_rng(0)
    d = {"w": rng.normal(size=(3, 5)), "b": np.float32(2.5), "e": np.zeros((0, 4)),
         "v": np.array([np.nan, np.inf, -0.0], np.float32)}
    p = tmp_path / "a.safetensors"
    nn.save_file(d, p)
    raw = st.load_file(str(p))                       # readable by the reference library
    assert {k: v.dtype for k, v in raw.items()} == {k: np.dtype(np.float32) for k in d}
    out = nn.load_file(str(p))
    for k, v in d.items():
        np.testing.assert_array_equal(out[k], np.asarray(v, np.float32))
        assert out[k].shape == np.shape(v)


def test_torch_style_file_with_int64_buffers_loads_into_batchnorm(tmp_path):
    """PyTorch saves BatchNorm's num_batches_tracked as int64 (and may write float64)."""
    bn = nn.BatchNorm2d(3)
    sd = {"weight": np.array([1.0, 2.0, 3.0], np.float32),
          "bias": np.array([0.5, 0.0, -0.5], np.float32),
          "running_mean": np.array([0.1, 0.2, 0.3], np.float64),
          "running_var": np.array([1.0, 1.5, 2.0], np.float32),
          "num_batches_tracked": np.array(7, np.int64)}
    p = tmp_path / "bn.safetensors"
    st.save_file(sd, str(p))
    bn.load_state_dict(str(p))
    np.testing.assert_array_equal(bn.weight.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(bn.running_mean.numpy(), np.float32([0.1, 0.2, 0.3]))
    assert bn.num_batches_tracked.data == 7 and bn._nbt == 7


def _valid(tmp_path):
    p = tmp_path / "ok.safetensors"
    nn.save_file({"a": np.arange(6.0).reshape(2, 3), "b": np.ones(4)}, p)
    return p


def _damaged_files(tmp_path):
    ok = _valid(tmp_path).read_bytes()
    (n,) = struct.unpack("<Q", ok[:8])
    a4 = np.arange(4, dtype="<f4").tobytes()
    cases = {
        "empty": (b"", "shorter than the 8-byte header length"),
        "five bytes": (ok[:5], "shorter than the 8-byte header length"),
        "truncated data": (ok[:-3], "outside the"),
        "header one byte short": (ok[:8 + n - 1], "runs past the end of the file"),
        "length one too long": (struct.pack("<Q", n + 1) + ok[8:8 + n], "runs past the end"),
        "junk header": (struct.pack("<Q", 64) + bytes(range(64)) + a4, "is not JSON"),
        "header is a list": (struct.pack("<Q", 2) + b"[]", "not an object"),
    }
    files = {k: (tmp_path / f"{i}.safetensors", v[1]) for i, (k, v) in enumerate(cases.items())}
    for k, (path, _) in files.items():
        path.write_bytes(cases[k][0])
    entries = {
        "negative offset": ({"dtype": "F32", "shape": [4], "data_offsets": [-4, 12]}, "outside"),
        "offsets past end": ({"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}, "outside"),
        "size mismatch": ({"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}, "needs 12 bytes"),
        "unknown dtype": ({"dtype": "F31", "shape": [4], "data_offsets": [0, 16]}, "unknown dtype"),
        "negative dim": ({"dtype": "F32", "shape": [-4], "data_offsets": [0, 16]}, "non-negative"),
        "float offsets": ({"dtype": "F32", "shape": [4], "data_offsets": [0.0, 16]}, "[begin, end]"),
        "missing shape": ({"dtype": "F32", "data_offsets": [0, 16]}, "needs dtype, shape"),
    }
    for i, (k, (info, msg)) in enumerate(entries.items()):
        files[k] = (_write_raw(tmp_path / f"e{i}.safetensors", {"x": info}, a4), msg)
    overlap = {"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
               "y": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}
    files["overlapping tensors"] = (_write_raw(tmp_path / "ov.safetensors", overlap, a4), "")
    return files


def test_damaged_files_raise_value_error_naming_file_and_problem(tmp_path):
    files = _damaged_files(tmp_path)
    assert len(files) == 15
    for what, (path, msg) in files.items():
        with pytest.raises(ValueError) as e:
            nn.load_file(str(path))
        text = str(e.value)
        assert str(path) in text and "not a valid safetensors file" in text, what
        assert msg in text, (what, text)
    m = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="not a valid safetensors file"):
        m.load_state_dict(str(files["truncated data"][0]))


def test_one_gib_junk_header_fails_before_reading_it(tmp_path):
    """A sparse 1 GiB file whose first 8 bytes claim a 1 GiB header: the length is checked
    against the file size and the format limit before anything is read."""
    p = tmp_path / "big.safetensors"
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", (1 << 30) - 8))
        f.truncate(1 << 30)
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(ValueError, match=r"header length 1073741816 exceeds the format's limit"):
        nn.load_file(str(p))
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak0
    assert grew_kib < 64 * 1024, grew_kib
    p2 = tmp_path / "short.safetensors"       # a large claimed header in a small file
    p2.write_bytes(struct.pack("<Q", 50_000_000) + b"{" * 100)
    with pytest.raises(ValueError, match="runs past the end of the file"):
        nn.load_file(str(p2))


def test_non_numeric_and_metadata(tmp_path):
    p = _write_raw(tmp_path / "m.safetensors",
                   {"__metadata__": {"format": "pt"},
                    "x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
                   np.array([1.5, -2.0], "<f4").tobytes())
    np.testing.assert_array_equal(nn.load_file(str(p))["x"], [1.5, -2.0])
    p2 = tmp_path / "i.safetensors"
    st.save_file({"n": np.array([3, -1], np.int32), "f": np.array([0.25], np.float16)}, str(p2))
    out = nn.load_file(str(p2))
    assert out["n"].dtype == np.float32 and out["n"].tolist() == [3.0, -1.0]
    assert out["f"].tolist() == [0.25]
    assert tl.backend() in ("stub", "cuda")
