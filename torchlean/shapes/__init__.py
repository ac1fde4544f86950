"""Named shape rules and kernel-argument helpers used by ops.yaml expressions.

Every `outputs:` and `args:` expression in ops.yaml calls only the rules exported here (the
generated code calls them as `S.<rule>`), with input names bound to shape tuples and attr names
bound to attr values. VJP expressions may call them too (there input names are buffers;
`shape(x)` reads a buffer's shape). A rule that finds a problem raises ShapeError with what it
expected; the generated op prefixes the op name and the shapes it was given. Nothing here
imports the native side, so the generator can load the package to validate the registry.

One module per family: core (error, rank and axis checks), generic, broadcast, views
(reductions and permutations), softmax, linalg, index, conv_pool, norm_attention, spectral_scan, sort.
"""
from __future__ import annotations

from .core import ShapeError, shape
from .generic import (batch_of, cols, dims, flag, flat, lead_len, numel, row_len,
                      rows, same, scalar, seq_len, vec)
from .broadcast import broadcast, broadcast_dims, broadcast_to, strided_broadcast, sum_to
from .views import (axis_len, inner, outer, permute_bca, permute_cab, reduce, reduce_axis_back,
                    reduce_max_back, reshape, swap_adjacent, swap_geom, swap_last2, transpose2d)
from .softmax import mask_rows, masked_softmax, softmax_rows, softmax_shape
from .linalg import (batch_rows, bmm, dgemm, gemm_m, gemm_n, gemm_p, gemm_t, linear, linear_db,
                     linear_dw, matmul)
from .index import (as_index, concat0, concat1d, gather_row, gather_rows, gather_scalar,
                    gather_vec, like_gather, pad_range0, scatter_row, scatter_rows, scatter_vec,
                    slice1d, slice_range0)
from .conv_pool import (conv_bias_shape, conv_dilation3, conv_geom, conv_grad, conv_grouped_geom,
                        conv_grouped_grad, conv_grouped_out, conv_out, conv_transpose_out,
                        pool_geom, pool_grad, pool_out)
from .norm_attention import (attn_lse, attn_out, bn_c, bn_n, bn_out, bn_s, bn_stats, ln_out,
                             ln_param, ln_stats, mha_hd, mha_lse, mha_out, mha_proj)
from .fused import ce_rows
from .argreduce import select_axis, select_axis_back
from .sort import first_cols, mat_rows, put_rows, take_rows, take_rows_back
from .spectral_scan import (irfft, rfft, scan_checkpoints, scan_chunks, scan_mode,
                            selective_scan, spectral_conv1d, spectrum_rows)
