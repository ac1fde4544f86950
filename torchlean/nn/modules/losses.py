"""torch.nn's loss modules: each keeps its options and calls its functional form in
torchlean.nn.loss_functions."""
from __future__ import annotations

from torchlean.nn import loss_functions as L
from torchlean.nn.modules.base import Module


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        allowed = L.REDUCTIONS + (("batchmean",) if isinstance(self, KLDivLoss) else ())
        self.reduction = L.check_reduction(type(self).__name__, reduction, allowed)


class _PointwiseLoss(_Loss):
    """A loss of an input and a target of the same shape: a mismatch raises naming the module."""

    def __call__(self, input, target):
        L.check_same_shape(type(self).__name__, input, target)
        return self.forward(input, target)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        self.weight = weight


class MSELoss(_PointwiseLoss):
    def forward(self, input, target):
        return L.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_PointwiseLoss):
    def forward(self, input, target):
        return L.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_PointwiseLoss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(size_average, reduce, reduction)
        if not float(beta) >= 0.0:
            raise ValueError(f"SmoothL1Loss: beta must be >= 0, got {beta}")
        self.beta = float(beta)

    def forward(self, input, target):
        return L.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_PointwiseLoss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        if not float(delta) > 0.0:
            raise ValueError(f"HuberLoss: delta must be > 0, got {delta}")
        self.delta = float(delta)

    def forward(self, input, target):
        return L.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_PointwiseLoss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = bool(log_target)

    def forward(self, input, target):
        return L.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class BCELoss(_WeightedLoss, _PointwiseLoss):
    def forward(self, input, target):
        return L.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_WeightedLoss, _PointwiseLoss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(weight, size_average, reduce, reduction)
        self.pos_weight = pos_weight

    def forward(self, input, target):
        return L.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, input, target):
        return L.nll_loss(input, target, self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(weight, size_average, reduce, reduction)
        if not 0.0 <= float(label_smoothing) <= 1.0:
            raise ValueError(f"CrossEntropyLoss: label_smoothing must be in [0, 1], got "
                             f"{label_smoothing}")
        self.ignore_index, self.label_smoothing = int(ignore_index), float(label_smoothing)

    def forward(self, input, target):
        return L.cross_entropy(input, target, self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)
