"""torch.nn.utils.weight_norm and spectral_norm in their older, forward-pre-hook form (still in
torch, and in much GAN and vocoder code), with remove_weight_norm and remove_spectral_norm.

weight_norm replaces the parameter `weight` by the parameters weight_g (its norm over every dim
but `dim`, over all of it for dim=None) and weight_v (its direction); spectral_norm moves it to
the parameter weight_orig with the power iteration's vectors as the buffers weight_u and
weight_v. Either way `module.weight` becomes a plain tensor that a forward pre-hook recomputes
before each forward (so, as torch's, it holds the raw weight until the first forward), and the
state dict holds torch's keys. The parametrization forms are nn.utils.parametrizations'.
(torch's state-dict version hook, which migrates checkpoints of before 2018, is not here.)
"""

from ... import functional as F
from ...autograd import no_grad
from ...errors import warn_user
from ...tensor import randn
from ..module import Parameter
from .parametrizations import _norm_except_dim

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


def _refuse_second(module, kind, name):
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, kind) and hook.name == name:
            what = "weight_norm" if kind is _WeightNormHook else "spectral_norm"
            raise RuntimeError(f"Cannot register two {what} hooks on the same parameter {name}")


def _remove(module, kind, name, what):
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")


class _WeightNormHook:
    def __init__(self, name, dim):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.data))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g v / ‖v‖ recomputed before each forward, g and v the parameters
    <name>_g and <name>_v (torch's deprecated form: FutureWarning). Returns the module."""
    warn_user("`torch.nn.utils.weight_norm` is deprecated in favor of "
              "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning)
    _refuse_second(module, _WeightNormHook, name)
    fn = _WeightNormHook(name, dim)
    weight = getattr(module, name)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, fn.dim).data))
    module.register_parameter(name + "_v", Parameter(weight.data))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Put <name> back as one Parameter holding g v / ‖v‖. Returns the module."""
    return _remove(module, _WeightNormHook, name, "weight_norm")


class _SpectralNormHook:
    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.eps = name, dim, eps
        self.n_power_iterations = n_power_iterations

    def matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.matrix(weight)
        if do_power_iteration:
            with no_grad():  # (the buffers updated in place: torch's out=)
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(mat.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(mat.mv(v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()
        sigma = u.dot(mat.mv(v))
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        for suffix in ("", "_u", "_v", "_orig"):
            delattr(module, self.name + suffix)
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> divided by its largest singular value, estimated by power iteration (one
    step per training-mode forward) before each forward; the parameter becomes <name>_orig and
    the vectors the buffers <name>_u, <name>_v. dim: ConvTranspose's 1, else 0, by default.
    Returns the module."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    _refuse_second(module, _SpectralNormHook, name)
    fn = _SpectralNormHook(name, n_power_iterations, dim, eps)
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    with no_grad():
        h, w = fn.matrix(weight).shape
        kw = {"dtype": weight.dtype, "backend": weight.backend}
        u = F.normalize(randn(h, **kw), dim=0, eps=eps)
        v = F.normalize(randn(w, **kw), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.data)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Put <name> back as one Parameter holding weight_orig / σ (σ from the stored vectors).
    Returns the module."""
    return _remove(module, _SpectralNormHook, name, "spectral_norm")
