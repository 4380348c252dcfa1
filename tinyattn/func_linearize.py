"""torch.func.linearize for tinyattn (ta.func.linearize): func's output at the primals and a
function that gives its Jacobian-vector product there for any tangents.

torch traces the JVP once into a graph and replays it; here jvp_fn(*tangents) runs func.jvp
at the saved primals (reverse mode, see tinyattn/func.py), after torch's checks: the tangents
must have the primals' structure (a tuple of pytrees), and each leaf the shape, dtype and
device of its primal (RuntimeError otherwise, as torch's).
"""

from .autograd import no_grad
from .errors import DTypeError, ShapeError, fmt_shape
from .func import _flatten, jvp

__all__ = ["linearize"]


class TangentError(DTypeError, RuntimeError):
    """A tangent whose dtype or device is not its primal's (a RuntimeError, as torch's)."""


def linearize(func, *primals):
    """(func(*primals), jvp_fn) with jvp_fn(*tangents) = J(primals)·tangents, as torch's."""
    with no_grad():  # (the output off the graph, as torch's)
        output = func(*primals)
    leaves, spec = _flatten(primals)
    meta = [(tuple(x.shape), x.dtype, str(x.device)) for x in leaves]

    def jvp_fn(*tangents):
        t_leaves, t_spec = _flatten(tangents)
        if t_spec != spec:
            raise ShapeError(f"linearize: expected the tangents {t_spec} to have the same "
                             f"argspec as the primals {spec}")
        for i, (t, (shape, dtype, device)) in enumerate(zip(t_leaves, meta, strict=True)):
            if tuple(t.shape) != shape:
                raise ShapeError(f"linearize: tangent:{i} with shape {fmt_shape(t.shape)} in "
                                 f"flattened pytree doesn't match the shape {fmt_shape(shape)} "
                                 "of the corresponding primal.")
            if t.dtype != dtype or str(t.device) != device:
                raise TangentError(f"linearize: tangent:{i} with dtype {t.dtype} on {t.device} "
                                   f"in flattened pytree doesn't match the dtype {dtype} on "
                                   f"{device} of the corresponding primal.")
        return jvp(func, primals, tangents)[1]

    return output, jvp_fn
