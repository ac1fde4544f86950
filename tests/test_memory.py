"""What a training step holds: peak bytes bounded by closed forms of the shapes, values freed as
soon as nothing needs them, and the memory-saving paths (recompute, in-place scan gradient,
strided broadcasting) giving the very bits of the paths they replace.

Bounds are sums over what the design keeps (named in each test) plus the parameters, their
gradients and Adam's two moments; the same step with every activation kept to the end of the
backward, as before these paths, would exceed them. memory_stats() counts every buffer (and, on
CUDA, kernel scratch: `_scratch_allowance` adds what the CUDA kernels of these models take).
"""
from __future__ import annotations

import gc
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torchlean as tl
from torchlean import nn, optim
from torchlean._generated import ops
from torchlean.session import Session, manual_seed
from torchlean import tape as tape_module
from torchlean.shapes import broadcast_dims, strided_broadcast

F = nn.functional
F32 = 4   # bytes per element


def _param_bytes(model) -> int:
    return F32 * sum(math.prod(p.shape) for p in model.parameters())


def _peak_of(fn) -> int:
    """Peak live bytes while fn() runs, above the live bytes before it."""
    gc.collect()
    base = tl.memory_stats()["live_bytes"]
    tl.reset_peak_memory_stats()
    fn()
    return tl.memory_stats()["peak_bytes"] - base


# ------------------------------------------------------------------ a GPT-style LM step
class _Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.att = nn.LayerNorm(d), nn.MultiHeadAttention(d, heads)
        self.ln2, self.ff1, self.ff2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, h, mask):
        h = h + self.att(self.ln1(h), mask=mask)
        return h + self.ff2(self.ff1(self.ln2(h)).gelu())


class _LM(nn.Module):
    def __init__(self, vocab, d, heads, layers, T):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(nn.init.normal((T, d), 0.0, 0.02), name="pos")
        self.blocks = nn.Sequential(*[_Block(d, heads) for _ in range(layers)])
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.mask = np.tril(np.ones((T, T), dtype=bool))

    def forward(self, idx, s):
        h = self.emb(idx, session=s) + s.use(self.pos)
        for i in range(len(self.blocks)):
            h = self.blocks[i](h, self.mask)
        return self.head(self.ln_f(h))


def _lm_step(model, opt, s, idx, tgt):
    logits = model(idx, s)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    s.step()


def _scratch_allowance(B, T, d, heads):
    """CUDA kernel scratch these models can hold at once (0 on the stub): the attention
    backward's dO, dQ, dK, dV and row terms, and T x T scores where no tiled kernel applies."""
    if tl.backend() != "cuda":
        return 0
    return F32 * (4 * B * T * d + B * heads * T + 2 * B * heads * T * T) + (1 << 20)


def test_lm_step_peak_is_bounded_by_what_the_design_keeps(monkeypatch):
    """With recomputation on (CUDA's default; the stub keeps these values unless
    TORCHLEAN_KEEP_ACTIVATIONS=0): per block the step keeps q, k, v and the attention output (4 U, U = B T d floats), the
    MLP's pre-GELU activation (4 U) and two layer-norm xhat (2 U) with their small row terms;
    GELU and layer-norm outputs are recomputed, not kept. On top: ln_f's xhat and the
    log-probabilities, the parameters, gradients and Adam moments (4 P), and the largest
    backward working set, the MLP's (recomputed GELU output, its gradient and GELU's input
    gradient: 12 U). Keeping every activation to the end of the backward (PyTorch keeps 16 U
    per block, this library kept 17 U and all gradients) exceeds the bound."""
    monkeypatch.setattr(tape_module, "KEEP_ACTIVATIONS", False)
    V, d, H, n, T, B = 32, 32, 4, 4, 64, 8
    manual_seed(0)
    model = _LM(V, d, H, n, T)
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    s = Session()
    rng = np.random.default_rng(0)
    idx, tgt = rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))
    _lm_step(model, opt, s, idx, tgt)           # Adam's moments exist from here on
    peak = _peak_of(lambda: _lm_step(model, opt, s, idx, tgt))
    U = F32 * B * T * d
    rows = F32 * B * T
    per_block = 10 * U + F32 * B * H * T + 2 * rows
    head = U + rows + F32 * B * T * V
    bound = 4 * _param_bytes(model) + n * per_block + head + 12 * U
    bound += _scratch_allowance(B, T, d, H)
    assert peak <= bound, (peak, bound)
    # and below what PyTorch's autograd keeps for the same step (16 U per block)
    torch_keeps = 4 * _param_bytes(model) + n * 16 * U + 2 * U + F32 * B * T * V
    assert peak < torch_keeps + _scratch_allowance(B, T, d, H), (peak, torch_keeps)


# ------------------------------------------------------------------ a Mamba-style block step
class _Mamba(nn.Module):
    """The bench's Mamba-style block: in-projections, SiLU, softplus step sizes, the state
    recurrence as one selective_scan over E * N lanes, read-out by bmm, gated out-projection."""

    def __init__(self, D, E, N, R, B, L):
        super().__init__()
        self.cfg = (D, E, N, R, B, L)
        self.norm = nn.LayerNorm(D)
        self.in_x, self.in_z = nn.Linear(D, E, bias=False), nn.Linear(D, E, bias=False)
        self.x_dt, self.dt_proj = nn.Linear(E, R, bias=False), nn.Linear(R, E)
        self.x_B, self.x_C = nn.Linear(E, N, bias=False), nn.Linear(E, N, bias=False)
        self.A_log = nn.Parameter(np.log(np.tile(np.arange(1, N + 1, dtype=np.float32), (E, 1))),
                                  name="A_log")
        self.D = nn.Parameter(np.ones(E, np.float32), name="D")
        self.out = nn.Linear(E, D, bias=False)
        object.__setattr__(self, "ones", nn.Parameter(np.ones(E * N, np.float32),
                                                      requires_grad=False))
        object.__setattr__(self, "h0", nn.Parameter(np.zeros((B, E * N), np.float32),
                                                    requires_grad=False))

    def forward(self, x):
        D, E, N, R, B, L = self.cfg
        s = x.session
        h = self.norm(x)
        xi = self.in_x(h)
        u, z = xi * xi.sigmoid(), self.in_z(h)
        dt = self.dt_proj(self.x_dt(u)).softplus()
        Bm, Cm = self.x_B(u), self.x_C(u)
        A = s.use(self.A_log).exp() * -1.0
        dA = (dt.reshape(B, L, E, 1) * A).exp()
        dBu = (dt * u).reshape(B, L, E, 1) * Bm.reshape(B, L, 1, N)
        hs = s.op("selective_scan", dA.reshape(B, L, E * N), self.ones, dBu.reshape(B, L, E * N),
                  self.h0)
        y = s.op("bmm", hs.reshape(B * L, E, N), Cm.reshape(B * L, N, 1))
        y = y.reshape(B, L, E) + u * self.D
        return x + self.out(y * (z * z.sigmoid()))


def test_mamba_step_peak_is_bounded_by_what_the_design_keeps():
    """At most four (B, L, E, N) state-sized buffers live at once: the decay exp(dt A) and the
    input dt B u (or the hidden states while the read-out needs them), the hidden states'
    gradient, overwritten in place by the input's, and one coefficient gradient; the scan keeps
    only the state entering each 16-step chunk, broadcast products never expand their inputs
    and a broadcast input's gradient is summed back at once. The rest is (B, L, E)- and (B, L,
    D)-sized activations and gradients (at most 24 and 8 of them) and 4 P. The step as it was
    (every state kept for the backward, full-size broadcast copies) held nine."""
    D, E, N, R, B, L = 16, 32, 16, 4, 2, 64
    manual_seed(0)
    model = _Mamba(D, E, N, R, B, L)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    s = Session()
    rng = np.random.default_rng(1)
    x, t = rng.normal(size=(B, L, D)), rng.normal(size=(B, L, D))

    def step():
        loss = F.mse_loss(model(s.tensor(x)), s.tensor(t))
        opt.zero_grad()
        loss.backward()
        opt.step()
        s.step()

    step()
    peak = _peak_of(step)
    state = F32 * B * L * E * N
    bound = (4 * state + 24 * F32 * B * L * E + 8 * F32 * B * L * D
             + 4 * _param_bytes(model) + F32 * B * E * N)
    if tl.backend() == "cuda":
        bound += 1 << 20   # reduction partials
    assert peak <= bound, (peak, bound)


# ------------------------------------------------------------------ freeing while differentiating
def test_backward_frees_activations_while_gradients_accumulate():
    """A chain of tanh(x W_k) layers whose activations are as large as their weights: the
    backward frees each layer's saved output right after its VJP, so activations and weight
    gradients never all live together (they did when the graph was freed only at the end)."""
    n, w = 8, 64
    rng = np.random.default_rng(2)
    s = Session()
    Ws = [nn.Parameter(rng.normal(size=(w, w)) / np.sqrt(w)) for _ in range(n)]
    x0 = rng.normal(size=(w, w))
    act = F32 * w * w

    def step():
        h = s.tensor(x0)
        for W in Ws:
            h = (h @ s.use(W)).tanh()
        h.sum().backward()
        for W in Ws:
            W.zero_grad()
        s.step()

    step()                       # the parameters' device mirrors exist from here on
    peak = _peak_of(step)
    # the input, n activations (tanh keeps its output), n weight gradients arriving while
    # activations go, plus one layer's working set (cotangent, tanh and matmul gradients)
    allowance = (64 << 10) if tl.backend() == "cuda" else 0   # reduction partials
    assert peak <= act * (1 + n + 1 + 4) + allowance, (peak, act)
    assert peak < act * (1 + 2 * n), peak   # what keeping all of them would take


def test_a_dead_view_lets_its_base_go_and_a_reshape_keeps_only_a_shape():
    s = Session()
    w = s.tensor(np.ones((64, 64)), requires_grad=True)
    x = s.tensor(np.ones((8, 64)))
    gc.collect()
    before = tl.memory_stats()["live_bytes"]
    y = (x @ w).reshape(8, 8, 8).relu()    # the matmul's result only feeds a view
    gc.collect()
    assert tl.memory_stats()["live_bytes"] - before == 8 * 64 * F32   # relu's output alone
    node = next(n for n in s.tape.nodes if n.name == "reshape")
    assert node.saved["x"] == (8, 64)      # the shape, not the buffer
    y.sum().backward()
    np.testing.assert_allclose(w.grad, np.full((64, 64), 8.0))
    s.step()


# ------------------------------------------------------------------ the same bits
def _gelu_ln_model(keep):
    """Layer norm -> linear -> GELU, softplus -> linear on a 3-D input (views on both sides of
    each linear), and GELU of the layer norm's output; `keep` collects every intermediate
    Tensor, so nothing is freed or recomputed."""
    def f(s, p, x):
        h = s.op("layer_norm", x, p["g"], p["b"], eps=1e-5)
        a = F.linear(h, p["w1"], p["b1"])
        g = a.gelu()
        e = a.softplus()
        y = F.linear(g * e, p["w2"])
        c = h.gelu()                      # recomputed from a recomputed value
        keep.extend([h, a, g, e, y, c])
        return (y * y).sum() + (c * c).sum()
    return f


def test_recomputed_values_give_the_gradients_of_kept_ones_bit_for_bit(monkeypatch):
    monkeypatch.setattr(tape_module, "KEEP_ACTIVATIONS", False)   # recompute (CUDA's default)
    rng = np.random.default_rng(3)
    params = {"g": rng.normal(size=7), "b": rng.normal(size=7), "w1": rng.normal(size=(9, 7)),
              "b1": rng.normal(size=9), "w2": rng.normal(size=(5, 9))}
    x = rng.normal(size=(3, 4, 7))
    grads = []
    for keep_all in (False, True):
        s = Session()
        p = {k: nn.Parameter(v) for k, v in params.items()}
        keep = []
        loss = _gelu_ln_model(keep)(s, p, s.tensor(x))
        if not keep_all:
            keep.clear()
            gc.collect()
            stale = {n.name for n in s.tape.nodes if n.stale}
            assert {"layer_norm", "gelu", "softplus"} <= stale, stale
        loss.backward()
        grads.append({k: v.grad.numpy() for k, v in p.items()})
        s.step()
    for k in params:
        np.testing.assert_array_equal(grads[0][k], grads[1][k], err_msg=k)


def test_keep_activations_keeps_the_values_and_gives_the_same_gradients(monkeypatch):
    rng = np.random.default_rng(5)
    params = {"g": rng.normal(size=7), "b": rng.normal(size=7), "w1": rng.normal(size=(9, 7)),
              "b1": rng.normal(size=9), "w2": rng.normal(size=(5, 9))}
    x = rng.normal(size=(2, 3, 7))
    grads = []
    for keep_values in (False, True):
        monkeypatch.setattr(tape_module, "KEEP_ACTIVATIONS", keep_values)
        s = Session()
        p = {k: nn.Parameter(v) for k, v in params.items()}
        keep = []
        loss = _gelu_ln_model(keep)(s, p, s.tensor(x))
        keep.clear()
        gc.collect()
        assert any(n.stale for n in s.tape.nodes) is not keep_values
        loss.backward()
        grads.append({k: v.grad.numpy() for k, v in p.items()})
        s.step()
    for k in params:
        np.testing.assert_array_equal(grads[0][k], grads[1][k], err_msg=k)


def test_keeping_or_recomputing_trains_a_gpt_to_the_same_bits(monkeypatch):
    """A whole program: three AdamW steps of a GPT-style LM (attention under a lower-triangular
    mask, layer norms, GELU, gradient clipping) keeping the recomputable values (the stub's
    default) and recomputing them (CUDA's) end with the same parameters, bit for bit."""
    V, d, H, n, T, B = 17, 16, 2, 2, 9, 3
    rng = np.random.default_rng(21)
    idx, tgt = rng.integers(0, V, (4, B, T)), rng.integers(0, V, (4, B, T))
    finals = []
    for keep in (True, False):
        monkeypatch.setattr(tape_module, "KEEP_ACTIVATIONS", keep)
        manual_seed(3)
        model = _LM(V, d, H, n, T)
        opt = optim.AdamW(model.parameters(), lr=1e-2)
        s = Session()
        for i in range(3):
            logits = model(idx[i], s)
            loss = F.cross_entropy(logits.reshape(-1, V), tgt[i].reshape(-1))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            s.step()
        finals.append({k: np.asarray(v).copy() for k, v in model.state_dict().items()})
    assert finals[0].keys() == finals[1].keys()
    for k in finals[0]:
        np.testing.assert_array_equal(finals[0][k].view(np.uint32), finals[1][k].view(np.uint32),
                                      err_msg=k)
    manual_seed(3)
    fresh = _LM(V, d, H, n, T).state_dict()
    assert any(not np.array_equal(v, np.asarray(fresh[k])) for k, v in finals[0].items())   # trained


def _import_with(value):
    """torchlean.tape's KEEP_ACTIVATIONS in a fresh process with the variable set to value (None:
    unset)."""
    env = dict(os.environ, TORCHLEAN_KEEP_ACTIVATIONS=value or "")
    if value is None:
        del env["TORCHLEAN_KEEP_ACTIVATIONS"]
    root = Path(__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(root)] + [v for v in [env.get("PYTHONPATH")] if v])
    return subprocess.run([sys.executable, "-c", "import torchlean.tape as t; "
                           "print(t.KEEP_ACTIVATIONS)"], cwd=str(root), env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value,keep", [("1", "True"), ("0", "False"), ("", "False"),
                                        (None, "backend")])
def test_keep_activations_variable_is_read_at_import(value, keep):
    """Set, it decides; unset, the stub keeps the values and CUDA recomputes them."""
    if keep == "backend":
        keep = str(tl.backend() == "stub")
    r = _import_with(value)
    assert r.returncode == 0 and r.stdout.strip() == keep, r.stderr


@pytest.mark.parametrize("bad", ["yes", "2", " 1"])
def test_junk_keep_activations_is_an_error(bad):
    r = _import_with(bad)
    assert r.returncode != 0
    assert "TORCHLEAN_KEEP_ACTIVATIONS must be unset, empty, 0 or 1" in r.stderr
    assert repr(bad) in r.stderr


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 5, 33), (16, 256), (4, 1100)])
def test_layer_norm_output_is_affine_rows_of_its_xhat_bit_for_bit(shape):
    """layer_norm's recompute: every forward kernel (row-resident, strided, exact) rounds the
    product then the sum, as affine_rows and float32 NumPy do."""
    rng = np.random.default_rng(shape[-1])
    x = (rng.normal(size=shape) * 3 + 1).astype(np.float32)
    g, b = rng.normal(size=shape[-1]).astype(np.float32), rng.normal(size=shape[-1]).astype(np.float32)
    X, G, B = (tl.AnyBuffer.from_numpy(v) for v in (x, g, b))
    for exact in (False, True):
        was = tl.is_exact()
        tl.set_exact(exact)
        try:
            y, xhat, inv_std = ops.layer_norm(X, G, B, eps=1e-5)
            again = ops.affine_rows(xhat, G, B)
        finally:
            tl.set_exact(was)
        xh = xhat.to_numpy()
        assert again.to_numpy().tobytes() == y.to_numpy().tobytes()
        np.testing.assert_array_equal(y.to_numpy(), (xh * g) + b)   # float32: two roundings
        for buf in (y, xhat, inv_std, again):
            buf.release()
    for buf in (X, G, B):
        buf.release()


def test_a_recomputed_value_shared_with_another_graph():
    """y = GELU(x) feeds two losses. The first backward frees GELU's node: y, freed since
    only VJPs read it, is recomputed first for the other loss's VJP, which then runs with
    retain_graph on the first; without it the second backward meets the freed graph."""
    rng = np.random.default_rng(4)
    xv, w1, w2 = rng.normal(size=(5, 6)), rng.normal(size=(5, 6)), rng.normal(size=(5, 6))
    ref = None
    for retain in (True, False):
        s = Session()
        x = s.tensor(xv, requires_grad=True)
        y = x.gelu()
        l1, l2 = (y * s.tensor(w1)).sum(), (y * s.tensor(w2)).sum()
        del y
        gc.collect()
        l1.backward(retain_graph=retain)
        if retain:
            l2.backward()
            ref = x.grad.numpy()
        else:
            with pytest.raises(RuntimeError, match="retain_graph=True"):
                l2.backward()
        s.step()
    # d/dx sum(GELU(x) (w1 + w2)) from the two VJPs, against float64
    c = np.sqrt(2 / np.pi)
    inner = c * (xv + 0.044715 * xv ** 3)
    dgelu = 0.5 * (1 + np.tanh(inner)) + 0.5 * xv * (1 - np.tanh(inner) ** 2) * c * (
        1 + 3 * 0.044715 * xv ** 2)
    np.testing.assert_allclose(ref, dgelu * (w1 + w2), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("steps", [1, 16, 17, 45])
def test_scan_gradients_in_place_equal_the_kept_cotangent_path(steps):
    """The Session backward lets selective_scan overwrite its cotangent with dx; the dense
    Tape backward, which returns every node's gradient, gives it a copy: same bits, and the
    scan output's own gradient is the seed, untouched."""
    rng = np.random.default_rng(steps)
    B, D = 2, 5
    a = rng.uniform(-0.9, 0.9, (B, steps, D)).astype(np.float32)
    b, x = rng.normal(size=(D,)).astype(np.float32), rng.normal(size=(B, steps, D))
    h0, seed = rng.normal(size=(B, D)), rng.normal(size=(B, steps, D)).astype(np.float32)
    t = tl.Tape()
    ids = [t.leaf(v) for v in (a, b, x, h0)]
    out = t.selective_scan(*ids)
    dense = t.backward(out, seed=seed)
    np.testing.assert_array_equal(dense[out].to_numpy(), seed)
    want = [dense[i].to_numpy() for i in ids]
    t.release()
    s = Session()
    vs = [s.tensor(v, requires_grad=True) for v in (a, b, x, h0)]
    y = s.op("selective_scan", *vs)
    (y * s.tensor(seed)).sum().backward()
    for v, g in zip(vs, want):
        np.testing.assert_array_equal(v.grad, g)
    s.step()


def test_add_hands_its_gradient_to_one_parent_and_copies_it_for_the_other():
    t = tl.Tape()
    a, b = t.leaf(np.ones(4)), t.leaf(np.ones(4))
    y = t.scale(t.add(a, b), c=3.0)
    g = t.backward(y, seed=np.arange(4.0), wrt=[a, b])
    assert g[a].buf is not g[b].buf
    g[a].release()
    np.testing.assert_array_equal(g[b].to_numpy(), 3.0 * np.arange(4.0))
    t.release()


# ------------------------------------------------------------------ strided broadcasting
BINARY = [("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("div", np.divide),
          ("maximum", np.maximum), ("minimum", np.minimum)]
SHAPES = [((3, 1, 5), (4, 1)), ((2, 3, 4, 1), (2, 3, 1, 5)), ((5,), (2, 3, 5)), ((1,), (7,)),
          ((2, 1, 3), (1, 4, 1)), ((7, 1), (1,)), ((0, 3), (1, 3)), ((1, 1), (1, 1, 1)),
          ((2, 1) * 5, (1, 3) * 5)]   # 10 axes that stay 10 after coalescing: the copy path


def _with_specials(a):
    a = a.copy()
    flat = a.reshape(-1)
    for k, v in zip(range(0, flat.size, 5), (np.nan, np.inf, -np.inf, 0.0, -0.0)):
        flat[k] = v
    return a


@pytest.mark.parametrize("sa,sb", SHAPES)
def test_broadcast_ops_match_numpy_and_the_expanded_path_bit_for_bit(sa, sb):
    rng = np.random.default_rng(len(sa) * 7 + len(sb))
    a = _with_specials(rng.normal(size=sa).astype(np.float32))
    b = _with_specials(rng.normal(size=sb).astype(np.float32))
    A, Bb = tl.AnyBuffer.from_numpy(a), tl.AnyBuffer.from_numpy(b)
    shape = np.broadcast_shapes(sa, sb)
    EA, EB = ops.broadcast_to(A, shape=shape), ops.broadcast_to(Bb, shape=shape)
    with np.errstate(all="ignore"):
        for name, f in BINARY:
            got = getattr(ops, name)(A, Bb)
            expanded = getattr(ops, name)(EA, EB)     # equal shapes: the plain kernel
            g, e = got.to_numpy(), expanded.to_numpy()
            assert g.shape == shape
            assert g.tobytes() == e.tobytes(), name
            np.testing.assert_array_equal(g, f(a, b).astype(np.float32), err_msg=name)
            got.release()
            expanded.release()
    for buf in (A, Bb, EA, EB):
        buf.release()


def test_broadcast_plans_coalesce_axes():
    assert broadcast_dims((8, 64, 32, 1), (8, 64, 1, 16), 2) == (512, 32, 16)
    assert broadcast_dims((8, 64, 32, 1), (8, 64, 1, 16), 0) == (512, 32, 1)
    assert broadcast_dims((8, 64, 32, 1), (8, 64, 1, 16), 1) == (512, 1, 16)
    assert broadcast_dims((4, 1, 3), (3,), 2) == (4, 3)       # size-1 output axes drop
    assert broadcast_dims((5,), (1,), 1) == (1,)
    assert strided_broadcast((2, 1) * 4, (1, 3) * 4)          # 8 axes: the kernel's limit
    assert not strided_broadcast((2, 1) * 5, (1, 3) * 5)      # 10: expanded copies instead
    assert not strided_broadcast((2,), (3,))                  # not broadcastable at all


def test_a_broadcast_product_allocates_only_its_output():
    a = tl.AnyBuffer.from_numpy(np.ones((64, 32, 1), np.float32))
    b = tl.AnyBuffer.from_numpy(np.ones((64, 1, 16), np.float32))
    peak = _peak_of(lambda: ops.mul(a, b).release())
    assert peak == F32 * 64 * 32 * 16
    a.release()
    b.release()


def test_affine_rows_against_float64_with_nan_and_inf():
    """affine_rows on its own: y = x * gamma + beta per row against float64 NumPy (odd sizes, a
    single row, leading axes folded), rounding the product before the sum as documented, and
    NaN/inf propagating where IEEE arithmetic says."""
    rng = np.random.default_rng(7)
    for shape in [(1, 1), (5, 3), (2, 3, 17)]:
        x = rng.uniform(-4, 4, shape).astype(np.float32)
        g = rng.uniform(-2, 2, shape[-1]).astype(np.float32)
        b = rng.uniform(-2, 2, shape[-1]).astype(np.float32)
        y = ops.affine_rows(*(tl.AnyBuffer.from_numpy(v) for v in (x, g, b))).to_numpy()
        want = x.astype(np.float64) * g + b
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
        assert y.tobytes() == ((x * g).astype(np.float32) + b).astype(np.float32).tobytes()
    x = np.array([[np.nan, np.inf, 1.0, 2.0]], np.float32)
    g = np.array([1.0, 0.0, np.inf, 1.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, -np.inf], np.float32)
    y = ops.affine_rows(*(tl.AnyBuffer.from_numpy(v) for v in (x, g, b))).to_numpy()
    assert np.isnan(y[0, 0]) and np.isnan(y[0, 1])  # NaN in, and inf * 0
    assert y[0, 2] == np.inf and y[0, 3] == -np.inf


def test_release_after_the_finalizer_touches_no_destroyed_handle():
    """A garbage-collected cycle may run a Buffer's finalizer (which destroys its native handle)
    before another object's finalizer releases the same Buffer (a Tensor letting go of its
    value): that release must see a dead Buffer and leave the destroyed handle alone (the
    sanitized suite aborts on the use after free it once was)."""
    import gc
    from torchlean.buffer import AnyBuffer, Buffer

    b = Buffer.from_numpy(np.ones(5, np.float32))
    b.__del__()                       # what the collector does first in such a cycle
    assert not b.live and b.handle is None
    assert b.release() == 0
    a = AnyBuffer.from_numpy(np.ones(3, np.float32))
    a.buf.__del__()
    assert a.release() == 0
    del a, b
    gc.collect()                      # the real finalizers afterwards are harmless too
