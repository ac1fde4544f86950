"""Every torch.nn-style module, one file per family: base (Module and the containers), linear,
conv, pooling, normalization, activation (and dropout), embedding, attention, recurrent, losses.
Import them from here or from torchlean.nn."""
from torchlean.nn.modules.base import Module, ModuleDict, ModuleList, Sequential
from torchlean.nn.modules.linear import Flatten, Linear, Unflatten
from torchlean.nn.modules.conv import (Conv1d, Conv2d, Conv3d, ConvTranspose2d, SpectralConv1d,
                                       _ConvNd, _tuple)
from torchlean.nn.modules.pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d,
                                          AdaptiveMaxPool1d, AdaptiveMaxPool2d, AvgPool1d,
                                          AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
                                          Upsample, _Pool, _PoolModule)
from torchlean.nn.modules.normalization import (BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm,
                                                RMSNorm, SyncBatchNorm)
from torchlean.nn.modules.activation import (ELU, GELU, Dropout, Dropout2d, Identity, LeakyReLU,
                                             LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus,
                                             Tanh, _Act)
from torchlean.nn.modules.embedding import Embedding
from torchlean.nn.modules.attention import MultiheadAttention, MultiHeadAttention
from torchlean.nn.modules.recurrent import GRU, LSTM, RNN
from torchlean.nn.modules.transformer import (Transformer, TransformerDecoder,
                                              TransformerDecoderLayer, TransformerEncoder,
                                              TransformerEncoderLayer)
from torchlean.nn.modules.losses import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss,
                                         KLDivLoss, L1Loss, MSELoss, NLLLoss, SmoothL1Loss)

__all__ = ["Module", "ModuleDict", "ModuleList", "Sequential", "Flatten", "Linear", "Unflatten",
           "Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d", "SpectralConv1d",
           "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AvgPool1d", "AvgPool2d", "AvgPool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d",
           "Upsample", "BatchNorm1d", "BatchNorm2d", "GroupNorm", "LayerNorm", "RMSNorm",
           "SyncBatchNorm", "ELU", "GELU", "Dropout", "Dropout2d", "Identity", "LeakyReLU",
           "LogSoftmax", "ReLU", "Sigmoid", "SiLU", "Softmax", "Softplus", "Tanh", "Embedding",
           "MultiheadAttention", "MultiHeadAttention", "GRU", "LSTM", "RNN", "BCELoss",
           "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss", "MSELoss",
           "NLLLoss", "SmoothL1Loss", "Transformer", "TransformerDecoder",
           "TransformerDecoderLayer", "TransformerEncoder", "TransformerEncoderLayer"]
