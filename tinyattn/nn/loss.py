"""Loss modules: each holds its settings and calls the function of the same name in
tinyattn.functional (MSELoss -> F.mse_loss, CrossEntropyLoss -> F.cross_entropy, ...).

Class weights are buffers, as in PyTorch: they move with `to()` and sit in the state dict.
"""

from .. import functional as F
from .module import Module


class _Loss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    def forward(self, input, target):  # noqa: A002 - PyTorch's argument name
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, reduction="mean", beta=1.0):
        super().__init__(reduction)
        self.beta = beta

    def forward(self, input, target):  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input, target):  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class NLLLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):  # noqa: A002
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):  # noqa: A002
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)


class BCELoss(_Loss):
    def __init__(self, weight=None, reduction="mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight, self.reduction,
                                                  self.pos_weight)


class KLDivLoss(_Loss):
    def __init__(self, reduction="mean", log_target=False):
        super().__init__(reduction)
        self.log_target = log_target

    def forward(self, input, target):  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
