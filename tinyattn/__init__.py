"""tinyattn: a small, readable reverse-mode autograd engine built around attention.

    import tinyattn as ta
    x = ta.randn(4, 8, requires_grad=True)
    loss = ta.functional.softmax(x @ x.T, dim=-1).sum()
    loss.backward()          # x.grad now holds d loss / d x

The public names are listed here explicitly; see DESIGN.md for the map of the package.
"""

import sys

import numpy as np

from . import (
    accelerator,
    amp,
    autograd,
    autograd_functional,
    autograd_graph,
    cuda,
    distributions,
    func,
    function,
    functional,
    higher_order,  # noqa: F401 (sets autograd's create_graph walk)
    linalg,
    nn,
    optim,
    special,
    testing,
    utils,
    viz,
)
from .anomaly import (
    AnomalyError,
    AnomalyWarning,
    debug_from_environment,
    detect_anomaly,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from .autograd import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
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
    StateDictError,
    TinyattnError,
)
from .explain import explain
from .function import Function, FunctionCtx
from .functional import (  # torch.cat and friends
    atleast_1d,
    atleast_2d,
    atleast_3d,
    cat,
    celu,
    celu_,
    cosine_similarity,
    hardshrink,
    log_softmax,
    matmul,
    pairwise_distance,
    prelu,
    relu_,
    rrelu,
    rrelu_,
    selu,
    selu_,
    softmax,
    stack,
    threshold,
    threshold_,
    where,
)
from .generator import Generator, default_generator
from .gradcheck import check_gradients, gradcheck, gradgradcheck
from .graphcheck import check_graph, gradcheck_graph, record
from .replay import CapturedStep, capture
from .return_types import Size
from .routines import FOREACH as _FOREACH  # torch._foreach_* (set below)
from .routines import (  # torch.exp, torch.sum, ... as functions
    _method,
    abs,  # noqa: A004 - torch's name
    acos,
    acosh,
    add,
    addbmm,
    addcdiv,
    addcmul,
    addmm,
    addmv,
    addr,
    all,  # noqa: A004 - torch's name
    allclose,
    amax,
    amin,
    aminmax,
    any,  # noqa: A004 - torch's name
    arccos,
    arccosh,
    arcsin,
    arcsinh,
    arctan,
    arctan2,
    arctanh,
    argmax,
    argmin,
    argsort,
    argwhere,
    asin,
    asinh,
    atan,
    atan2,
    atanh,
    baddbmm,
    bincount,
    bitwise_and,
    bitwise_left_shift,
    bitwise_not,
    bitwise_or,
    bitwise_right_shift,
    bitwise_xor,
    block_diag,
    bmm,
    broadcast_tensors,
    broadcast_to,
    bucketize,
    can_cast,
    cartesian_prod,
    cdist,
    ceil,
    chain_matmul,
    chunk,
    clamp,
    clamp_max,
    clamp_min,
    clip,
    clone,
    column_stack,
    combinations,
    complex,  # noqa: A004 - torch's name (refused: no complex numbers)
    concat,
    concatenate,
    conj,
    copysign,
    cos,
    cosh,
    count_nonzero,
    cross,
    cummax,
    cummin,
    cumprod,
    cumsum,
    cumulative_trapezoid,
    deg2rad,
    det,
    detach,
    diag,
    diag_embed,
    diagflat,
    diagonal,
    diagonal_scatter,
    diff,
    digamma,
    dist,
    div,
    divide,
    dot,
    dsplit,
    dstack,
    einsum,
    eq,
    equal,
    erf,
    erfc,
    erfinv,
    exp,
    exp2,
    expm1,
    finfo,
    fix,
    flatten,
    flip,
    fliplr,
    flipud,
    float_power,
    floor,
    floor_divide,
    fmax,
    fmin,
    fmod,
    frac,
    gather,
    gcd,
    ge,
    ger,
    greater,
    greater_equal,
    gt,
    heaviside,
    histc,
    histogram,
    hsplit,
    hstack,
    hypot,
    iinfo,
    imag,
    index_select,
    inner,
    inverse,
    is_complex,
    is_conj,
    is_floating_point,
    is_tensor,
    isclose,
    isfinite,
    isin,
    isinf,
    isnan,
    isneginf,
    isposinf,
    isreal,
    kron,
    kthvalue,
    lcm,
    le,
    lerp,
    less,
    less_equal,
    lgamma,
    log,
    log1p,
    log2,
    log10,
    logaddexp,
    logaddexp2,
    logcumsumexp,
    logdet,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    logit,
    logsumexp,
    lt,
    masked_select,
    matrix_power,
    max,  # noqa: A004 - torch's name
    maximum,
    mean,
    median,
    meshgrid,
    min,  # noqa: A004 - torch's name
    minimum,
    mm,
    moveaxis,
    movedim,
    msort,
    mul,
    multiply,
    mv,
    nan_to_num,
    nanmean,
    nanmedian,
    nanquantile,
    nansum,
    narrow,
    ne,
    neg,
    negative,
    nonzero,
    norm,
    not_equal,
    numel,
    outer,
    permute,
    polar,
    positive,
    pow,  # noqa: A004 - torch's name
    prod,
    promote_types,
    quantile,
    rad2deg,
    ravel,
    real,
    reciprocal,
    relu,
    remainder,
    repeat_interleave,
    reshape,
    resolve_conj,
    result_type,
    roll,
    rot90,
    round,  # noqa: A004 - torch's name
    row_stack,
    rsqrt,
    scatter,
    scatter_add,
    scatter_reduce,
    searchsorted,
    select,
    select_scatter,
    sgn,
    sigmoid,
    sign,
    signbit,
    sin,
    sinc,
    sinh,
    slice_scatter,
    slogdet,
    sort,
    split,
    sqrt,
    square,
    squeeze,
    std,
    std_mean,
    sub,
    subtract,
    sum,  # noqa: A004 - torch's name
    swapaxes,
    swapdims,
    t,
    take,
    take_along_dim,
    tan,
    tanh,
    tensor_split,
    tensordot,
    tile,
    topk,
    trace,
    transpose,
    trapezoid,
    trapz,
    tril,
    tril_indices,
    triu,
    triu_indices,
    true_divide,
    trunc,
    unbind,
    unflatten,
    unique,
    unique_consecutive,
    unsqueeze,
    var,
    var_mean,
    view_as_complex,
    view_as_real,
    vsplit,
    vstack,
    xlogy,
)
from .routines_linalg import METHODS as _LINALG_METHODS  # x.svd(), x.cov(), ... (set below)
from .routines_linalg import (  # torch.svd, torch.qr, torch.lu, ... (routines_linalg.py)
    cholesky,
    frobenius_norm,
    lu,
    lu_solve,
    lu_unpack,
    matrix_exp,
    nuclear_norm,
    pdist,
    pinverse,
    qr,
    svd,
    triangular_solve,
    vdot,
)
from .routines_more import INPLACE as _INPLACE  # torch.sin_(x), ... (set below)
from .routines_more import (  # torch's windows, cov, gradient, ... (routines_more.py)
    absolute,
    adjoint,
    bartlett_window,
    blackman_window,
    broadcast_shapes,
    cholesky_inverse,
    cholesky_solve,
    corrcoef,
    cov,
    fill,
    frexp,
    gradient,
    hamming_window,
    hann_window,
    igamma,
    igammac,
    is_inference,
    is_nonzero,
    is_same_size,
    is_signed,
    kaiser_window,
    ldexp,
    ldexp_,
    mvlgamma,
    nextafter,
    renorm,
    rsub,
    scalar_tensor,
    split_with_sizes,
    unravel_index,
    unsafe_chunk,
    unsafe_split,
    unsafe_split_with_sizes,
    vander,
)
from .routines_nn import (  # torch.conv1d, torch.layer_norm, ... (routines_nn.py)
    adaptive_avg_pool1d,
    adaptive_max_pool1d,
    alpha_dropout,
    alpha_dropout_,
    avg_pool1d,
    batch_norm,
    bilinear,
    binary_cross_entropy_with_logits,
    channel_shuffle,
    constant_pad_nd,
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    cosine_embedding_loss,
    ctc_loss,
    dropout,
    dropout_,
    embedding,
    embedding_bag,
    feature_alpha_dropout,
    feature_alpha_dropout_,
    feature_dropout,
    feature_dropout_,
    group_norm,
    hinge_embedding_loss,
    instance_norm,
    kl_div,
    layer_norm,
    margin_ranking_loss,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool3d,
    native_channel_shuffle,
    pixel_shuffle,
    pixel_unshuffle,
    poisson_nll_loss,
    rms_norm,
    triplet_margin_loss,
)
from .runtime import (  # torch's setup calls: seeds, determinism, threads, legacy types
    BoolTensor,
    ByteTensor,
    CharTensor,
    DoubleTensor,
    FloatTensor,
    HalfTensor,
    IntTensor,
    LongTensor,
    ShortTensor,
    are_deterministic_algorithms_enabled,
    compile,  # noqa: A004 - torch's name
    get_float32_matmul_precision,
    get_num_threads,
    get_rng_state,
    initial_seed,
    is_deterministic_algorithms_warn_only_enabled,
    seed,
    set_float32_matmul_precision,
    set_num_threads,
    set_rng_state,
    use_deterministic_algorithms,
)
from .serialization import load, save
from .tensor import (
    Device,
    Tensor,
    TypedStorage,
    UntypedStorage,
    arange,
    as_tensor,
    asarray,
    bernoulli,
    bool_,
    channels_last,
    channels_last_3d,
    contiguous_format,
    empty,
    empty_like,
    eye,
    float16,
    float32,
    float64,
    from_numpy,
    frombuffer,
    full,
    full_like,
    int32,
    int64,
    linspace,
    logspace,
    manual_seed,
    memory_format,
    multinomial,
    normal,
    ones,
    ones_like,
    preserve_format,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    tensor,
    zeros,
    zeros_like,
)

__version__ = "0.1.0"

device = Device  # torch's name: ta.device("cpu") == x.device

# torch's functions for Tensor methods that routines.py has no function for (each the method on
# its first argument, as routines.py's)
masked_fill, masked_scatter, index_add, index_copy, index_fill, index_put, mode, put = (
    _method(n) for n in ("masked_fill", "masked_scatter", "index_add", "index_copy",
                         "index_fill", "index_put", "mode", "put"))
as_strided = _method("as_strided")
index_reduce = _method("index_reduce")
globals().update(_FOREACH)  # torch._foreach_mul_, _foreach_add_, ... (routines.py)
globals().update(_INPLACE)  # torch.sin_(x), torch.clamp_(x, ...), ... (routines_more.py)
for _name, _fn in _LINALG_METHODS.items():  # x.svd(), x.cov(), x.ldexp_() (routines_linalg.py)
    setattr(Tensor, _name, _fn)
polygamma, i0 = special.polygamma, special.i0  # torch.polygamma(n, x), torch.i0 (special.py)

# torch's other names for the dtypes (dtype=ta.long, mask.to(ta.bool)). Bound here, not in
# tensor.py, where `float`, `int` and `bool` must stay Python's own (nothing below uses them).
# Each is the np.dtype object a tensor's .dtype gives (as tensor.py's float32 ...), so that it
# hashes as it compares: x.dtype in {ta.long, ta.int}, {ta.float: ...}[x.dtype]. `dtype` is
# their class, NumPy's (isinstance(x.dtype, ta.dtype), as torch.dtype; its attributes are
# NumPy's: .itemsize and .kind, not torch's .is_floating_point).
dtype = np.dtype
half, double, long, short, int8, int16, uint8 = (
    float16, float64, int64, np.dtype(np.int16), np.dtype(np.int8), np.dtype(np.int16),
    np.dtype(np.uint8))
float = float32  # noqa: A001 - torch's name
int = int32  # noqa: A001 - torch's name
bool = bool_  # noqa: A001 - torch's name

autograd.Function = Function  # torch's place for it: ta.autograd.Function (function.py)
autograd.functional = autograd_functional  # ta.autograd.functional.jacobian, vjp, jvp
sys.modules[__name__ + ".autograd.functional"] = autograd_functional  # (an import line works)
from .func_linearize import linearize as _linearize  # noqa: E402

func.linearize = _linearize  # ta.func.linearize (func_linearize.py: func.py is full)
autograd.graph = autograd_graph  # ta.autograd.graph.Node, register_multi_grad_hook...
sys.modules[__name__ + ".autograd.graph"] = autograd_graph
autograd.FunctionCtx = FunctionCtx
autograd.function = function  # ta.autograd.function.once_differentiable, as torch's
sys.modules[__name__ + ".autograd.function"] = function
autograd.once_differentiable = function.once_differentiable
autograd.gradcheck, autograd.gradgradcheck = gradcheck, gradgradcheck  # torch's places
autograd.detect_anomaly, autograd.set_detect_anomaly = detect_anomaly, set_detect_anomaly
autograd.is_anomaly_enabled = is_anomaly_enabled
autograd.is_anomaly_check_nan_enabled = is_anomaly_check_nan_enabled
debug_from_environment()  # TINYATTN_DEBUG=1: anomaly detection everywhere

__all__ = [
    "Tensor", "device", "tensor", "zeros", "ones", "full", "randn", "rand", "arange", "zeros_like",
    "ones_like", "cat", "stack", "where", "matmul", "softmax", "log_softmax",
    "manual_seed", "float16", "float32", "float64", "int32", "int64", "bool_", "half", "float",
    "double", "int8", "int16", "short", "int", "long", "uint8", "bool", "dtype",
    "get_default_dtype", "set_default_dtype", "finfo", "iinfo", "can_cast",
    "no_grad", "enable_grad", "inference_mode", "set_grad_enabled", "is_grad_enabled",
    "is_inference_mode_enabled", "gradcheck", "gradgradcheck", "check_gradients", "functional",
    "get_backend", "set_backend", "use_backend", "nn", "optim", "save", "load", "TinyattnError",
    "ShapeError", "DimError",
    "DTypeError", "BackendError", "GraphError", "GradcheckError", "CheckpointError",
    "StateDictError",
    "viz", "explain", "autograd", "Function", "FunctionCtx",
    "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
    "AnomalyError", "AnomalyWarning", "record", "gradcheck_graph", "check_graph",
    "capture", "CapturedStep", "Generator", "default_generator", "utils", "distributions", "cuda",
    "testing", "linalg", "func",
    # creation (tensor.py) and torch's module-level functions (routines.py)
    "as_tensor", "asarray", "randint_like",
    "bernoulli", "empty", "empty_like", "eye", "from_numpy", "full_like", "linspace",
    "logspace", "multinomial", "normal", "rand_like", "randint", "randn_like", "randperm",
    "abs", "acos", "acosh", "add", "all", "allclose", "amax", "amin", "any", "arccos", "arccosh",
    "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "argmax", "argmin", "argsort", "argwhere",
    "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_left_shift", "bitwise_not",
    "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "chunk", "clamp", "clamp_max",
    "clamp_min", "clip", "clone", "concat", "concatenate", "copysign", "cos", "cosh", "cummax",
    "cummin", "cumprod", "cumsum", "detach", "diag", "diagonal", "div", "divide", "einsum", "eq",
    "dot", "erf", "exp", "exp2", "expm1", "fix", "flatten", "flip", "floor", "floor_divide", "fmod",
    "frac", "gather", "ge", "gt", "hypot", "index_select", "isclose", "isfinite", "isinf", "isnan",
    "kthvalue", "le", "lerp", "log", "log10", "log1p", "log2", "logaddexp", "logcumsumexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp", "lt", "masked_select",
    "max", "maximum", "mean", "median", "meshgrid", "min", "minimum", "moveaxis", "movedim", "mul",
    "multiply", "narrow", "ne", "neg", "negative", "nonzero", "norm", "permute", "pow", "prod",
    "reciprocal", "relu", "remainder", "repeat_interleave", "reshape", "roll", "round", "rsqrt",
    "scatter", "scatter_add", "scatter_reduce", "sigmoid", "sign", "sin", "sinh", "sort", "split",
    "sqrt", "square", "squeeze", "std", "std_mean", "sub", "subtract", "sum", "swapaxes",
    "swapdims", "t", "take_along_dim", "tan", "tanh", "tile", "topk", "transpose", "tril", "triu",
    "true_divide", "trunc", "unbind", "unflatten", "unique", "unsqueeze", "var", "var_mean",
    "addcdiv", "addcmul", "aminmax", "bmm", "count_nonzero", "diff", "equal", "fmax", "fmin", "ger",
    "greater", "greater_equal", "less", "less_equal", "mm", "mv", "nan_to_num", "not_equal",
    "outer", "positive", "select", "take", "trace", "broadcast_tensors", "broadcast_to",
    "bucketize", "cdist", "hstack", "is_floating_point", "is_tensor", "logit", "numel",
    "promote_types", "result_type", "searchsorted", "tril_indices", "triu_indices", "vstack",
    "nansum", "nanmean", "xlogy", "logaddexp2", "float_power", "deg2rad", "rad2deg", "sinc",
    "isposinf", "isneginf", "signbit", "addmm", "addmv", "addr", "baddbmm", "addbmm", "inner",
    "cross", "dist", "msort", "fliplr", "flipud", "rot90", "tensor_split", "diagflat",
    "column_stack", "diag_embed", "dstack", "ravel", "row_stack", "masked_fill", "masked_scatter",
    "index_add", "index_copy", "index_fill", "index_put", "mode", "put", "cosine_similarity",
    "pairwise_distance", "atleast_1d", "atleast_2d", "atleast_3d",
    "celu", "celu_", "hardshrink", "prelu", "relu_", "rrelu", "rrelu_", "selu", "selu_",
    "threshold", "threshold_", "sgn", "isreal",
    "Size", "memory_format", "contiguous_format", "preserve_format", "channels_last",
    "channels_last_3d", "isin", "bincount", "histc", "histogram", "quantile", "nanquantile",
    "nanmedian", "tensordot", "kron", "erfc", "erfinv", "lgamma", "digamma", "block_diag",
    "cartesian_prod", "unique_consecutive", "gcd", "lcm", "heaviside",
    "as_strided", "frombuffer", "TypedStorage", "UntypedStorage", "index_reduce",
    "trapezoid", "trapz", "cumulative_trapezoid", "matrix_power", "chain_matmul", "hsplit",
    "inverse", "det", "logdet", "slogdet",
    "vsplit", "dsplit", "combinations", "select_scatter", "slice_scatter", "diagonal_scatter",
    "real", "imag", "conj", "resolve_conj", "is_conj", "special", "polygamma", "i0",
]

# torch's setup names (runtime.py, amp.py, accelerator.py; bfloat16 a name that refuses use)
from .amp import autocast  # noqa: E402
from .dtypes import (  # noqa: E402 - (complex dtypes: names that refuse use too)
    bfloat16,
    cdouble,
    cfloat,
    chalf,
    complex32,
    complex64,
    complex128,
)

__all__ += [
    "accelerator", "amp", "autocast", "bfloat16", "compile", "seed", "initial_seed",
    "complex32", "complex64", "complex128", "chalf", "cfloat", "cdouble", "complex", "polar",
    "view_as_complex", "view_as_real", "is_complex",
    "get_rng_state", "set_rng_state", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "set_num_threads", "get_num_threads", "set_float32_matmul_precision",
    "get_float32_matmul_precision", "FloatTensor", "DoubleTensor", "HalfTensor",
    "LongTensor", "IntTensor", "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
]
__all__ += [  # torch's aliases of nn.functional ops (routines_nn.py) and routines_more.py's
    "adaptive_avg_pool1d", "adaptive_max_pool1d", "alpha_dropout", "alpha_dropout_",
    "avg_pool1d", "batch_norm", "bilinear", "binary_cross_entropy_with_logits",
    "channel_shuffle", "constant_pad_nd", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "cosine_embedding_loss", "ctc_loss", "dropout",
    "dropout_", "embedding", "embedding_bag", "feature_alpha_dropout", "feature_alpha_dropout_",
    "feature_dropout", "feature_dropout_", "group_norm", "hinge_embedding_loss",
    "instance_norm", "kl_div", "layer_norm", "margin_ranking_loss", "max_pool1d",
    "max_pool1d_with_indices", "max_pool2d", "max_pool3d", "native_channel_shuffle",
    "pixel_shuffle", "pixel_unshuffle", "poisson_nll_loss", "rms_norm", "triplet_margin_loss",
    "absolute", "adjoint", "bartlett_window", "blackman_window", "broadcast_shapes",
    "cholesky_inverse", "cholesky_solve", "corrcoef", "cov", "fill", "frexp", "gradient",
    "hamming_window", "hann_window", "igamma", "igammac", "is_inference", "is_nonzero",
    "is_same_size", "is_signed",
    "kaiser_window", "ldexp", "ldexp_", "mvlgamma", "nextafter", "renorm", "rsub",
    "scalar_tensor", "split_with_sizes", "unravel_index", "unsafe_chunk", "unsafe_split",
    "unsafe_split_with_sizes", "vander", *_INPLACE,
]
__all__ += [  # torch's older linear-algebra names (routines_linalg.py)
    "cholesky", "frobenius_norm", "lu", "lu_solve", "lu_unpack", "matrix_exp", "nuclear_norm",
    "pdist", "pinverse", "qr", "svd", "triangular_solve", "vdot",
]

# torch's print options (display.py); stft and istft (routines_signal.py)
from .display import get_printoptions, set_printoptions  # noqa: E402
from .routines_signal import METHODS as _SIGNAL_METHODS  # noqa: E402 - x.stft(), x.istft()
from .routines_signal import istft, stft  # noqa: E402

for _name, _fn in _SIGNAL_METHODS.items():
    setattr(Tensor, _name, _fn)

__all__ += ["get_printoptions", "set_printoptions", "stft", "istft"]

# sampling, empty_strided, range, typename, the default device, histogramdd, the RNN cells
from .routines_misc import (  # noqa: E402 - (routines_misc.py)
    binomial,
    empty_strided,
    get_default_device,
    gru_cell,
    histogramdd,
    lstm_cell,
    poisson,
    range,  # noqa: A004 - torch's name
    rnn_relu_cell,
    rnn_tanh_cell,
    set_default_device,
    typename,
)

__all__ += ["binomial", "poisson", "empty_strided", "range", "typename", "get_default_device",
            "set_default_device", "histogramdd", "rnn_tanh_cell", "rnn_relu_cell", "lstm_cell",
            "gru_cell"]

# torch's other Tensor methods: is_cpu, layout, dim_order, apply_, geqrf... (tensor_methods_more.py)
from .tensor_methods_more import FUNCTIONS as _MORE_FUNCTIONS  # noqa: E402
from .tensor_methods_more import METHODS as _MORE_METHODS  # noqa: E402
from .tensor_methods_more import layout, strided  # noqa: E402

for _name, _fn in _MORE_METHODS.items():
    setattr(Tensor, _name, _fn)
globals().update(_MORE_FUNCTIONS)  # ta.geqrf, ta.ormqr, ta.narrow_copy, ...
__all__ += ["layout", "strided", *_MORE_FUNCTIONS]

# vmap, cond, while_loop, convolution, the autocast state, DLPack, svd_lowrank, the native_*
# ops, segment_reduce and ta.random (routines_torch_more.py)
from . import routines_torch_more as _torch_more  # noqa: E402
from .routines_torch_more import METHODS as _TORCH_MORE_METHODS  # noqa: E402
from .routines_torch_more import random  # noqa: E402

for _name in _torch_more.__all__:
    globals()[_name] = getattr(_torch_more, _name)
for _name, _fn in _TORCH_MORE_METHODS.items():
    setattr(Tensor, _name, _fn)  # x.__dlpack__(): torch.from_dlpack(x)
sys.modules[__name__ + ".random"] = random  # import tinyattn.random (not in __all__: a star
__all__ += [*_torch_more.__all__]  # import would hide Python's random module)
