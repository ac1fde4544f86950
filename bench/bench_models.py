"""Realistic models trained side by side: torchlean vs PyTorch eager on one device, one run.

    python bench/bench_models.py [--models mlp,cnn,vgg,resnet,lm,fno,mamba] [--steps N] [--repeats R]
                                 [--quick] [--out bench/results/models.md]

The models of issue 14 at their sizes (MLP, MNIST-size CNN, VGG-style CIFAR CNN, a 4-layer
transformer LM, an FNO), a ResNet-style CIFAR model with BatchNorm, plus a Mamba-style selective-scan block. For each, both frameworks
build the same architecture from the same initial weights (torchlean's are copied into the
torch twin by state_dict name), train with the same optimizer on the same random batches,
uploaded from host NumPy every step, TF32 off on both sides.

Reported per model: median step time after warm-up (runs of several steps closed by a device
synchronisation), peak memory above each allocator's baseline (torch.cuda.max_memory_allocated
vs torchlean.memory_stats()["peak_bytes"], reset after warm-up, minus what each held before the
model was built), torchlean's deterministic/default and (where torchlean.is_exact exists)
exact/default step-time ratios, the first-step |loss difference| as a check that both sides
compute the same function, and the issue's targets marked met or missed. Without torch the
torch columns read n/a. --quick shrinks every model to toy sizes (a CPU smoke run).

Pieces the Python layer lacks are composed from registry ops here: SiLU (x * sigmoid(x)) and
the Mamba block's discretisation and read-out (exp, broadcast mul, bmm) around selective_scan.
"""
from __future__ import annotations

import argparse
import datetime
import gc
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from sidebyside import TorchSide, emit, measure, torchlean_hooks, ratio, mib  # noqa: E402

N_BATCHES = 4                 # distinct random batches cycled through
SPEED_TARGET, SPEED_MOONSHOT, MEMORY_TARGET, DET_TARGET = 0.8, 0.6, 1.0, 1.1

# sizes: the issue's (full) and toy ones for a CPU smoke run (quick)
SIZES = {
    "mlp": dict(full=dict(din=784, hidden=512, classes=10, batch=128),
                quick=dict(din=20, hidden=16, classes=10, batch=4)),
    "cnn": dict(full=dict(side=28, c1=32, c2=64, fc=128, classes=10, batch=64),
                quick=dict(side=10, c1=3, c2=4, fc=8, classes=10, batch=2)),
    "vgg": dict(full=dict(side=32, c1=64, c2=128, classes=10, batch=128),
                quick=dict(side=8, c1=3, c2=4, classes=10, batch=2)),
    "resnet": dict(full=dict(side=32, widths=(32, 64, 128), blocks=2, classes=10, batch=128),
                   quick=dict(side=8, widths=(3, 4, 5), blocks=1, classes=10, batch=2)),
    "lm": dict(full=dict(vocab=256, d=256, heads=8, layers=4, T=128, batch=32),
               quick=dict(vocab=16, d=16, heads=2, layers=2, T=8, batch=2)),
    "fno": dict(full=dict(width=64, modes=16, grid=1024, layers=4, proj=128, batch=20),
                quick=dict(width=4, modes=3, grid=16, layers=2, proj=8, batch=2)),
    "mamba": dict(full=dict(d=256, state=16, expand=2, dt_rank=16, L=512, batch=8),
                  quick=dict(d=8, state=4, expand=2, dt_rank=2, L=12, batch=2)),
}
MODELS = list(SIZES)


class Workload:
    """One model: its sizes, optimizer, loss, random batches, torchlean builder and torch twin
    builder (whose parameter names match the torchlean model's state_dict)."""

    def __init__(self, name, cfg, desc, opt, loss, batches, build_tl, build_torch,
                 int_input=False):
        self.name, self.cfg, self.desc, self.opt, self.loss = name, cfg, desc, opt, loss
        self.batch = cfg["batch"]
        self.batches, self.build_tl, self.build_torch = batches, build_tl, build_torch
        self.int_input = int_input       # the torchlean model takes (indices, session)


# ------------------------------------------------------------------------------ the six models
def _silu(x):
    return x * x.sigmoid()


def mlp(c, rng):
    def build_tl():
        from torchlean import nn
        return nn.Sequential(nn.Linear(c["din"], c["hidden"]), nn.ReLU(),
                             nn.Linear(c["hidden"], c["hidden"]), nn.ReLU(),
                             nn.Linear(c["hidden"], c["classes"]))

    def build_torch(torch):
        tnn = torch.nn
        return tnn.Sequential(tnn.Linear(c["din"], c["hidden"]), tnn.ReLU(),
                              tnn.Linear(c["hidden"], c["hidden"]), tnn.ReLU(),
                              tnn.Linear(c["hidden"], c["classes"]))

    batches = [(rng.standard_normal((c["batch"], c["din"]), dtype=np.float32),
                rng.integers(0, c["classes"], c["batch"])) for _ in range(N_BATCHES)]
    return Workload("mlp", c, f"MLP {c['din']}-{c['hidden']}-{c['hidden']}-{c['classes']}, "
                    "SGD(momentum 0.9), cross-entropy", ("sgd", dict(lr=0.01, momentum=0.9)),
                    "ce", batches, build_tl, build_torch)


def _conv_stack(nn, layers):
    """Sequential from a plan: ('conv', cin, cout, pad), ('pool',), ('fc', fin, fout), ('relu',),
    ('flat',); torchlean's nn and torch.nn share these constructor signatures."""
    mods = []
    for kind, *a in layers:
        if kind == "conv":
            mods.append(nn.Conv2d(a[0], a[1], 3, padding=a[2]))
        elif kind == "pool":
            mods.append(nn.MaxPool2d(2))
        elif kind == "fc":
            mods.append(nn.Linear(a[0], a[1]))
        elif kind == "relu":
            mods.append(nn.ReLU())
        else:
            mods.append(nn.Flatten())
    return nn.Sequential(*mods)


def _image_workload(name, c, rng, channels, plan, desc):
    def build_tl():
        from torchlean import nn
        return _conv_stack(nn, plan)

    batches = [(rng.standard_normal((c["batch"], channels, c["side"], c["side"]),
                                    dtype=np.float32),
                rng.integers(0, c["classes"], c["batch"])) for _ in range(N_BATCHES)]
    return Workload(name, c, desc, ("adam", dict(lr=1e-3)), "ce", batches, build_tl,
                    lambda torch: _conv_stack(torch.nn, plan))


def cnn(c, rng):
    """PyTorch's MNIST example: two unpadded 3x3 convs, one 2x2 pool, two fully connected."""
    flat = c["c2"] * ((c["side"] - 4) // 2) ** 2
    plan = [("conv", 1, c["c1"], 0), ("relu",), ("conv", c["c1"], c["c2"], 0), ("relu",),
            ("pool",), ("flat",), ("fc", flat, c["fc"]), ("relu",), ("fc", c["fc"], c["classes"])]
    return _image_workload("cnn", c, rng, 1, plan,
                           f"MNIST-size CNN 1x{c['side']}x{c['side']}: conv{c['c1']}-conv{c['c2']}"
                           f"-pool-fc{c['fc']}-fc{c['classes']}, Adam, cross-entropy")


def vgg(c, rng):
    """VGG-style CIFAR CNN: two padded 3x3 convs per stage, 2x2 pool, one linear head."""
    flat = c["c2"] * (c["side"] // 4) ** 2
    plan = [("conv", 3, c["c1"], 1), ("relu",), ("conv", c["c1"], c["c1"], 1), ("relu",),
            ("pool",), ("conv", c["c1"], c["c2"], 1), ("relu",), ("conv", c["c2"], c["c2"], 1),
            ("relu",), ("pool",), ("flat",), ("fc", flat, c["classes"])]
    return _image_workload("vgg", c, rng, 3, plan,
                           f"VGG-style CNN 3x{c['side']}x{c['side']}: conv {c['c1']}-{c['c1']}-pool-"
                           f"{c['c2']}-{c['c2']}-pool-fc{c['classes']}, Adam, cross-entropy")


def _resnet(nn, F, c):
    """CIFAR ResNet of BasicBlocks (3x3 conv-BN-ReLU-3x3 conv-BN + shortcut, 1x1 conv-BN where
    the shape changes), one stage per width, global average pool, linear head. torchlean's nn
    and torch.nn share these constructors, so one definition builds both twins."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                           nn.BatchNorm2d(cout))

        def forward(self, x):
            h = F.relu(self.bn1(self.conv1(x)))
            h = self.bn2(self.conv2(h))
            return F.relu(h + (x if self.short is None else self.short(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            w = c["widths"]
            self.stem = nn.Sequential(nn.Conv2d(3, w[0], 3, padding=1, bias=False),
                                      nn.BatchNorm2d(w[0]), nn.ReLU())
            blocks, cin = [], w[0]
            for i, cout in enumerate(w):
                for j in range(c["blocks"]):
                    blocks.append(Block(cin, cout, 2 if (i > 0 and j == 0) else 1))
                    cin = cout
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, c["classes"])

        def forward(self, x):
            return self.fc(self.pool(self.blocks(self.stem(x))).flatten(1))

    return ResNet()


def resnet(c, rng):
    """ResNet-style CIFAR model (issue 21's fifth): BasicBlocks with BatchNorm, widths
    32/64/128, two blocks per stage, SGD with Nesterov momentum and weight decay."""
    def build_tl():
        from torchlean import nn
        return _resnet(nn, nn.functional, c)

    batches = [(rng.standard_normal((c["batch"], 3, c["side"], c["side"]), dtype=np.float32),
                rng.integers(0, c["classes"], c["batch"])) for _ in range(N_BATCHES)]
    w = "/".join(str(v) for v in c["widths"])
    return Workload("resnet", c, f"ResNet-style CIFAR 3x{c['side']}x{c['side']}: BasicBlocks with "
                    f"BatchNorm, widths {w}, {c['blocks']} blocks per stage, SGD Nesterov, "
                    "cross-entropy", ("sgd", dict(lr=0.05, momentum=0.9, nesterov=True,
                                                  weight_decay=5e-4)),
                    "ce", batches, build_tl,
                    lambda torch: _resnet(torch.nn, torch.nn.functional, c))


def lm(c, rng):
    """Pre-norm GPT-style LM: token embedding + learned positions, `layers` blocks of
    [LayerNorm -> causal multi-head attention + residual, LayerNorm -> MLP 4d (GELU, tanh form)
    + residual], final LayerNorm, linear head; next-token cross-entropy."""
    V, d, H, n, T = c["vocab"], c["d"], c["heads"], c["layers"], c["T"]

    def build_tl():
        from torchlean import nn
        from torchlean.nn import fused        # gelu(ff1(x)), ff2(.) + h as ops (unfused when disabled)

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.att = nn.LayerNorm(d), nn.MultiHeadAttention(d, H)
                self.ln2, self.ff1, self.ff2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), \
                    nn.Linear(4 * d, d)

            def forward(self, h):
                h = h + self.att(self.ln1(h), is_causal=True)
                return fused.linear_residual(self.ff2, fused.linear_gelu(self.ff1, self.ln2(h)), h)

        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(V, d)
                self.pos = nn.Parameter(nn.init.normal((T, d), 0.0, 0.02), name="pos")
                self.blocks = nn.Sequential(*[Block() for _ in range(n)])
                self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, V)

            def forward(self, idx, session):
                h = self.emb(idx, session=session) + session.use(self.pos)
                for i in range(len(self.blocks)):
                    h = self.blocks[i](h)
                return self.head(self.ln_f(h))

        return LM()

    def build_torch(torch):
        from torch_twins import MultiHeadAttention
        tnn, F = torch.nn, torch.nn.functional

        class Block(tnn.Module):
            def __init__(self):
                super().__init__()
                self.ln1, self.att = tnn.LayerNorm(d), MultiHeadAttention(d, H)
                self.ln2, self.ff1, self.ff2 = tnn.LayerNorm(d), tnn.Linear(d, 4 * d), \
                    tnn.Linear(4 * d, d)

            def forward(self, h):
                h = h + self.att(self.ln1(h), causal=True)
                return h + self.ff2(F.gelu(self.ff1(self.ln2(h)), approximate="tanh"))

        class LM(tnn.Module):
            def __init__(self):
                super().__init__()
                self.emb = tnn.Embedding(V, d)
                self.pos = tnn.Parameter(torch.empty(T, d))
                self.blocks = tnn.Sequential(*[Block() for _ in range(n)])
                self.ln_f, self.head = tnn.LayerNorm(d), tnn.Linear(d, V)

            def forward(self, idx):
                return self.head(self.ln_f(self.blocks(self.emb(idx) + self.pos)))

        return LM()

    stream = rng.integers(0, V, 64 * T + 1)
    batches = []
    for _ in range(N_BATCHES):
        s = rng.integers(0, len(stream) - T - 1, c["batch"])
        batches.append((np.stack([stream[i:i + T] for i in s]),
                        np.stack([stream[i + 1:i + T + 1] for i in s])))
    return Workload("lm", c, f"transformer LM {n} layers d={d} heads={H} T={T} vocab={V}, causal, "
                    "AdamW, cross-entropy", ("adamw", dict(lr=3e-4, weight_decay=0.01)),
                    "ce_seq", batches, build_tl, build_torch, int_input=True)


def fno(c, rng):
    """FNO1d (Li et al.): lift (a(x), x) -> width, `layers` x [spectral conv + pointwise linear,
    GELU except after the last], projection width -> proj -> GELU -> 1; MSE."""
    w, m, L, P = c["width"], c["modes"], c["layers"], c["proj"]

    def build_tl():
        from torchlean import nn

        class FNO1d(nn.Module):
            def __init__(self):
                super().__init__()
                self.lift = nn.Linear(2, w)
                self.spec = nn.Sequential(*[nn.SpectralConv1d(w, m) for _ in range(L)])
                self.skip = nn.Sequential(*[nn.Linear(w, w) for _ in range(L)])
                self.proj1, self.proj2 = nn.Linear(w, P), nn.Linear(P, 1)

            def forward(self, x):
                h = self.lift(x)
                for i in range(L):
                    h = self.spec[i](h) + self.skip[i](h)
                    if i < L - 1:
                        h = h.gelu()
                return self.proj2(self.proj1(h).gelu())

        return FNO1d()

    def build_torch(torch):
        from torch_twins import SpectralConv1d
        tnn, F = torch.nn, torch.nn.functional

        class FNO1d(tnn.Module):
            def __init__(self):
                super().__init__()
                self.lift = tnn.Linear(2, w)
                self.spec = tnn.Sequential(*[SpectralConv1d(w, m) for _ in range(L)])
                self.skip = tnn.Sequential(*[tnn.Linear(w, w) for _ in range(L)])
                self.proj1, self.proj2 = tnn.Linear(w, P), tnn.Linear(P, 1)

            def forward(self, x):
                h = self.lift(x)
                for i in range(L):
                    h = self.spec[i](h) + self.skip[i](h)
                    if i < L - 1:
                        h = F.gelu(h, approximate="tanh")
                return self.proj2(F.gelu(self.proj1(h), approximate="tanh"))

        return FNO1d()

    B, g = c["batch"], c["grid"]
    coord = np.broadcast_to(np.linspace(0, 1, g, endpoint=False, dtype=np.float32)[None, :, None],
                            (B, g, 1))
    batches = [(np.concatenate([rng.standard_normal((B, g, 1), dtype=np.float32), coord], -1),
                rng.standard_normal((B, g, 1), dtype=np.float32)) for _ in range(N_BATCHES)]
    return Workload("fno", c, f"FNO1d width {w}, {m} modes, {L} layers, grid {g}, Adam, MSE",
                    ("adam", dict(lr=1e-3)), "mse", batches, build_tl, build_torch)


def mamba(c, rng):
    """A Mamba-style block, pre-norm with a residual: x and z = in-projections of LayerNorm(h),
    u = SiLU(x); dt = softplus(dt_proj(x_dt(u))), B = x_B(u), C = x_C(u) (the x_proj split in
    three); state (d_inner, d_state) per token: h_t = exp(dt A) h_{t-1} + dt B u, y = C h_t + D u,
    gated by SiLU(z), out-projection. Mamba's causal depthwise conv is left out. torchlean runs
    the recurrence as one selective_scan over d_inner * d_state lanes; PyTorch loops over the
    tokens (Mamba's reference scan). MSE against a random target."""
    D, N, E, R, L = c["d"], c["state"], c["expand"] * c["d"], c["dt_rank"], c["L"]
    Bsz = c["batch"]
    a_log = np.log(np.tile(np.arange(1, N + 1, dtype=np.float32), (E, 1)))

    def build_tl():
        from torchlean import nn

        class MambaBlock(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(D)
                self.in_x, self.in_z = nn.Linear(D, E, bias=False), nn.Linear(D, E, bias=False)
                self.x_dt, self.dt_proj = nn.Linear(E, R, bias=False), nn.Linear(R, E)
                self.x_B, self.x_C = nn.Linear(E, N, bias=False), nn.Linear(E, N, bias=False)
                self.A_log = nn.Parameter(a_log, name="A_log")
                self.D = nn.Parameter(np.ones(E, np.float32), name="D")
                self.out = nn.Linear(E, D, bias=False)
                # scan constants (not trained, not saved): b = 1 so h_t = a_t h + dt B u, h0 = 0
                object.__setattr__(self, "ones", nn.Parameter(np.ones(E * N, np.float32),
                                                              requires_grad=False))
                object.__setattr__(self, "h0", nn.Parameter(np.zeros((Bsz, E * N), np.float32),
                                                            requires_grad=False))

            def forward(self, x):
                s = x.session
                h = self.norm(x)
                u, z = _silu(self.in_x(h)), self.in_z(h)
                dt = self.dt_proj(self.x_dt(u)).softplus()                      # (B, L, E)
                Bm, Cm = self.x_B(u), self.x_C(u)                               # (B, L, N)
                A = s.use(self.A_log).exp() * -1.0                              # (E, N)
                dA = (dt.reshape(Bsz, L, E, 1) * A).exp()
                dBu = (dt * u).reshape(Bsz, L, E, 1) * Bm.reshape(Bsz, L, 1, N)
                hs = s.op("selective_scan", dA.reshape(Bsz, L, E * N), self.ones,
                          dBu.reshape(Bsz, L, E * N), self.h0)
                y = s.op("bmm", hs.reshape(Bsz * L, E, N), Cm.reshape(Bsz * L, N, 1))
                y = y.reshape(Bsz, L, E) + u * self.D
                return x + self.out(y * _silu(z))

        return MambaBlock()

    def build_torch(torch):
        from torch_twins import selective_scan
        tnn, F = torch.nn, torch.nn.functional

        class MambaBlock(tnn.Module):
            def __init__(self):
                super().__init__()
                self.norm = tnn.LayerNorm(D)
                self.in_x, self.in_z = tnn.Linear(D, E, bias=False), tnn.Linear(D, E, bias=False)
                self.x_dt, self.dt_proj = tnn.Linear(E, R, bias=False), tnn.Linear(R, E)
                self.x_B, self.x_C = tnn.Linear(E, N, bias=False), tnn.Linear(E, N, bias=False)
                self.A_log = tnn.Parameter(torch.empty(E, N))
                self.D = tnn.Parameter(torch.empty(E))
                self.out = tnn.Linear(E, D, bias=False)

            def forward(self, x):
                h = self.norm(x)
                u, z = F.silu(self.in_x(h)), self.in_z(h)
                dt = F.softplus(self.dt_proj(self.x_dt(u)))
                dA = torch.exp(dt.unsqueeze(-1) * -torch.exp(self.A_log))
                dBu = (dt * u).unsqueeze(-1) * self.x_B(u).unsqueeze(2)
                y = selective_scan(dA, dBu, self.x_C(u)) + u * self.D
                return x + self.out(y * F.silu(z))

        return MambaBlock()

    batches = [(rng.standard_normal((Bsz, L, D), dtype=np.float32),
                rng.standard_normal((Bsz, L, D), dtype=np.float32)) for _ in range(N_BATCHES)]
    return Workload("mamba", c, f"Mamba-style block d_model={D} d_inner={E} d_state={N} "
                    f"dt_rank={R} L={L}, selective_scan vs a sequential torch scan, Adam, MSE",
                    ("adam", dict(lr=1e-3)), "mse", batches, build_tl, build_torch)


BUILDERS = dict(mlp=mlp, cnn=cnn, vgg=vgg, resnet=resnet, lm=lm, fno=fno, mamba=mamba)


# ------------------------------------------------------------------------------ the two trainers
def tl_trainer(w):
    """step(i, want_loss) for torchlean: model and optimizer built from seed 0 (the same initial
    weights in every mode). Returns (step, initial state_dict)."""
    from torchlean import nn, optim
    from torchlean.session import Session, manual_seed
    manual_seed(0)
    model = w.build_tl()
    state = model.state_dict()
    kind, kw = w.opt
    opt = {"sgd": optim.SGD, "adam": optim.Adam, "adamw": optim.AdamW}[kind](
        model.parameters(), **kw)
    s = Session()
    F = nn.functional

    def step(i, want_loss=False):
        x, y = w.batches[i % len(w.batches)]
        out = model(x, s) if w.int_input else model(s.tensor(x))
        if w.loss == "ce":
            loss = F.cross_entropy(out, y)
        elif w.loss == "ce_seq":
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        else:
            loss = F.mse_loss(out, s.tensor(y))
        opt.zero_grad()
        loss.backward()
        opt.step()
        v = loss.item() if want_loss else None
        s.step()
        return v

    return step, state


def torch_trainer(w, side, state):
    torch, dev = side.torch, side.dev
    F = torch.nn.functional
    model = w.build_torch(torch).to(dev)
    side.load_state(model, state, w.name)
    kind, kw = w.opt
    opt = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}[kind](
        model.parameters(), **kw)

    def step(i, want_loss=False):
        x, y = w.batches[i % len(w.batches)]
        x, y = torch.from_numpy(x).to(dev), torch.from_numpy(y).to(dev)
        out = model(x)
        if w.loss == "ce":
            loss = F.cross_entropy(out, y)
        elif w.loss == "ce_seq":
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        else:
            loss = F.mse_loss(out, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item() if want_loss else None

    return step


# ------------------------------------------------------------------------------ measurement
def _modes(tl):
    """torchlean's reproducibility levels to time: (name, switch, query) for det and, where
    this build has it, exact."""
    modes = [("det", tl.set_deterministic, tl.is_deterministic)]
    if getattr(tl, "is_exact", None) is not None and getattr(tl, "set_exact", None) is not None:
        modes.append(("exact", tl.set_exact, tl.is_exact))
    return modes


def _default_mode(tl):
    """Switch every level off (the default column must be the default mode, whatever
    TORCHLEAN_DETERMINISTIC or TORCHLEAN_EXACT say); returns a function that restores them."""
    was = [(switch, query()) for _, switch, query in _modes(tl)]
    for switch, _ in reversed(was):
        switch(False)

    def restore():
        for switch, flag in was:
            if flag:
                switch(True)
    return restore


def run_model(w, tl, side, args):
    """Every measurement of one model: torchlean default, det, exact, then torch. A failing
    measurement leaves its columns n/a and a note; the other models still run."""
    sync, reset, peak = torchlean_hooks(tl)
    timing = dict(warmup=args.warmup, repeats=args.repeats, steps=args.steps,
                  target_s=args.target_s, budget_s=None if args.steps > 0 else args.budget_s)
    row = dict(name=w.name, desc=w.desc, batch=w.batch, notes=[])

    def tl_run():
        gc.collect()
        base = tl.memory_stats()["live_bytes"]
        step, state = tl_trainer(w)
        r = measure(step, sync, reset, peak, **timing)
        r["above"] = r["peak"] - base
        del step
        gc.collect()
        tl.empty_cache()
        return r, state

    try:
        row["tl"], state = tl_run()
    except Exception as e:
        row["notes"].append(f"torchlean failed: {type(e).__name__}: {e}"[:300])
        return row
    for mode, switch, _ in _modes(tl):
        try:
            switch(True)
            row[mode], _ = tl_run()
        except Exception as e:
            row["notes"].append(f"{mode} failed: {type(e).__name__}: {e}"[:300])
        finally:
            switch(False)
            tl.set_deterministic(False)
    if side.dev is not None:
        try:
            gc.collect()
            side.empty_cache()
            base = side.live()
            step = torch_trainer(w, side, state)
            r = measure(step, side.sync, side.reset_peak, side.peak, **timing)
            r["above"] = None if base is None or r["peak"] is None else r["peak"] - base
            row["torch"] = r
            row["dloss"] = abs(r["first_loss"] - row["tl"]["first_loss"])
            del step
            side.empty_cache()
        except Exception as e:
            row["notes"].append(f"torch failed: {type(e).__name__}: {e}"[:300])
    return row


def _get(row, run, field):
    """row[run][field] or None when that run is missing (failed, torch absent, no exact mode)."""
    r = row.get(run)
    return None if r is None else r[field]


def _ms(row, run):
    v = _get(row, run, "step_s")
    return None if v is None else v * 1e3


def _over(a, b):
    return None if a is None or not b else a / b


def num_ms(v):
    return "      n/a" if v is None else f"{v:9.3f} ms"


def _targets(row):
    """The issue's targets for this row: speed <= 0.8x torch (moonshot 0.6x), peak memory
    <= 1.0x torch, deterministic <= 1.1x default."""
    def mark(v, limit):
        return "n/a" if v is None else ("met" if v <= limit else "missed")
    speed = _over(_ms(row, "tl"), _ms(row, "torch"))
    mem = _over(_get(row, "tl", "above"), _get(row, "torch", "above"))
    det = _over(_ms(row, "det"), _ms(row, "tl"))
    out = f"speed {mark(speed, SPEED_TARGET)}"
    if speed is not None and speed <= SPEED_MOONSHOT:
        out += " (moonshot met)"
    return out + f", memory {mark(mem, MEMORY_TARGET)}, det {mark(det, DET_TARGET)}"


def report(rows, tl, side, args) -> str:
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    exact = "exact mode timed" if any("exact" in r for r in rows) else \
        "exact mode not in this build (torchlean.is_exact missing): exact/default n/a"
    lines = [
        "# Realistic models: torchlean vs PyTorch eager (training step)",
        "",
        f"- date: {now}",
        f"- device: {side.device_name}",
        f"- torchlean backend: {tl.backend()}; PyTorch: {side.note}; sizes: "
        f"{'quick (toy sizes, smoke run)' if args.quick else 'full (issue 14)'}",
        f"- method: same architecture, optimizer, initial weights and random batches (uploaded "
        f"from host NumPy every step) on both sides, TF32 off; up to {args.warmup} warm-up "
        f"steps, then the median of up to {args.repeats} runs "
        + (f"of {args.steps} steps" if args.steps > 0 else f"of about {args.target_s} s")
        + " each closed by a device synchronisation, divided by its step count.",
        "- peak: allocator peak over the timed runs (reset after warm-up) minus what the "
        "allocator held before the model was built (torch's cuBLAS/cuDNN/cuFFT workspaces are "
        "created before any baseline); memory = torchlean / torch of those.",
        f"- det/default, exact/default: torchlean step time with torchlean.set_deterministic(True) "
        f"(resp. set_exact(True)) over the default; {exact}.",
        "- |dloss|: first-step loss difference between the frameworks (same weights and batch).",
        f"- targets (issue 14): step <= {SPEED_TARGET}x torch (moonshot {SPEED_MOONSHOT}x), peak "
        f"memory <= {MEMORY_TARGET}x torch, det <= {DET_TARGET}x default.",
        "",
        "| model | batch | torchlean ms | torch ms | time tl/torch | torchlean peak MiB "
        "| torch peak MiB | memory tl/torch | det/default | exact/default | \\|dloss\\| | targets |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    def num(v, spec, scale=1.0):
        return "n/a" if v is None else format(v * scale, spec)

    for r in rows:
        tl_ms, th_ms = _ms(r, "tl"), _ms(r, "torch")
        tl_up, th_up = _get(r, "tl", "above"), _get(r, "torch", "above")
        lines.append(
            f"| {r['name']} | {r['batch']} | {num(tl_ms, '.3f')} | {num(th_ms, '.3f')} | "
            f"{ratio(tl_ms, th_ms)} | {num(tl_up, '.2f', 2 ** -20)} | "
            f"{num(th_up, '.2f', 2 ** -20)} | {ratio(tl_up, th_up)} | "
            f"{ratio(_ms(r, 'det'), tl_ms)} | {ratio(_ms(r, 'exact'), tl_ms)} | "
            f"{num(r.get('dloss'), '.1e')} | {_targets(r)} |")
    lines.append("")
    for r in rows:
        runs = ", ".join(f"{k} {r[k]['repeats']}x{r[k]['steps']} steps"
                         for k in ("tl", "det", "exact", "torch") if k in r)
        peaks = ", ".join(f"{k} {mib(_get(r, k, 'peak'))}" for k in ("tl", "torch") if k in r)
        first = _get(r, "tl", "first_loss")
        notes = "".join(f"; {n}" for n in r["notes"])
        lines.append(f"- {r['name']}: {r['desc']} (timed runs: {runs or 'none'}; absolute peaks: "
                     f"{peaks or 'n/a'}; first loss {num(first, '.5f')}{notes})")
    lines.append("")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="also write the table to this file")
    p.add_argument("--models", default=",".join(MODELS),
                   help=f"comma-separated subset of {','.join(MODELS)}")
    p.add_argument("--steps", type=int, default=0,
                   help="optimizer steps per timed run (0: chosen so a run lasts --target-s)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measurement")
    p.add_argument("--warmup", type=int, default=5, help="warm-up steps (the first included)")
    p.add_argument("--target-s", type=float, default=0.25,
                   help="length of one timed run when --steps is 0")
    p.add_argument("--budget-s", type=float, default=4.0,
                   help="rough seconds per measurement when --steps is 0 (slow modes do fewer "
                        "warm-up steps and repeats)")
    p.add_argument("--quick", action="store_true",
                   help="toy sizes, one warm-up step, one timed step (a CPU smoke run)")
    p.add_argument("--no-torch", action="store_true", help="measure torchlean only")
    args = p.parse_args(argv)
    args.models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in args.models if m not in SIZES]
    if unknown:
        p.error(f"unknown model(s) {unknown}; choose from {MODELS}")
    if args.quick:
        args.warmup, args.repeats, args.steps = 1, 1, max(1, args.steps if args.steps > 0 else 1)

    import torchlean as tl
    restore_modes = _default_mode(tl)
    side = TorchSide(tl.backend(), args.no_torch)
    rng = np.random.default_rng(0)
    rows = []
    for name in args.models:
        w = BUILDERS[name](SIZES[name]["quick" if args.quick else "full"], rng)
        row = run_model(w, tl, side, args)
        rows.append(row)
        print(f"{name:6s} torchlean {num_ms(_ms(row, 'tl'))} +{mib(_get(row, 'tl', 'above'))}"
              + "".join(f" {k} {ratio(_ms(row, k), _ms(row, 'tl'))}" for k in ("det", "exact")
                        if k in row)
              + (f" | torch {num_ms(_ms(row, 'torch'))} +{mib(_get(row, 'torch', 'above'))}"
                 f" |dloss| {row['dloss']:.1e}" if "torch" in row else f" | {side.note}")
              + "".join(f" [{n}]" for n in row["notes"]), flush=True)
    restore_modes()
    text = report(rows, tl, side, args)
    emit(text, args.out)
    return rows


if __name__ == "__main__":
    main()
