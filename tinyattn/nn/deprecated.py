"""torch's deprecated nn names, kept for old code: NLLLoss2d (NLLLoss itself, which takes
(N, C, d1, d2, ...) input) and Container (a Module whose keyword arguments become its
children). Making either warns (FutureWarning, torch's words)."""

from ..errors import warn_user
from .loss import NLLLoss
from .module import Module


class NLLLoss2d(NLLLoss):
    """torch's deprecated alias of NLLLoss (the same arguments and values)."""

    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        warn_user("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in "
                  "replacement and see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss "
                  "for more details.", FutureWarning)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class Container(Module):
    """torch's deprecated Module: Container(name=module, ...) registers each as a child."""

    def __init__(self, **kwargs):
        warn_user("`nn.Container` is deprecated. All of its functionality is now implemented in "
                  "`nn.Module`. Subclass that instead.", FutureWarning)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)

    def forward(self, *input):  # noqa: A002 - torch's (a Module without a forward of its own)
        return Module.forward(self, *input)
