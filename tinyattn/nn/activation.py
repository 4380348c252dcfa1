"""The activation modules, with PyTorch's names and constructor arguments: each one calls one
function of tinyattn.functional (whose op holds the math and the VJP, in tinyattn/ops/).

A module's settings are attributes read at every call (so `m.inplace = True` takes effect) and
shown by repr as PyTorch shows them (inplace only when it is True).
"""

from .. import functional as F
from .module import Module


class _Activation(Module):
    """forward(input) = fn(input, *settings): `fn` a tinyattn.functional function, `settings`
    the names of its further arguments, in order, each an attribute of the module."""

    fn = None
    settings = ()

    def forward(self, input):  # noqa: A002 - torch's argument name
        return type(self).fn(input, *(getattr(self, k) for k in self.settings))

    def extra_repr(self):
        shown = [f"{k}={getattr(self, k)!r}" for k in self.settings if k != "inplace"]
        if "inplace" in self.settings and self.inplace:
            shown.append("inplace=True")
        return ", ".join(shown)


class _InPlace(_Activation):
    """An activation whose only setting is torch's `inplace`."""

    settings = ("inplace",)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class _NoSettings(_Activation):
    pass


class _Dim(_Activation):
    """An activation along one dim (GLU; softmax and its kin, via _ImplicitDim): dim=-1, the
    last, by default."""

    settings = ("dim",)

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim


class ReLU(_InPlace):
    fn = staticmethod(F.relu)


class ReLU6(_InPlace):
    fn = staticmethod(F.relu6)


class SELU(_InPlace):
    fn = staticmethod(F.selu)


class SiLU(_InPlace):
    """x * sigmoid(x) (also called swish)."""

    fn = staticmethod(F.silu)


class Mish(_InPlace):
    fn = staticmethod(F.mish)


class Hardsigmoid(_InPlace):
    fn = staticmethod(F.hardsigmoid)


class Hardswish(_InPlace):
    fn = staticmethod(F.hardswish)


class LeakyReLU(_Activation):
    fn, settings = staticmethod(F.leaky_relu), ("negative_slope", "inplace")

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace


class ELU(_Activation):
    fn, settings = staticmethod(F.elu), ("alpha", "inplace")

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace


class CELU(ELU):
    fn = staticmethod(F.celu)


class Hardtanh(_Activation):
    fn, settings = staticmethod(F.hardtanh), ("min_val", "max_val", "inplace")

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace


class Softplus(_Activation):
    fn, settings = staticmethod(F.softplus), ("beta", "threshold")

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold


class GELU(_Activation):
    """x Φ(x); approximate="tanh" uses GPT-2's tanh formula."""

    fn, settings = staticmethod(F.gelu), ("approximate",)

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate


class Tanh(_NoSettings):
    fn = staticmethod(F.tanh)


class Sigmoid(_NoSettings):
    fn = staticmethod(F.sigmoid)


class LogSigmoid(_NoSettings):
    fn = staticmethod(F.logsigmoid)


class Softsign(_NoSettings):
    fn = staticmethod(F.softsign)


class _ImplicitDim(_Dim):
    """Softmax and its kin: dim=None by default, as torch's modules, which then take torch's
    legacy implicit dim (0 for 0-, 1- and 3-D inputs, else 1; F.softmax's rule) with its
    deprecation warning. Give dim (dim=-1: the last) to choose."""

    def __init__(self, dim=None):
        super().__init__(dim)

    def forward(self, input):  # noqa: A002 - torch's argument name
        fn = type(self).fn
        # (stacklevel 4: the warning points at the line that called the module)
        dim = F._softmax_dim(self.dim, F._t(input).ndim, fn.__name__, stacklevel=4)
        return fn(input, dim)


class Softmax(_ImplicitDim):
    fn = staticmethod(F.softmax)


class LogSoftmax(_ImplicitDim):
    fn = staticmethod(F.log_softmax)


class Softmin(_ImplicitDim):
    fn = staticmethod(F.softmin)


class GLU(_Dim):
    """The gated linear unit along dim (the last by default, as torch's GLU(dim=-1))."""

    fn = staticmethod(F.glu)
