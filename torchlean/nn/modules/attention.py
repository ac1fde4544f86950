"""Attention modules, both composed from registry ops (linear projections, bmm, masked_softmax):
MultiheadAttention is torch.nn.MultiheadAttention with torch's parameters (in_proj_weight (3E, E),
in_proj_bias, out_proj.weight / out_proj.bias; q/k/v_proj_weight when kdim or vdim differ),
arguments and results, so a torch state_dict loads strictly and forward returns (output, weights
averaged over heads) by default. MultiHeadAttention is torchlean's own (weights (in, out), output
only) and runs the fused attention kernel for plain self-attention."""
from __future__ import annotations

import math

import numpy as np

from torchlean._opsupport import DeviceMask
from torchlean.nn import functional as F, init
from torchlean.nn.arg_checks import check_numel, int_arg, size_arg
from torchlean.nn.modules.base import Module
from torchlean.nn.modules.linear import Linear
from torchlean.session import Parameter, Tensor


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        op = "MultiheadAttention"
        e, h = size_arg(op, "embed_dim", embed_dim), int_arg(op, "num_heads", num_heads)
        kdim = None if kdim is None else size_arg(op, "kdim", kdim)
        vdim = None if vdim is None else size_arg(op, "vdim", vdim)
        check_numel(op, "in_proj_weight", (3 * e, max(e, kdim or e, vdim or e)))
        if h < 1 or e % h:
            raise AssertionError(f"MultiheadAttention: embed_dim ({e}) must be divisible by "
                                 f"num_heads ({h})")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are "
                                      "not supported")
        self.embed_dim, self.num_heads, self.head_dim = e, h, e // h
        self.kdim, self.vdim = int(kdim or e), int(vdim or e)
        self.dropout, self.batch_first = float(dropout), bool(batch_first)
        self._qkv_same_embed_dim = self.kdim == e and self.vdim == e
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(init.xavier_uniform((3 * e, e)), name="in_proj_weight")
        else:
            self.q_proj_weight = Parameter(init.xavier_uniform((e, e)), name="q_proj_weight")
            self.k_proj_weight = Parameter(init.xavier_uniform((e, self.kdim)),
                                           name="k_proj_weight")
            self.v_proj_weight = Parameter(init.xavier_uniform((e, self.vdim)),
                                           name="v_proj_weight")
        if bias:
            self.in_proj_bias = Parameter(np.zeros(3 * e), name="in_proj_bias")
        else:
            object.__setattr__(self, "in_proj_bias", None)
        self.out_proj = Linear(e, e, bias=bias)
        if bias:
            self.out_proj.bias.set(np.zeros(e))

    def _projections(self, s):
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            w = s.use(self.in_proj_weight)
            ws = [w[i * e:(i + 1) * e] for i in range(3)]
        else:
            ws = [s.use(p) for p in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)]
        if self.in_proj_bias is None:
            return [(w, None) for w in ws]
        b = s.use(self.in_proj_bias)
        return [(w, b[i * e:(i + 1) * e]) for i, w in enumerate(ws)]

    def _heads(self, y, n, length):
        """(N, length, E) -> (N * heads, length, head_dim)."""
        h, d = self.num_heads, self.head_dim
        return y.reshape(n, length, h, d).permute(0, 2, 1, 3).reshape(n * h, length, d)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True, is_causal=False):
        op = "MultiheadAttention"
        s = query.session
        q, k, v = (s.as_tensor(t) for t in (query, key, value))
        batched = q.ndim == 3
        if q.ndim not in (2, 3) or k.ndim != q.ndim or v.ndim != q.ndim \
                or q.shape[-1] != self.embed_dim or k.shape[-1] != self.kdim \
                or v.shape[-1] != self.vdim or k.shape[:-1] != v.shape[:-1]:
            raise ValueError(f"{op}: expected query (L, N, {self.embed_dim}), key (S, N, "
                             f"{self.kdim}) and value (S, N, {self.vdim}) ((N, L, E) with "
                             f"batch_first, or unbatched (L, E)), got query {tuple(q.shape)}, key "
                             f"{tuple(k.shape)}, value {tuple(v.shape)}")
        if not batched:
            q, k, v = (t.unsqueeze(0) for t in (q, k, v))
        elif not self.batch_first:
            q, k, v = (t.transpose(0, 1) for t in (q, k, v))
        if q.shape[0] != k.shape[0]:
            raise ValueError(f"{op}: query batch {q.shape[0]} and key batch {k.shape[0]} differ")
        n, length, sk = q.shape[0], q.shape[1], k.shape[1]
        h = self.num_heads
        (wq, bq), (wk, bk), (wv, bv) = self._projections(s)
        qh = self._heads(F.linear(q, wq, bq), n, length)
        kh = self._heads(F.linear(k, wk, bk), n, sk)
        vh = self._heads(F.linear(v, wv, bv), n, sk)
        allowed, additive = self._masks(op, attn_mask, key_padding_mask, is_causal, n, length,
                                        sk, batched)
        drop = self.dropout if self.training else 0.0
        if need_weights or (allowed is not None and additive is not None):
            scores = s.op("bmm", qh, kh.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
            if additive is not None:
                scores = scores + additive
            p = s.op("softmax", scores) if allowed is None else \
                s.op("masked_softmax", scores, mask=allowed)
            pd = F.dropout(p, drop, True) if drop > 0.0 else p
            o = s.op("bmm", pd, vh)
        else:   # no weights wanted: F.scaled_dot_product_attention (the fused op where it fits)
            o = F.scaled_dot_product_attention(qh, kh, vh, allowed if additive is None else
                                               additive, dropout_p=drop)
        o = o.reshape(n, h, length, self.head_dim).permute(0, 2, 1, 3)
        out = self.out_proj(o.reshape(n, length, self.embed_dim))
        out = out.squeeze(0) if not batched else (out if self.batch_first else out.transpose(0, 1))
        if not need_weights:
            return out, None
        w = pd.reshape(n, h, length, sk)       # torch returns the weights after dropout
        if average_attn_weights:
            w = w.mean(dim=1)
        return out, (w.squeeze(0) if not batched else w)

    def _masks(self, op, attn_mask, key_padding_mask, is_causal, n, length, sk, batched):
        """(allowed (L, S) or (N*H, L, S) bool or None, additive float array or Tensor or None)
        from torch's attn_mask ((L, S) or (N*H, L, S); True = blocked, or float added) and
        key_padding_mask ((N, S); True = ignored, or float added)."""
        h = self.num_heads
        shape = (n * h, length, sk)
        if attn_mask is not None:      # torch takes (L, S) or (N*H, L, S), never broadcasts
            ms = tuple(np.shape(attn_mask) if not hasattr(attn_mask, "shape") else
                       attn_mask.shape)
            want = (length, sk) if len(ms) == 2 else shape if batched else (h, length, sk)
            if ms != want:
                raise ValueError(f"{op}: attn_mask of shape {ms}; expected (L, S) = "
                                 f"{(length, sk)} or {'(N*num_heads' if batched else '(num_heads'}"
                                 f", L, S) = {want if len(ms) == 3 else shape}")
        if is_causal and attn_mask is None:
            attn_mask = ~F.causal_mask(length, sk)
        allowed, additive = F.split_attention_mask(op, attn_mask, shape, blocked_when=True)
        if key_padding_mask is not None:
            kpm = np.asarray(key_padding_mask.numpy() if hasattr(key_padding_mask, "numpy")
                             else key_padding_mask)
            want = (n, sk) if batched else (sk,)
            if kpm.shape != want:
                raise ValueError(f"{op}: key_padding_mask must have shape {want} (batch, keys), "
                                 f"got {kpm.shape}")
            full = np.broadcast_to(kpm.reshape(n, 1, 1, sk), (n, h, length, sk)).reshape(shape)
            a2, d2 = F.split_attention_mask(op, full, shape, blocked_when=True)
            if a2 is not None:
                allowed = a2 if allowed is None else np.broadcast_to(allowed, shape) & a2
            if d2 is not None:
                additive = d2 if additive is None else additive + d2
        if isinstance(additive, np.ndarray) and additive.ndim == 3:
            additive = additive.reshape(shape)
        return allowed, additive


class MultiHeadAttention(Module):
    """Multi-head attention over d_model with num_heads heads, batch first: query (B, T, D) or
    (T, D); Q = query @ Wq, K = key @ Wk, V = value @ Wv, output @ Wo (weights (in, out)).

    Self-attention with no biases and only boolean (T, T) masks runs the fused kernel
    (use_flash=True, the default, never stores the T x T scores on CUDA). Cross attention
    (key/value of another length S, kdim/vdim), projection biases (bias=True, zero-initialised
    as torch), key_padding_mask and float masks run the composed path: projections, heads,
    F.attention_core (bmm, masked_softmax), merge, output projection: all registry ops.

    Masks: `mask` is torchlean's boolean (T, S) mask, True = may attend (as
    F.scaled_dot_product_attention); `attn_mask` and `key_padding_mask` ((B, S) or (S,)) follow
    nn.MultiheadAttention, True = blocked. Float masks (either keyword) are added to the scores.
    is_causal=True lets query i attend keys j <= i: the fused kernel takes it as its causal attr
    (no mask buffer, and the key tiles past the diagonal are skipped); the composed path uses
    the causal mask, uploaded once per (T, S) and kept on the module.
    Rows with every key blocked give 0. Returns the output only (no attention weights)."""

    def __init__(self, d_model, num_heads, use_flash=True, bias=False, kdim=None, vdim=None):
        super().__init__()
        if num_heads < 1 or d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model ({d_model}) must be divisible by "
                             f"num_heads ({num_heads})")
        sh = (d_model, d_model)
        self.kdim, self.vdim = kdim or d_model, vdim or d_model
        self.Wq = Parameter(init.xavier_uniform(sh))
        self.Wk = Parameter(init.xavier_uniform((self.kdim, d_model)))
        self.Wv = Parameter(init.xavier_uniform((self.vdim, d_model)))
        self.Wo = Parameter(init.xavier_uniform(sh))
        if bias:
            self.bq, self.bk = Parameter(np.zeros(d_model)), Parameter(np.zeros(d_model))
            self.bv, self.bo = Parameter(np.zeros(d_model)), Parameter(np.zeros(d_model))
        self.d_model, self.num_heads = d_model, num_heads
        self.use_flash, self.has_bias = use_flash, bool(bias)
        self._mask = None     # the last boolean mask, uploaded once (a DeviceMask)
        self._causal = {}     # (T, S) -> causal DeviceMask

    def _device_mask(self, mask):
        """The same mask every step (a causal mask) is uploaded once, not twice per step."""
        if mask is None or isinstance(mask, DeviceMask):
            return mask
        if self._mask is not None and self._mask.matches(mask):
            return self._mask
        if np.asarray(mask).dtype != np.bool_:
            return mask  # the op raises its own TypeError
        self._mask = DeviceMask(mask)
        return self._mask

    def _causal_mask(self, t, s):
        m = self._causal.get((t, s))
        if m is None:
            m = self._causal[(t, s)] = DeviceMask(F.causal_mask(t, s))
        return m

    def forward(self, query, key=None, value=None, key_padding_mask=None, *, mask=None,
                attn_mask=None, is_causal=False):
        op = "MultiHeadAttention"
        for name, a in (("key", key), ("value", value)):
            if a is not None and not isinstance(a, (Tensor, Parameter)) and \
                    np.asarray(a).dtype == np.bool_:
                raise TypeError(f"{op}: {name} is a boolean array; pass masks by keyword "
                                "(mask=, attn_mask=, key_padding_mask=)")
        s = query.session
        x = s.as_tensor(query)
        self_attn = (key is None or key is query) and (value is None or value is query)
        kx = x if key is None else s.as_tensor(key)
        vx = kx if value is None else s.as_tensor(value)
        if x.ndim not in (2, 3) or kx.ndim != x.ndim or vx.ndim != x.ndim \
                or x.shape[-1] != self.d_model or kx.shape[-1] != self.kdim \
                or vx.shape[-1] != self.vdim or kx.shape[:-1] != vx.shape[:-1] \
                or kx.shape[:-2] != x.shape[:-2]:
            raise ValueError(f"{op}: expected query (B, T, {self.d_model}) or (T, "
                             f"{self.d_model}), key (.., S, {self.kdim}) and value (.., S, "
                             f"{self.vdim}) with the same batch, got query {x.shape}, key "
                             f"{kx.shape}, value {vx.shape}")
        t, sk = x.shape[-2], kx.shape[-2]
        b = x.shape[0] if x.ndim == 3 else 1
        n = b * self.num_heads
        if is_causal and (mask is not None or attn_mask is not None):
            raise ValueError(f"{op}: is_causal=True builds the causal mask; do not pass mask= "
                             "or attn_mask= with it")
        if mask is not None and attn_mask is not None:
            raise ValueError(f"{op}: give mask= (True = may attend) or attn_mask= (True = "
                             "blocked), not both")
        if mask is not None or attn_mask is not None:
            allowed, additive = F.split_attention_mask(
                op, attn_mask if mask is None else mask, (n, t, sk),
                blocked_when=mask is None)
        else:
            allowed, additive = None, None
        fused = (self_attn and not self.has_bias and key_padding_mask is None
                 and F.fused_attention_fits(t, sk, allowed, additive))
        if fused:
            return s.op("multi_head_attention", self.Wq, self.Wk, self.Wv, self.Wo, x,
                        num_heads=self.num_heads, mask=self._device_mask(allowed),
                        use_flash=self.use_flash, causal=bool(is_causal))
        if is_causal:
            allowed = self._causal_mask(t, sk)
        if key_padding_mask is not None:
            kpm = np.asarray(key_padding_mask)
            want = (b, sk) if x.ndim == 3 else (sk,)
            if kpm.shape != want or kpm.dtype.kind not in "bf":
                raise ValueError(f"{op}: key_padding_mask must be boolean or float of shape "
                                 f"{want} (batch, keys), got {kpm.dtype} {kpm.shape}")
            kpm = kpm.reshape(b, 1, 1, sk)
            if kpm.dtype == np.bool_:
                keep = np.broadcast_to(~kpm, (b, self.num_heads, t, sk)).reshape(n, t, sk)
                allowed = keep if allowed is None else np.asarray(allowed) & keep
            else:
                blocked = kpm == -np.inf
                full = np.broadcast_to(np.where(blocked, 0.0, kpm), (b, self.num_heads, t, sk))
                full = full.reshape(n, t, sk).astype(np.float32)
                additive = full if additive is None else additive + full
                if blocked.any():
                    keep = np.broadcast_to(~blocked, (b, self.num_heads, t, sk)).reshape(n, t, sk)
                    allowed = keep if allowed is None else np.asarray(allowed) & keep
        if allowed is not None and not isinstance(allowed, DeviceMask):
            allowed = self._device_mask(allowed)
        return self._composed(x, kx, vx, allowed, additive)

    def _project(self, x, w, bias):
        """(.., L, in) @ w (+ bias) split into heads: (B * H, L, hd)."""
        s, lead = x.session, x.shape[:-1]
        y = s.op("matmul", x.reshape(-1, x.shape[-1]), w)
        if bias is not None:
            y = y + s.use(bias)
        b = lead[0] if len(lead) == 2 else 1
        h = self.num_heads
        y = y.reshape(b, lead[-1], h, self.d_model // h).permute(0, 2, 1, 3)
        return y.reshape(b * h, lead[-1], self.d_model // h)

    def _composed(self, x, k, v, allowed, additive):
        s, h = x.session, self.num_heads
        bias = (lambda name: getattr(self, name)) if self.has_bias else (lambda name: None)
        q = self._project(x, self.Wq, bias("bq"))
        kh, vh = self._project(k, self.Wk, bias("bk")), self._project(v, self.Wv, bias("bv"))
        if additive is not None and not isinstance(additive, (Tensor, Parameter)):
            additive = s.tensor(additive)
        o = F.attention_core(q, kh, vh, allowed, additive)                 # (B * H, T, hd)
        t = x.shape[-2]
        o = o.reshape(-1, h, t, self.d_model // h).permute(0, 2, 1, 3).reshape(-1, self.d_model)
        y = s.op("matmul", o, self.Wo)
        if self.has_bias:
            y = y + s.use(self.bo)
        return y.reshape(x.shape)
