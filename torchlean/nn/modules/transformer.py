"""torch.nn's Transformer family: TransformerEncoderLayer, TransformerEncoder,
TransformerDecoderLayer, TransformerDecoder and Transformer, with torch's arguments, defaults,
submodule names (self_attn, multihead_attn, linear1, linear2, norm1..norm3, dropout1..dropout3)
and so torch's state_dict keys: a torch checkpoint loads strictly.

Built from nn.MultiheadAttention, Linear, LayerNorm and Dropout; the layers compute what torch's
do in the post-norm (default) and pre-norm (norm_first=True) arrangements:
    post-norm: x = norm1(x + sa(x)); x = norm2(x + ff(x))
    pre-norm:  x = x + sa(norm1(x)); x = x + ff(norm2(x))
with ff(x) = dropout2(linear2(dropout(activation(linear1(x))))) and sa the self-attention
block followed by dropout1 (the decoder adds the cross-attention block on memory between them).
Masks follow nn.MultiheadAttention: boolean True = blocked, float masks added to the scores.
"""
from __future__ import annotations

import copy

import numpy as np

from torchlean.factories import tensor as _tensor
from torchlean.nn import functional as F, init
from torchlean.nn.modules.activation import Dropout
from torchlean.nn.modules.attention import MultiheadAttention
from torchlean.nn.modules.base import Module, ModuleList
from torchlean.nn.modules.linear import Linear
from torchlean.nn.modules.normalization import LayerNorm


def _activation(op: str, activation):
    if activation in ("relu", F.relu):
        return F.relu
    if activation in ("gelu", F.gelu):
        return F.gelu
    if callable(activation):
        return activation
    raise RuntimeError(f"{op}: activation should be relu/gelu, not {activation}")


def _sizes(op: str, d_model, nhead, dim_feedforward) -> tuple[int, int, int]:
    for name, v in (("d_model", d_model), ("nhead", nhead), ("dim_feedforward", dim_feedforward)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise TypeError(f"{op}: {name} must be a positive int, got {v!r}")
    return int(d_model), int(nhead), int(dim_feedforward)


class _FeedForward(Module):
    """What both layers share: the feed-forward block and its dropouts."""

    def _build_ff(self, d_model, dim_feedforward, dropout, activation, bias, op):
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias)
        self.activation = _activation(op, activation)

    def _ff_block(self, x, drop_out):
        return drop_out(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_FeedForward):
    """Self-attention and a feed-forward network, each with a residual connection and
    LayerNorm (torch.nn.TransformerEncoderLayer)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        op = "TransformerEncoderLayer"
        d_model, nhead, dim_feedforward = _sizes(op, d_model, nhead, dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self._build_ff(d_model, dim_feedforward, dropout, activation, bias, op)
        self.norm_first, self.batch_first = bool(norm_first), bool(batch_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        causal = bool(is_causal) and src_mask is None
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, causal)
            x = x + self._ff_block(self.norm2(x), self.dropout2)
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, causal))
            x = self.norm2(x + self._ff_block(x, self.dropout2))
        return x


class TransformerDecoderLayer(_FeedForward):
    """Self-attention on the target, cross-attention on the encoder's memory and a
    feed-forward network, each with a residual connection and LayerNorm
    (torch.nn.TransformerDecoderLayer)."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True,
                 device=None, dtype=None):
        super().__init__()
        op = "TransformerDecoderLayer"
        d_model, nhead, dim_feedforward = _sizes(op, d_model, nhead, dim_feedforward)
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first)
        self._build_ff(d_model, dim_feedforward, dropout, activation, bias, op)
        self.norm_first, self.batch_first = bool(norm_first), bool(batch_first)
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        x = self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                key_padding_mask=key_padding_mask, need_weights=False,
                                is_causal=is_causal)[0]
        return self.dropout2(x)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        x = tgt
        t_causal = bool(tgt_is_causal) and tgt_mask is None
        m_causal = bool(memory_is_causal) and memory_mask is None
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, t_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, m_causal)
            x = x + self._ff_block(self.norm3(x), self.dropout3)
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, t_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask,
                                               memory_key_padding_mask, m_causal))
            x = self.norm3(x + self._ff_block(x, self.dropout3))
        return x


def _clones(op: str, layer, num_layers) -> ModuleList:
    """num_layers deep copies of layer (each starts with layer's weights, as torch's)."""
    if isinstance(num_layers, bool) or not isinstance(num_layers, (int, np.integer)) \
            or num_layers < 0:
        raise TypeError(f"{op}: num_layers must be an int >= 0, got {num_layers!r}")
    if not isinstance(layer, Module):
        raise TypeError(f"{op}: expected a layer Module, got {type(layer).__name__}")
    return ModuleList([copy.deepcopy(layer) for _ in range(int(num_layers))])


class TransformerEncoder(Module):
    """num_layers copies of an encoder layer, then an optional norm."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = _clones("TransformerEncoder", encoder_layer, num_layers)
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoder(Module):
    """num_layers copies of a decoder layer, then an optional norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        self.layers = _clones("TransformerDecoder", decoder_layer, num_layers)
        self.num_layers = int(num_layers)
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """The encoder-decoder model of "Attention Is All You Need" (torch.nn.Transformer): every
    weight matrix starts Xavier-uniform, as torch's _reset_parameters does."""

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps=1e-5, batch_first=False, norm_first=False,
                 bias=True, device=None, dtype=None):
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first, norm_first=norm_first,
                  bias=bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(d_model, nhead, **kw),
                                              num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(d_model, nhead, **kw),
                                              num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = int(d_model), int(nhead), bool(batch_first)
        self._reset_parameters()

    def _reset_parameters(self):
        for p in self.parameters():
            if len(p.shape) > 1:
                init.xavier_uniform_(p)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None,
                memory_is_causal=False):
        s_shape, t_shape = tuple(src.shape), tuple(tgt.shape)
        batch_axis = 0 if self.batch_first else 1
        if len(s_shape) == 3 and len(t_shape) == 3 and s_shape[batch_axis] != t_shape[batch_axis]:
            raise RuntimeError(f"Transformer: the batch number of src and tgt must be equal, got "
                               f"src {s_shape} and tgt {t_shape}")
        if s_shape[-1] != self.d_model or t_shape[-1] != self.d_model:
            raise RuntimeError(f"Transformer: the feature number of src and tgt must be equal to "
                               f"d_model ({self.d_model}), got src {s_shape} and tgt {t_shape}")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz, device=None, dtype=None):
        """The (sz, sz) float mask with -inf above the diagonal and 0 on and below it."""
        return _tensor(np.triu(np.full((int(sz), int(sz)), -np.inf, dtype=np.float32), k=1))


__all__ = ["Transformer", "TransformerDecoder", "TransformerDecoderLayer", "TransformerEncoder",
           "TransformerEncoderLayer"]
