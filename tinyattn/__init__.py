"""tinyattn: a small, readable reverse-mode autograd engine built around attention.

    import tinyattn as ta
    x = ta.randn(4, 8, requires_grad=True)
    loss = ta.functional.softmax(x @ x.T, dim=-1).sum()
    loss.backward()          # x.grad now holds d loss / d x

The public names are listed here explicitly; see DESIGN.md for the map of the package.
"""

from .autograd import enable_grad, is_grad_enabled, no_grad  # first: tensor.py needs it loaded
from .backends import get_backend, set_backend, use_backend
from .dtypes import get_default_dtype, set_default_dtype
from .errors import (BackendError, CheckpointError, DimError, DTypeError, GradcheckError,
                     GraphError, ShapeError, TinyattnError)
from .tensor import (Tensor, arange, bool_, float16, float32, float64, full, int32, int64,
                     manual_seed, ones, ones_like, rand, randn, tensor, zeros, zeros_like)
from . import functional  # noqa: E402,I001 - after Tensor exists
from .functional import cat, log_softmax, matmul, softmax, stack, where  # torch.cat and friends
from . import nn, optim  # noqa: E402
from .anomaly import AnomalyError, AnomalyWarning, detect_anomaly
from .gradcheck import check_gradients, gradcheck
from .graphcheck import check_graph, gradcheck_graph, record
from .serialization import load, save
from . import viz  # noqa: E402
from .explain import explain

__version__ = "0.1.0"

__all__ = [
    "Tensor", "tensor", "zeros", "ones", "full", "randn", "rand", "arange", "zeros_like",
    "ones_like", "cat", "stack", "where", "matmul", "softmax", "log_softmax",
    "manual_seed", "float16", "float32", "float64", "int32", "int64", "bool_",
    "get_default_dtype", "set_default_dtype",
    "no_grad", "enable_grad", "is_grad_enabled", "gradcheck", "check_gradients", "functional",
    "get_backend", "set_backend", "use_backend", "nn", "optim", "save", "load", "TinyattnError",
    "ShapeError", "DimError",
    "DTypeError", "BackendError", "GraphError", "GradcheckError", "CheckpointError",
    "viz", "explain",
    "detect_anomaly", "AnomalyError", "AnomalyWarning", "record", "gradcheck_graph", "check_graph",
]
