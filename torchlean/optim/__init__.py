"""Optimizers over Parameters (state on device, fused kernels) and learning-rate schedulers,
named and shaped as torch.optim."""
from torchlean.optim.optimizer import Optimizer, SGD, Adam, AdamW
from torchlean.optim.adaptive import RMSprop, Adagrad
from torchlean.optim import lr_scheduler
from torchlean.optim.hooks import register_optimizer_step_post_hook

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "lr_scheduler",
           "register_optimizer_step_post_hook"]
