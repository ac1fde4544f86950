"""PyTorch modules computing what torchlean's fused registry ops compute, with torchlean's
parameter names and layouts, so a torchlean state_dict loads into them unchanged (the benches
train both from the same initial weights)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    """torchlean's multi_head_attention: Q = x Wq, K = x Wk, V = x Wv (no biases, W is
    (d_model, d_model)), heads are column blocks of hd = d_model / heads, the head outputs are
    concatenated and multiplied by Wo. The core is PyTorch's scaled_dot_product_attention (what
    eager PyTorch code uses): `causal=True` takes its is_causal path, `mask` is boolean with
    True = may attend (torchlean's convention and SDPA's)."""

    def __init__(self, d_model, heads):
        super().__init__()
        self.heads = heads
        self.Wq, self.Wk, self.Wv, self.Wo = (nn.Parameter(torch.empty(d_model, d_model))
                                              for _ in range(4))

    def forward(self, x, mask=None, causal=False):
        B, n, d = x.shape
        hd = d // self.heads

        def heads(t):
            return t.view(B, n, self.heads, hd).transpose(1, 2)
        q, k, v = heads(x @ self.Wq), heads(x @ self.Wk), heads(x @ self.Wv)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return att.transpose(1, 2).reshape(B, n, d) @ self.Wo


class SpectralConv1d(nn.Module):
    """torchlean's spectral_conv1d_rfft on x (B, grid, width): rfft over the grid axis, mix the
    first `modes` bins with (w_re + i w_im)[k, in, out], zero the other bins, irfft. The DC bin's
    imaginary part is dropped as torchlean's irfft does."""

    def __init__(self, width, modes):
        super().__init__()
        self.modes = modes
        self.w_re = nn.Parameter(torch.empty(modes, width, width))
        self.w_im = nn.Parameter(torch.empty(modes, width, width))

    def forward(self, x):
        B, grid, width = x.shape
        m = self.modes
        X = torch.fft.rfft(x, dim=-2)
        mixed = torch.einsum("bkc,kco->bko", X[:, :m], torch.complex(self.w_re, self.w_im))
        dc = torch.complex(mixed[:, :1].real, torch.zeros_like(mixed[:, :1].real))
        rest = torch.zeros(B, grid // 2 + 1 - m, width, dtype=X.dtype, device=x.device)
        return torch.fft.irfft(torch.cat([dc, mixed[:, 1:], rest], 1), n=grid, dim=-2)


def selective_scan(a, u, c):
    """Mamba's scan read out per token: h_t = a_t * h_{t-1} + u_t (h_{-1} = 0) on (B, L, E, N)
    coefficients, y_t = h_t c_t with c (B, L, N), so y is (B, L, E). The sequential reference
    loop, one token per iteration, as Mamba's own reference code (selective_scan_ref) runs it."""
    h = torch.zeros_like(a[:, 0])
    ys = []
    for t in range(a.shape[1]):
        h = a[:, t] * h + u[:, t]
        ys.append(torch.einsum("ben,bn->be", h, c[:, t]))
    return torch.stack(ys, 1)
