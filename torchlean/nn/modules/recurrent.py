"""torch.nn.RNN, LSTM and GRU: torch's parameter names (weight_ih_l0, weight_hh_l0, bias_ih_l0,
bias_hh_l0, '_reverse' for the backward direction), gate order (LSTM i, f, g, o; GRU r, z, n)
and shapes, so a torch state_dict loads strictly. Composed from registry ops: each gate's
input projection runs once over the whole sequence, each step adds one linear of the hidden
state per gate; the time loop is Python."""
from __future__ import annotations

import math

import numpy as np

from torchlean.nn import functional as F, init
from torchlean.nn.arg_checks import check_numel, size_arg
from torchlean.nn.modules.base import Module
from torchlean.session import Parameter, cat, stack


class _RNNBase(Module):
    gates = 0

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        input_size = size_arg(name, "input_size", input_size)
        hidden_size = size_arg(name, "hidden_size", hidden_size)
        num_layers = size_arg(name, "num_layers", num_layers)
        check_numel(name, "weight_ih_l0", (4 * hidden_size, max(input_size, hidden_size)))
        if int(hidden_size) < 1 or int(num_layers) < 1 or int(input_size) < 1:
            raise ValueError(f"{name}: input_size, hidden_size and num_layers must be >= 1, got "
                             f"{input_size}, {hidden_size}, {num_layers}")
        if not 0.0 <= float(dropout) <= 1.0:
            raise ValueError(f"{name}: dropout must be in [0, 1], got {dropout}")
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size is not supported")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.num_layers, self.bias, self.batch_first = int(num_layers), bool(bias), batch_first
        self.dropout, self.bidirectional = float(dropout), bool(bidirectional)
        h, a = self.hidden_size, 1.0 / math.sqrt(hidden_size)
        dirs = 2 if bidirectional else 1
        for layer in range(self.num_layers):
            fan_in = self.input_size if layer == 0 else h * dirs
            for suffix in ([""] + (["_reverse"] if bidirectional else [])):
                tag = f"l{layer}{suffix}"
                shapes = [("weight_ih", (self.gates * h, fan_in)),
                          ("weight_hh", (self.gates * h, h))]
                if bias:
                    shapes += [("bias_ih", (self.gates * h,)), ("bias_hh", (self.gates * h,))]
                for kind, shp in shapes:
                    setattr(self, f"{kind}_{tag}",
                            Parameter(init.uniform(shp, -a, a), name=f"{kind}_{tag}"))

    def _weights(self, s, tag):
        """Per-gate (W_ih, W_hh, b_ih, b_hh) row blocks of the fused parameters."""
        h, g = self.hidden_size, self.gates
        out = []
        for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
            p = getattr(self, f"{kind}_{tag}", None)
            if p is None:
                out.append([None] * g)
                continue
            t = s.use(p)
            out.append([t[k * h:(k + 1) * h] for k in range(g)])
        return out

    def _initial(self, s, hx, n, batched, what):
        dirs = 2 if self.bidirectional else 1
        want = (self.num_layers * dirs, n, self.hidden_size) if batched else \
            (self.num_layers * dirs, self.hidden_size)
        if hx is None:
            return [s.tensor(np.zeros((n, self.hidden_size), np.float32))
                    for _ in range(self.num_layers * dirs)]
        if isinstance(hx, (tuple, list)):
            raise TypeError(f"{type(self).__name__}: expected {what} to be one Tensor of shape "
                            f"{want}, got a {type(hx).__name__} of {len(hx)}")
        t = s.as_tensor(hx)
        if tuple(t.shape) != want:
            raise ValueError(f"{type(self).__name__}: expected {what} of shape {want}, got "
                             f"{tuple(t.shape)}")
        if not batched:
            t = t.unsqueeze(1)
        return [t[i] for i in range(want[0])]

    def forward(self, input, hx=None):
        name = type(self).__name__
        s = input.session
        x = s.as_tensor(input)
        if x.ndim not in (2, 3) or x.shape[-1] != self.input_size:
            raise ValueError(f"{name}: expected input (L, N, {self.input_size}) ("
                             f"(N, L, {self.input_size}) with batch_first) or (L, "
                             f"{self.input_size}), got {tuple(x.shape)}")
        batched = x.ndim == 3
        if not batched:
            x = x.unsqueeze(1)
        elif self.batch_first:
            x = x.transpose(0, 1)
        n = x.shape[1]
        state = self._start_state(s, hx, n, batched)
        dirs = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                i = layer * dirs + d
                tag = f"l{layer}" + ("_reverse" if d else "")
                y, last = self._run(s, x, self._weights(s, tag), [st[i] for st in state],
                                    reverse=bool(d))
                outs.append(y)
                finals.append(last)
            x = outs[0] if dirs == 1 else cat(outs, dim=-1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        out = x if batched and not self.batch_first else (
            x.transpose(0, 1) if batched else x.squeeze(1))
        hs = [stack([f[k] for f in finals]) for k in range(len(finals[0]))]
        if not batched:
            hs = [h.squeeze(1) for h in hs]
        return out, self._pack_state(hs)

    def _run(self, s, x, w, h0, reverse):
        """One direction of one layer over x (L, N, in): (outputs (L, N, H), final state)."""
        wih, whh, bih, bhh = w
        steps, n = x.shape[0], x.shape[1]
        flat = x.reshape(steps * n, x.shape[2])
        xg = [F.linear(flat, wih[k], bih[k]).reshape(steps, n, self.hidden_size)
              for k in range(self.gates)]
        state, ys = h0, [None] * steps
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            state = self._cell([g[t] for g in xg], state, whh, bhh)
            ys[t] = state[0]
        return stack(ys), state


class RNN(_RNNBase):
    """torch.nn.RNN: h' = tanh (or relu) of x W_ih^T + b_ih + h W_hh^T + b_hh.
    forward(input, h0) returns (output, h_n)."""

    gates = 1

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or "
                             "'relu'")
        super().__init__(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional)
        self.nonlinearity = nonlinearity

    def _start_state(self, s, hx, n, batched):
        return (self._initial(s, hx, n, batched, "h_0"),)

    def _pack_state(self, hs):
        return hs[0]

    def _cell(self, xg, state, whh, bhh):
        (h,) = state
        return (h.session.op(self.nonlinearity, xg[0] + F.linear(h, whh[0], bhh[0])),)


class LSTM(_RNNBase):
    """torch.nn.LSTM: i, f, g, o = sigmoid, sigmoid, tanh, sigmoid of x W_ih^T + b_ih +
    h W_hh^T + b_hh; c' = f c + i g, h' = o tanh(c'). forward(input, (h0, c0)) returns
    (output, (h_n, c_n))."""

    gates = 4

    def _start_state(self, s, hx, n, batched):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0) of two Tensors, got "
                            f"{type(hx).__name__}" + (f" of shape {tuple(hx.shape)}"
                                                      if hasattr(hx, "shape") else ""))
        h0, c0 = (None, None) if hx is None else hx
        return (self._initial(s, h0, n, batched, "h_0"), self._initial(s, c0, n, batched, "c_0"))

    def _pack_state(self, hs):
        return hs[0], hs[1]

    def _cell(self, xg, state, whh, bhh):
        h, c = state
        s = h.session
        i, f, g, o = (xg[k] + F.linear(h, whh[k], bhh[k]) for k in range(4))
        c = s.op("sigmoid", f) * c + s.op("sigmoid", i) * s.op("tanh", g)
        return s.op("sigmoid", o) * s.op("tanh", c), c


class GRU(_RNNBase):
    """torch.nn.GRU: r, z = sigmoid(x W_i^T + b_i + h W_h^T + b_h), n = tanh(x W_in^T + b_in +
    r (h W_hn^T + b_hn)), h' = (1 - z) n + z h. forward(input, h0) returns (output, h_n)."""

    gates = 3

    def _start_state(self, s, hx, n, batched):
        return (self._initial(s, hx, n, batched, "h_0"),)

    def _pack_state(self, hs):
        return hs[0]

    def _cell(self, xg, state, whh, bhh):
        (h,) = state
        s = h.session
        r = s.op("sigmoid", xg[0] + F.linear(h, whh[0], bhh[0]))
        z = s.op("sigmoid", xg[1] + F.linear(h, whh[1], bhh[1]))
        nn_ = s.op("tanh", xg[2] + r * F.linear(h, whh[2], bhh[2]))
        return (nn_ + z * (h - nn_),)
