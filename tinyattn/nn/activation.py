"""The activation modules, with PyTorch's names and constructor arguments: each one calls one
function of tinyattn.functional (whose op holds the math and the VJP, in tinyattn/ops/).

A module's settings are attributes read at every call (so `m.inplace = True` takes effect) and
shown by repr as PyTorch shows them (inplace only when it is True).
"""

from .. import functional as F
from ..errors import ShapeError
from ..tensor import full
from .init import constant_
from .module import Module, Parameter


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
        if not max_val > min_val:  # (torch's check: F.hardtanh takes them equal, the module not)
            raise ValueError(f"{type(self).__name__}: max_val ({max_val}) must be greater than "
                             f"min_val ({min_val})")
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
        dim = F._softmax_dim(self.dim, F._t(input).ndim, fn.__name__)
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


class Tanhshrink(_NoSettings):
    fn = staticmethod(F.tanhshrink)


class Threshold(_Activation):
    """value where x <= threshold, else x."""

    fn, settings = staticmethod(F.threshold), ("threshold", "value", "inplace")

    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace


class Softshrink(_Activation):
    fn, settings = staticmethod(F.softshrink), ("lambd",)

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def extra_repr(self):
        return str(self.lambd)  # torch's: Softshrink(0.5)


class Hardshrink(Softshrink):
    fn = staticmethod(F.hardshrink)


class RReLU(_Activation):
    """Leaky relu with a random slope U(lower, upper) per entry in training mode, the mean
    slope (lower + upper) / 2 in eval mode."""

    settings = ("lower", "upper", "inplace")

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)


class PReLU(Module):
    """x where x > 0, else weight * x, with weight learned: one slope (num_parameters=1) or
    one per channel (dim 1 of the input), each starting at `init`."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(full((num_parameters,), init, dtype=dtype))
        if device is not None:
            self.to(device)

    def reset_parameters(self):
        """Every slope back to `init` (0.25 by default), in place, as torch's."""
        constant_(self.weight, self.init)

    def forward(self, input):  # noqa: A002 - torch's argument name
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Softmax2d(Module):
    """softmax over the channels (dim -3) of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):  # noqa: A002 - torch's argument name
        ndim = F._t(input).ndim
        if ndim not in (3, 4):
            raise ShapeError(f"Softmax2d: expected input to be 3D or 4D, got {ndim}D instead")
        return F.softmax(input, -3)
