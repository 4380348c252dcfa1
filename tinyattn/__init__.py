"""tinyattn: a small, readable reverse-mode autograd engine built around attention.

    import tinyattn as ta
    x = ta.randn(4, 8, requires_grad=True)
    loss = ta.functional.softmax(x @ x.T, dim=-1).sum()
    loss.backward()          # x.grad now holds d loss / d x

The public names are listed here explicitly; see DESIGN.md for the map of the package.
"""

from . import functional, nn, optim, viz
from .anomaly import AnomalyError, AnomalyWarning, debug_from_environment, detect_anomaly
from .autograd import enable_grad, is_grad_enabled, no_grad
from .backends import get_backend, set_backend, use_backend
from .dtypes import get_default_dtype, set_default_dtype
from .errors import (
    BackendError,
    CheckpointError,
    DimError,
    DTypeError,
    GradcheckError,
    GraphError,
    ShapeError,
    TinyattnError,
)
from .explain import explain
from .functional import cat, log_softmax, matmul, softmax, stack, where  # torch.cat and friends
from .gradcheck import check_gradients, gradcheck
from .graphcheck import check_graph, gradcheck_graph, record
from .serialization import load, save
from .tensor import (
    Tensor,
    arange,
    bool_,
    float16,
    float32,
    float64,
    full,
    int32,
    int64,
    manual_seed,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    zeros,
    zeros_like,
)

__version__ = "0.1.0"

debug_from_environment()  # TINYATTN_DEBUG=1: anomaly detection everywhere

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
