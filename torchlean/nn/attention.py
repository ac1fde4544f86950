"""torch.nn.MultiheadAttention with torch's parameters (in_proj_weight (3E, E), in_proj_bias,
out_proj.weight / out_proj.bias; q/k/v_proj_weight when kdim or vdim differ), arguments and
results, so a torch state_dict loads strictly and forward returns (output, weights averaged
over heads) by default. Composed from registry ops: linear projections, bmm, masked_softmax."""
from __future__ import annotations

import math

import numpy as np

from torchlean.nn import functional as F, init
from torchlean.nn.modules import Linear, Module
from torchlean.session import Parameter


class MultiheadAttention(Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        e, h = int(embed_dim), int(num_heads)
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
