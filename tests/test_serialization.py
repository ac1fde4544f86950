"""torchlean.save / torchlean.load: round trips of state_dicts and nested containers (values,
dtypes, container types, shared objects), paths and file objects, and clear errors for objects
that cannot be stored and for truncated or foreign files."""
import collections
import io
import math
import pickle
import struct
import zipfile

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn


def _roundtrip(obj, tmp_path=None):
    if tmp_path is None:
        buf = io.BytesIO()
        tl.save(obj, buf)
        buf.seek(0)
        return tl.load(buf)
    path = tmp_path / "ckpt.pt"
    tl.save(obj, path)
    return tl.load(str(path))


def test_state_dict_roundtrip_loads_strictly(tmp_path):
    tl.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    sd = model.state_dict()
    back = _roundtrip(sd, tmp_path)
    assert list(back) == list(sd)
    for k in sd:
        assert np.asarray(back[k]).dtype == np.float32
        np.testing.assert_array_equal(np.asarray(back[k]), np.asarray(sd[k]))
    tl.manual_seed(1)
    other = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    other.load_state_dict(back)
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    np.testing.assert_array_equal(other(tl.tensor(x)).detach().numpy(),
                                  model(tl.tensor(x)).detach().numpy())


def test_nested_containers_keep_types_values_and_dtypes():
    rng = np.random.default_rng(1)
    f64 = rng.standard_normal((2, 3))
    obj = {
        "epoch": 7, "big": 2**70, "lr": 0.1, "nan": float("nan"), "inf": -math.inf,
        "name": "run-1", "none": None, "flag": True,
        "x": tl.tensor(rng.standard_normal((3, 1)).astype(np.float32)),
        "labels": tl.tensor([3, -1, 2**62]), "mask": tl.tensor([True, False]),
        "arr64": f64, "arr_i32": np.arange(5, dtype=np.int32), "np_scalar": np.float32(2.5),
        "od": collections.OrderedDict([("b", 1), ("a", [1.5, (2, "z")])]),
        "tup": (1, [2, {"k": None}]), 3: "int key", "empty": {}, "empty_list": [],
        "zero_d": tl.tensor(4.0), "empty_t": tl.zeros(0, 3),
    }
    back = _roundtrip(obj)
    assert back["epoch"] == 7 and back["big"] == 2**70 and back["lr"] == 0.1
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf
    assert back["name"] == "run-1" and back["none"] is None and back["flag"] is True
    assert isinstance(back["x"], tl.Tensor)
    np.testing.assert_array_equal(back["x"].numpy(), obj["x"].numpy())
    assert isinstance(back["labels"], tl.IntTensor) and back["labels"].numpy().dtype == np.int64
    np.testing.assert_array_equal(back["labels"].numpy(), [3, -1, 2**62])
    assert back["mask"].numpy().dtype == np.bool_
    assert back["arr64"].dtype == np.float64 and np.array_equal(back["arr64"], f64)
    assert back["arr_i32"].dtype == np.int32
    assert back["np_scalar"] == np.float32(2.5) and isinstance(back["np_scalar"], np.float32)
    assert type(back["od"]) is collections.OrderedDict and list(back["od"]) == ["b", "a"]
    assert back["od"]["a"] == [1.5, (2, "z")] and isinstance(back["od"]["a"][1], tuple)
    assert back["tup"] == (1, [2, {"k": None}]) and back[3] == "int key"
    assert back["empty"] == {} and back["empty_list"] == []
    assert back["zero_d"].shape == () and back["zero_d"].item() == 4.0
    assert tuple(back["empty_t"].shape) == (0, 3)


def test_parameters_and_requires_grad_survive():
    p = nn.Parameter(np.array([[1.0, 2.0]], dtype=np.float32))
    frozen = nn.Parameter(np.zeros(2, dtype=np.float32), requires_grad=False)
    t = tl.tensor([1.0, 2.0], requires_grad=True)
    back = _roundtrip({"p": p, "frozen": frozen, "t": t})
    assert isinstance(back["p"], nn.Parameter) and back["p"].requires_grad
    assert not back["frozen"].requires_grad
    np.testing.assert_array_equal(np.asarray(back["p"].numpy()), [[1.0, 2.0]])
    assert back["t"].requires_grad


def test_an_object_reached_twice_loads_as_one():
    w = tl.tensor([1.0, 2.0, 3.0])
    a = np.arange(3)
    back = _roundtrip({"enc": w, "dec": w, "a": a, "b": [a]})
    assert back["enc"] is back["dec"] and back["a"] is back["b"][0]


def test_file_object_and_pathlike(tmp_path):
    obj = {"w": np.ones((2, 2), dtype=np.float32)}
    path = tmp_path / "f.pt"
    with open(path, "wb") as f:
        tl.save(obj, f)
    with open(path, "rb") as f:
        np.testing.assert_array_equal(tl.load(f)["w"], obj["w"])
    np.testing.assert_array_equal(tl.load(path, map_location="cpu", weights_only=False)["w"],
                                  obj["w"])
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_unstorable_objects_are_refused_with_where_they_are():
    class Thing:
        pass
    with pytest.raises(TypeError, match=r"save: obj\['a'\]\[1\] is a .*Thing"):
        tl.save({"a": [1, Thing()]}, io.BytesIO())
    with pytest.raises(TypeError, match="save model.state_dict"):
        tl.save(nn.Linear(2, 2), io.BytesIO())
    with pytest.raises(TypeError, match="key of type tuple"):
        tl.save({(1, 2): 3}, io.BytesIO())
    with pytest.raises(TypeError, match="object"):
        tl.save({"s": np.array(["a"], dtype=object)}, io.BytesIO())


def test_truncated_file_names_the_file(tmp_path):
    path = tmp_path / "model.pt"
    tl.save({"w": np.arange(100, dtype=np.float32)}, path)
    data = path.read_bytes()
    for cut in (3, 20, len(data) - 10):
        bad = tmp_path / f"cut{cut}.pt"
        bad.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=f"load: .*cut{cut}.pt is not a file written by"):
            tl.load(bad)


def test_foreign_files_are_refused(tmp_path):
    pk = tmp_path / "pickle.pt"
    pk.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(ValueError, match="never unpickles"):
        tl.load(pk)
    zp = tmp_path / "torchzip.pt"
    with zipfile.ZipFile(zp, "w") as z:
        z.writestr("archive/data.pkl", b"x")
    with pytest.raises(ValueError, match="never unpickles"):
        tl.load(zp)
    st = tmp_path / "plain.safetensors"
    nn.save_file({"w": np.ones(2)}, st)
    with pytest.raises(ValueError, match="nn.load_file"):
        tl.load(st)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(struct.pack("<Q", 5) + b"{{{{{" + b"\0" * 8)
    with pytest.raises(ValueError, match="not JSON"):
        tl.load(junk)


def test_map_location_cuda_on_the_stub_raises():
    if tl.backend() == "cuda":
        pytest.skip("cuda is available")
    buf = io.BytesIO()
    tl.save({"a": 1}, buf)
    buf.seek(0)
    with pytest.raises(RuntimeError, match="CUDA"):
        tl.load(buf, map_location="cuda")


def test_torch_state_dict_values_match_when_torch_imports(tmp_path):
    torch = pytest.importorskip("torch")
    tm = torch.nn.Linear(4, 3)
    sd = {k: v.detach().numpy() for k, v in tm.state_dict().items()}
    back = _roundtrip(sd, tmp_path)
    x = np.random.default_rng(2).standard_normal((2, 4)).astype(np.float32)
    m = nn.Linear(4, 3)
    m.load_state_dict(back)
    np.testing.assert_allclose(m(tl.tensor(x)).detach().numpy(),
                               tm(torch.from_numpy(x)).detach().numpy(), rtol=1e-6, atol=1e-6)
