"""Neural-network modules over torchlean.session (parameters live as device mirrors)."""
from torchlean.nn.modules import (Module, Sequential, Linear, Conv2d, ConvTranspose2d, MaxPool2d,
                                  AvgPool2d, LayerNorm, BatchNorm2d, Dropout, GELU, ReLU, Tanh,
                                  Sigmoid, Embedding, MultiHeadAttention, SpectralConv1d, Flatten)
from torchlean.nn.modules import (ModuleList, ModuleDict, Conv1d, Conv3d, BatchNorm1d, RMSNorm,
                                  GroupNorm, AdaptiveAvgPool2d, MSELoss, CrossEntropyLoss,
                                  Softplus, AdaptiveMaxPool2d)
from torchlean.nn.modules import SyncBatchNorm
from torchlean.nn import functional, init, utils
from torchlean.nn.checkpoint import save_file, load_file
from torchlean.session import Parameter
from torchlean.nn.modules import Unflatten
from torchlean.nn.modules import (L1Loss, SmoothL1Loss, HuberLoss, KLDivLoss, BCELoss,
                                  BCEWithLogitsLoss, NLLLoss)
from torchlean.nn.modules import (Identity, SiLU, LeakyReLU, ELU, Dropout2d, Softmax,
                                  LogSoftmax)
from torchlean.nn.modules import (Upsample, MaxPool1d, AvgPool1d, MaxPool3d, AvgPool3d,
                                  AdaptiveAvgPool1d, AdaptiveMaxPool1d)
from torchlean.nn.modules import RNN, LSTM, GRU
from torchlean.nn.modules import MultiheadAttention
from torchlean.nn.modules import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                                  TransformerEncoder, TransformerEncoderLayer)

__all__ = ["Module", "Sequential", "Linear", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d",
           "LayerNorm", "BatchNorm2d", "Dropout", "GELU", "ReLU", "Tanh", "Sigmoid", "Embedding",
           "MultiHeadAttention", "SpectralConv1d", "Flatten", "Parameter", "functional", "init", "utils",
           "save_file", "load_file", "ModuleList", "ModuleDict", "Conv1d", "Conv3d", "BatchNorm1d",
           "RMSNorm", "GroupNorm", "AdaptiveAvgPool2d", "MSELoss", "CrossEntropyLoss", "Softplus",
           "AdaptiveMaxPool2d", "SyncBatchNorm", "Unflatten", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "KLDivLoss", "BCELoss", "BCEWithLogitsLoss", "NLLLoss", "Identity", "SiLU", "LeakyReLU",
           "ELU", "Dropout2d", "Softmax", "LogSoftmax", "Upsample", "MaxPool1d", "AvgPool1d",
           "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveMaxPool1d", "RNN", "LSTM", "GRU",
           "MultiheadAttention", "Transformer", "TransformerDecoder", "TransformerDecoderLayer",
           "TransformerEncoder", "TransformerEncoderLayer"]
