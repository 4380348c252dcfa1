"""nn.utils.parametrizations: weight_norm and spectral_norm as torch's parametrizations (see
parametrize.py), with torch's state_dict keys: weight_norm's
"parametrizations.weight.original0" (g) and "original1" (v); spectral_norm's
"parametrizations.weight.original" and its power-iteration buffers "parametrizations.weight.0._u"
and "._v".
"""

from ... import functional as F
from ...autograd import no_grad
from ...errors import DimError
from ...tensor import Tensor, randn
from ..module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm"]


def _norm_except_dim(v, dim):
    """torch.norm_except_dim(v, 2, dim): the 2-norm over every dim but `dim` (kept as size 1);
    over all of v (0-d) for dim -1."""
    if dim == -1:
        return v.norm()
    return v.norm(dim=tuple(d for d in range(v.ndim) if d != dim), keepdim=True)


class _WeightNorm(Module):
    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module, name="weight", dim=0):
    """module.<name> = g v / ‖v‖, the norm over every dim but `dim` (over all with None), g and
    v the parameters original0 and original1, as torch's. Returns the module."""
    return parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)


class _SpectralNorm(Module):
    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise DimError(f"spectral_norm: Dimension out of range (expected to be in range of "
                           f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("spectral_norm: Expected n_power_iterations to be positive, but "
                             f"got n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._matrix(weight.detach())
            h, w = mat.shape
            kw = {"dtype": weight.dtype, "backend": weight.backend}
            self.register_buffer("_u", F.normalize(randn(h, **kw), dim=0, eps=eps))
            self.register_buffer("_v", F.normalize(randn(w, **kw), dim=0, eps=eps))
            self._power_method(mat, 15)

    def _matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, mat, n):
        """n steps of power iteration, _u and _v updated in place (torch's out=)."""
        with no_grad():
            for _ in range(n):
                self._u.copy_(F.normalize(mat.mv(self._v), dim=0, eps=self.eps))
                self._v.copy_(F.normalize(mat.transpose(0, 1).mv(self._u), dim=0,
                                          eps=self.eps))

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._matrix(weight)
        if self.training:
            self._power_method(mat.detach(), self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = (u * mat.mv(v)).sum()
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """module.<name> divided by its largest singular value, estimated by power iteration (one
    step a training-mode read; eval reads use the stored _u and _v), as torch's. dim: the
    output dim (ConvTranspose's 1, else 0, by default). Returns the module."""
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"spectral_norm: Module '{type(module).__name__}' has no parameter or "
                         f"buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    return parametrize.register_parametrization(
        module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
