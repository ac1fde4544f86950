"""Optimizers over Parameters (state on device, fused kernels) and learning-rate schedulers,
named and shaped as torch.optim."""
from torchlean.optim.optimizer import Optimizer, SGD, Adam, AdamW
from torchlean.optim.adaptive import RMSprop, Adagrad
from torchlean.optim import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler"]
