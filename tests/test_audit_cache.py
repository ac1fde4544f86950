"""torchlean.audit's reuse of work already done in a step: a parameter's gradient keeps the
digest its VJP's record holds only while its storage is unwritten (an in-place write, a
collective or a gradient hook gives a new digest, the digest of the bits the optimizer read),
and the optimizer's hyperparameter JSON is made again whenever a value changed (a new value, a
list changed in place, 0.0 against -0.0, 1 against 1.0)."""
from __future__ import annotations

import json

import numpy as np

from torchlean import audit, nn, no_grad, optim
from torchlean.audit.recordfile import Record, json_line
from torchlean.session import Session, manual_seed

from test_audit import digest_numpy


def _model():
    manual_seed(5)
    return nn.Sequential(nn.Linear(7, 5), nn.Tanh(), nn.Linear(5, 3))


def _run(path, steps=3, before_step=None, groups=None, hook=None):
    """A recorded run of a small model: each step's parameter gradients as the optimizer read
    them (their bits) and the record. before_step(k, model, opt) runs between backward and
    step; groups(k, opt) changes hyperparameters before step k's forward."""
    model = _model()
    opt = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if hook is not None:
        for p in model.parameters():
            p.register_post_accumulate_grad_hook(hook)
    rng = np.random.default_rng(11)
    s = Session()
    seen = []
    with audit.record(path, label="cache-test"):
        for k in range(steps):
            if groups is not None:
                groups(k, opt)
            x = s.tensor(rng.normal(size=(4, 7)).astype(np.float32))
            y = rng.integers(0, 3, 4)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            if before_step is not None:
                before_step(k, model, opt)
            seen.append([p.grad.numpy().view(np.uint32).copy() for p in model.parameters()])
            opt.step()
            s.step()
    return seen, Record(path)


def _step_grads(rec):
    """Each S record's gradient digests (ints), in parameter order."""
    return [[int(e[2], 16) for e in r[5]] for r in rec.records if r[0] == "S"]


def _vjp_outputs(rec):
    """Every digest a B record gives for a VJP output."""
    return {int(o[1], 16) for r in rec.records if r[0] == "B" for o in r[6] if o is not None}


def test_unwritten_gradients_keep_their_vjp_digest_which_is_their_bits(tmp_path):
    seen, rec = _run(str(tmp_path / "a.tlaudit"))
    grads = _step_grads(rec)
    outs = _vjp_outputs(rec)
    assert len(grads) == 3 and len(grads[0]) == 4
    for step_bits, step_digests in zip(seen, grads):
        for bits, d in zip(step_bits, step_digests):
            assert d == digest_numpy(bits.ravel())   # the bits the optimizer read
            assert d in outs                          # the contribution's digest, reused


def test_a_gradient_written_in_place_after_backward_gets_a_new_digest(tmp_path):
    def scale(k, model, opt):
        with no_grad():
            for p in model.parameters():
                p.grad.mul_(0.5 if k != 1 else 1.0)   # step 1: written with the same bits

    seen, rec = _run(str(tmp_path / "b.tlaudit"), before_step=scale)
    plain, _ = _run(str(tmp_path / "c.tlaudit"))
    outs = _vjp_outputs(rec)
    for k, (step_bits, step_digests) in enumerate(zip(seen, _step_grads(rec))):
        for bits, d in zip(step_bits, step_digests):
            assert d == digest_numpy(bits.ravel())
            if k != 1:
                assert d not in outs      # halved: not any contribution's bits
    # the halving mattered (the steps after it differ from the plain run)
    assert not np.array_equal(seen[2][0], plain[2][0])


def test_a_gradient_hook_writing_in_place_gives_the_written_bits(tmp_path):
    seen, rec = _run(str(tmp_path / "h.tlaudit"), hook=lambda p: p.grad.mul_(2.0))
    outs = _vjp_outputs(rec)
    for step_bits, step_digests in zip(seen, _step_grads(rec)):
        for bits, d in zip(step_bits, step_digests):
            assert d == digest_numpy(bits.ravel()) and d not in outs


def test_a_collective_on_a_gradient_counts_as_a_write():
    from torchlean import distributed as dist
    from torchlean.buffer import version
    dist.init()
    try:
        s = Session()
        t = s.tensor(np.arange(5, dtype=np.float32))
        v0 = version(t.value.buf)
        dist.all_reduce(t)
        v1 = version(t.value.buf)
        dist.broadcast(t, 0)
        assert (v1, version(t.value.buf)) == (v0 + 1, v0 + 2)
        assert np.array_equal(t.numpy(), np.arange(5, dtype=np.float32))   # world of one
    finally:
        dist.destroy()


def test_hyperparameters_follow_every_change(tmp_path):
    listed = [1, 2]
    changes = {
        1: lambda g: g.update(lr=0.01),                          # a new value
        2: lambda g: g.update(extra=listed),                     # a new key holding a list
        3: lambda g: listed.append(3),                           # the list changed in place
        4: lambda g: g.update(weight_decay=-0.0),                # -0.0 == 0.0, other JSON
        5: lambda g: g.update(weight_decay=0.0, momentum=1),     # 1 == 1.0, other JSON
        6: lambda g: g.update(momentum=1.0, extra=(0.5, 1)),     # a tuple: written as a list
        7: lambda g: None,
    }

    def groups(k, opt):
        changes.get(k, lambda g: None)(opt.param_groups[0])

    _, rec = _run(str(tmp_path / "p.tlaudit"), steps=8, groups=groups)
    hyper = [r[3][0] for r in rec.records if r[0] == "S"]
    assert [h["lr"] for h in hyper] == [0.05] + [0.01] * 7
    assert "extra" not in hyper[1] and hyper[2]["extra"] == [1, 2] and hyper[3]["extra"] == [1, 2, 3]
    lines = [line for line in rec.lines if line.startswith('["S"')]
    assert '"weight_decay":-0.0' in lines[4] and '"weight_decay":0.0' in lines[5]
    assert '"momentum":1,' in lines[5] and '"momentum":1.0,' in lines[6]
    assert '"extra":[0.5,1]' in lines[6]
    groups_text = [line[line.index("[{"):line.index("}]") + 2] for line in lines]
    assert groups_text[7] == groups_text[6] and len(set(groups_text)) == 7
    for line, r in zip(rec.lines, rec.records):
        assert line + "\n" == json_line(r)


def test_two_optimizers_keep_their_own_hyperparameters(tmp_path):
    model = _model()
    a = optim.SGD(list(model.parameters())[:2], lr=0.1)
    b = optim.Adam(list(model.parameters())[2:], lr=0.002, betas=(0.8, 0.9))
    rng = np.random.default_rng(2)
    s = Session()
    path = str(tmp_path / "two.tlaudit")
    with audit.record(path, label="cache-test"):
        for k in range(3):
            x = s.tensor(rng.normal(size=(4, 7)).astype(np.float32))
            a.zero_grad()
            b.zero_grad()
            nn.functional.cross_entropy(model(x), rng.integers(0, 3, 4)).backward()
            a.step()
            if k == 1:
                b.param_groups[0]["lr"] = 0.003
            b.step()
            s.step()
    steps = [(r[2], r[3][0]) for r in Record(path).records if r[0] == "S"]
    assert [o for o, _ in steps] == ["SGD", "Adam"] * 3
    assert [h["lr"] for _, h in steps] == [0.1, 0.002, 0.1, 0.003, 0.1, 0.003]
    assert all(h["betas"] == [0.8, 0.9] for o, h in steps if o == "Adam")
    assert json.loads(json.dumps(steps))   # plain JSON values throughout


def test_the_step_record_follows_parameters_added_and_storages_swapped(tmp_path):
    """The step record keeps what it reads of each parameter between steps; a parameter group
    added (step 1) and a parameter's storage swapped for one of another shape (step 2) show in
    the next step record: its names, shapes and value digests are those of the parameters the
    optimizer holds then (the digests computed from their bits in NumPy)."""
    manual_seed(3)
    lin = nn.Linear(4, 3)
    q = nn.Parameter(np.arange(3, dtype=np.float32), name="q")
    r = nn.Parameter(np.full((2, 2), 0.5, np.float32), name="r")
    opt = optim.SGD(lin.parameters(), lr=0.1)
    s = Session()
    rng = np.random.default_rng(2)
    expected = []
    with audit.record(str(tmp_path / "p.tlaudit"), label="rows-test"):
        for k in range(4):
            if k == 1:
                opt.add_param_group({"params": [q, r]})
            if k == 2:
                q.data = np.linspace(-1, 1, 5, dtype=np.float32)
                opt.state.pop(id(q))        # its momentum buffer has the old shape
            x = s.tensor(rng.normal(size=(2, 4)).astype(np.float32))
            opt.zero_grad()
            sq, sr = s.use(q), s.use(r)
            (lin(x).sum() + (sq * sq).sum() + (sr * sr).sum()).backward()
            opt.step()
            s.step()
            expected.append([(p.numpy().shape, digest_numpy(p.numpy().view(np.uint32).ravel()))
                             for p in opt.params])
    steps = [r for r in Record(str(tmp_path / "p.tlaudit")).records if r[0] == "S"]
    assert [[e[0] for e in r[5]] for r in steps] == [["weight", "bias"]] + \
        [["weight", "bias", "q", "r"]] * 3
    for rec, want in zip(steps, expected):
        assert [(tuple(e[1]), int(e[3], 16)) for e in rec[5]] == want
    assert [tuple(e[1]) for e in steps[2][5]][2] == (5,)
