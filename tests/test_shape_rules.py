"""The shape rule package: every rule ops.yaml calls exists, the generator loads the same
package, no two rules are exact twins, and the shared accessors take shapes and buffers."""
import ast
import inspect

import numpy as np
import pytest

import torchlean as tl
from torchlean import shapes as S
from codegen.registry import load_shape_helpers, parse_registry


def _registry_calls():
    ops = parse_registry()
    names = {o.name for o in ops}
    calls = set()
    for o in ops:
        exprs = [e for _, e in o.outputs] + [a.expr for a in o.args] + [v.expr for v in o.vjps]
        for e in exprs:
            for n in ast.walk(ast.parse(str(e), mode="eval")):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
                    calls.add(n.func.id)
    return calls, names


def test_every_rule_the_registry_calls_is_exported():
    calls, op_names = _registry_calls()
    missing = sorted(c for c in calls if not callable(getattr(S, c, None)) and c not in op_names)
    assert missing == []
    assert len(calls) > 60


def test_generator_loads_the_same_rules():
    loaded = load_shape_helpers()
    public = {n for n in dir(S) if not n.startswith("_") and inspect.isfunction(getattr(S, n))}
    assert public == {n for n in dir(loaded) if not n.startswith("_")
                      and inspect.isfunction(getattr(loaded, n))}
    assert loaded.linear((3, 4), (3,), (5, 4)) == (5, 3)


def _fingerprint(f):
    c = f.__code__
    return (c.co_code, c.co_consts, c.co_names, c.co_varnames, c.co_argcount)


def test_no_exact_twins():
    funcs = {}
    for name in dir(S):
        f = getattr(S, name)
        if inspect.isfunction(f):
            funcs.setdefault(id(f), f)
    seen = {}
    for f in funcs.values():
        fp = _fingerprint(f)
        assert fp not in seen, f"{f.__name__} is an exact twin of {seen[fp]}"
        seen[fp] = f.__name__
    assert len(seen) > 80


def test_every_rule_has_one_name():
    """No aliases: each exported rule is one function under one name (ops.yaml calls it so)."""
    names: dict[int, list[str]] = {}
    for name in dir(S):
        f = getattr(S, name)
        if inspect.isfunction(f) and not name.startswith("_"):
            names.setdefault(id(f), []).append(name)
    twins = sorted(ns for ns in names.values() if len(ns) > 1)
    assert twins == [], f"rules exported under several names: {twins}"


@pytest.mark.parametrize("shape,batch,seq,cols,lead", [
    ((7, 5), 1, 7, 5, 7), ((3, 7, 5), 3, 7, 5, 3), ((1, 1, 1), 1, 1, 1, 1)])
def test_accessors_on_shapes_and_buffers(shape, batch, seq, cols, lead):
    b = tl.AnyBuffer.from_numpy(np.zeros(shape, np.float32))
    for v in (shape, b):
        assert (S.batch_of(v), S.seq_len(v), S.cols(v), S.lead_len(v)) == (batch, seq, cols, lead)
        assert S.rows(v) == int(np.prod(shape[:-1]))
    b.release()


def test_accessor_errors():
    with pytest.raises(S.ShapeError, match="rank >= 1"):
        S.cols(())
    with pytest.raises(S.ShapeError, match="rank >= 2"):
        S.seq_len((4,))


def test_flag():
    assert [S.flag(v) for v in (None, False, True, 0, 1)] == [0, 0, 1, 0, 1]
    assert S.flag(np.zeros((2, 2), bool)) == 1   # a present mask, whatever its values
