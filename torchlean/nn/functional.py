"""torch.nn.functional's names: the core forms (functional_core), the losses
(loss_functions), padding and resampling, and, bound at `import torchlean`, the operator
catalog's nn.functional entries (torchlean/catalog)."""
from __future__ import annotations

from torchlean.nn.functional_core import (  # noqa: F401 - torch.nn.functional names
    linear, conv_nd, dropout, dropout2d, relu, gelu, softplus, tanh, sigmoid, silu, softmax,
    log_softmax, leaky_relu, elu, layer_norm, conv1d, conv2d, conv3d, conv_transpose2d,
    adaptive_avg_pool2d, split_attention_mask, causal_mask, fused_attention_fits,
    attention_core, scaled_dot_product_attention, max_pool2d, avg_pool2d, adaptive_max_pool2d)
from torchlean.nn.loss_functions import (  # noqa: F401 - torch.nn.functional names
    binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div,
    l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from torchlean.nn.padding import normalize, pad  # noqa: F401
from torchlean.nn.resample import (  # noqa: F401 - torch.nn.functional names
    adaptive_avg_pool1d, adaptive_max_pool1d, avg_pool1d, avg_pool3d, interpolate, max_pool1d,
    max_pool3d, upsample)
