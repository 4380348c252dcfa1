"""Op, the record pairing an op's forward with its VJP, and the helpers every op family uses.

An op's forward is `fwd(be, *arrays, **params) -> (out, saved)` and its VJP is
`vjp(be, g, saved, **params) -> (gx, gy, ...)`, one gradient per input (None where there is
none). `@op(name, formula, ...)` turns a forward into an Op; `@that_op.defvjp` attaches the VJP
written directly below it. Calling an Op on tensors runs it through `autograd.apply`.
What the tools need to know about an op is declared on it too, so adding an op touches one
file: the names of its gradients (explain), its sample inputs (gradcheck and the tests, built
with ops/samples.py), the traps detect_anomaly warns about (ops/traps.py) and how a float64
re-run sets its parameters (graphcheck).
The helpers: `dims` and `dim1` (checked dim arguments), `is_const` (a Python number operand),
`plain` (a NumPy number setting as its Python number), `quiet` (IEEE infinities and NaN
without NumPy's warnings) and the broadcasting checks.
"""

import functools

import numpy

from ..autograd import apply, python_number
from ..errors import DimError


class Op:
    """A differentiable operation: name, forward, VJP, and a one-line formula for the docs."""

    __slots__ = ("name", "fwd", "vjp", "add_into", "formula", "grads", "broadcasts", "nondiff",
                 "fused", "promote", "saves", "save_places", "saves_out", "view", "fresh", "doc",
                 "samples", "traps", "float64_params")

    def __init__(self, name, fwd, formula, grads=("gx",), broadcasts=False, nondiff=(),
                 fused=False, promote=None, saves=None, saves_out=None, view=False,
                 fresh=False, samples=None, traps=None, float64_params=None):
        self.name = name
        self.fwd = fwd
        self.vjp = functools.partial(_missing_vjp, name)
        # add_into(be, acc, g, saved, **params): acc += the gradient of input 0, in place, for a
        # one-input op whose gradient is mostly zeros (getitem: zeros with g at the index).
        # Backward then adds each part straight into the input's running sum instead of
        # summing zero-filled arrays (q, k, v = qkv[0], qkv[1], qkv[2]); the VJP must equal
        # zeros + add_into (defadd_into). None: backward always calls the VJP.
        self.add_into = None
        self.formula = formula  # the VJP in one line: "gx = y * (g - sum(g*y, dim))"
        # the formula's name for each input's gradient, None for an input that gets none;
        # () for ops that take any number of inputs (explain then says g[0], g[1], ...)
        self.grads = grads
        self.broadcasts = broadcasts  # gradients are summed back to input shapes (sum_to)
        self.nondiff = nondiff  # input positions that never get a gradient (masks, indices)
        self.fused = fused  # one node standing for several textbook ops
        # dtypes (tinyattn/dtypes.py): "common" casts the inputs to their result type, "float"
        # too but integers become the default float dtype; None leaves the inputs alone
        self.promote = promote
        # in-place safety: {input position: its place in `saved`} for the inputs whose arrays
        # (or views of them) the forward saves, and the place of the output if it saves that;
        # backward checks that their version counters did not move (tests check the places)
        self.saves = saves or {}
        self.save_places = tuple(self.saves.items())  # (the same, as apply reads it: quicker)
        self.saves_out = saves_out
        self.view = view  # the output may be a view of input 0 (they share a version counter)
        # the VJP's gradients are new writeable arrays, one of its own per input, that share no
        # memory with g, the inputs, the saved arrays or each other: backward then adds the
        # input's later parts into them in place and a leaf's .grad takes one without a copy
        # (tests/core/test_vjp_contract.py checks every op that says so, on every sample)
        self.fresh = fresh
        self.doc = (fwd.__doc__ or "").strip()  # the forward in one line of math
        # the cases gradcheck and the tests run: a list of samples.case(...); none fails the suite
        self.samples = samples or []
        # traps(be, arrays, params, out, label) yields a warning for each legal-but-rarely-meant
        # thing in one call (detect_anomaly shows them); None: nothing to warn about
        self.traps = traps
        # float64_params(params) -> the params for graphcheck's float64 re-run; None: the same
        self.float64_params = float64_params

    def defvjp(self, vjp):
        """Decorator: attach `vjp` to this op (written directly below its forward)."""
        self.vjp = vjp
        return vjp

    def defadd_into(self, add_into):
        """Decorator: attach `add_into` (see __init__) to this one-input op."""
        self.add_into = add_into
        return add_into

    def __call__(self, *inputs, **params):
        return apply(self, *inputs, **params)

    def __repr__(self):
        return f"<Op {self.name}: {self.formula}>"


def op(name, formula, **flags):
    """Decorator: make the forward below into an Op called `name`."""
    return lambda fwd: Op(name, fwd, formula, **flags)


def _missing_vjp(name, be, g, saved, **params):
    """Until @defvjp replaces it: backward through `name` is an error, never zeros."""
    raise NotImplementedError(f"{name}: no VJP is defined for this op")


def dims(dim, ndim, opname):
    """`dim` (None, an int or a tuple of ints, negatives allowed) as a sorted tuple of axes."""
    if type(dim) is int and -ndim <= dim < ndim:  # the commonest case, quickly (not 0-d)
        return (dim % ndim,)
    if dim is None:
        return tuple(range(ndim))
    many = isinstance(dim, (tuple, list))
    dim = tuple(_dim_index(d, opname) for d in dim) if many else _dim_index(dim, opname)
    if ndim == 0 and dim in (0, -1, (), (0,), (-1,)):
        return ()  # a 0-d tensor has one implicit dim, as in PyTorch
    out = []
    for d in dim if many else (dim,):
        if not -max(ndim, 1) <= d < max(ndim, 1):
            raise DimError(f"{opname}: dim {d} is out of range for a tensor with {ndim} dims "
                           f"(valid: {-max(ndim, 1)}..{max(ndim, 1) - 1})")
        out.append(d % max(ndim, 1))
    if len(set(out)) != len(out):
        raise DimError(f"{opname}: dim {dim} repeats a dim")
    return tuple(sorted(out))


def _dim_index(d, opname):
    """One dim as an int: a NumPy int or an integer 0-d tensor too (dim=np.int64(1),
    dim=torch.tensor(1)), as torch takes them; bools and floats are refused."""
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    if not isinstance(d, (bool, numpy.bool_)) and hasattr(d, "__index__"):
        try:
            return d.__index__()
        except TypeError:  # (a float tensor's __index__)
            pass
    raise TypeError(f"{opname}: dim must be an int or a tuple of ints, got {d!r}")


def dim1(dim, ndim, opname):
    """A single `dim` as a non-negative axis."""
    if type(dim) is int and -ndim <= dim < ndim:  # (as in dims: permute calls this per dim)
        return dim % ndim
    axes = dims(dim, ndim, opname)
    if len(axes) != 1:
        raise DimError(f"{opname}: takes one dim, got dim={dim!r} for a tensor with {ndim} dims"
                       + ("; reshape the 0-d tensor to (1,) first" if ndim == 0 else ""))
    return axes[0]


def quiet():
    """Inside: NumPy gives inf and NaN (x / 0, 0 * inf, log of a negative) without warnings,
    as torch does; the values are the IEEE ones either way."""
    return numpy.errstate(divide="ignore", invalid="ignore", over="ignore")


def quietly(fn):
    """Decorator: `fn` (a forward or a VJP) run inside quiet(), for the ops whose math makes
    inf or NaN of its own (x / 0, log 0, √-1, e^1000, sin inf, inf - inf in a norm), silently
    as torch. Only on such ops: the errstate costs ~1.7 µs a call, a third of a tiny op's
    bookkeeping, so x + c, x * c and tanh (the overhead benchmark's chain) go without it."""

    @functools.wraps(fn)
    def run(*args, **params):
        with numpy.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return fn(*args, **params)

    return run


def wide(a):
    """`a` in float32 if it is float16, else `a` itself: statistics and norms of half-precision
    values are summed in float32, as torch accumulates them (300² already overflows float16,
    whose largest value is 65504, so a layer norm of such values would come out all zeros)."""
    return a.astype(numpy.float32) if a.dtype == numpy.float16 else a


def wide_sum(a, axis=None, keepdims=False):
    """a.sum(axis, keepdims=keepdims), with float16 summed in float32 and given back in float16,
    as torch sums it: NumPy adds float16 along any dim but the last one row at a time in
    float16, where 2048 + 1 rounds to 2048, so a sum over 4096 rows of ones came out 2048."""
    if a.dtype == numpy.float16:
        return a.sum(axis=axis, keepdims=keepdims, dtype=numpy.float32).astype(numpy.float16)
    return a.sum(axis=axis, keepdims=keepdims)


def acc_dtype(dtype):
    """The type to accumulate a sum (or a count) of `dtype` values in: float32 for float16
    (torch's accumulator), else the dtype's own scalar type."""
    return numpy.float32 if dtype == numpy.float16 else dtype.type


def is_const(v):
    """True for a Python number operand: a constant of the graph, so it gets no gradient.
    (A 0-d result such as x.sum() can be a NumPy scalar, and np.float64 is a float: not const.)
    The answer depends on the type alone; the commonest ops read CONST[v.__class__] inline."""
    return CONST[v.__class__]


class _ConstByType(dict):
    """type -> whether its values are constants (is_const), worked out on a type's first
    sight: a dict read where the op's forward would call a function (on the overhead
    benchmark's x * c, two calls of is_const were 3 % of the time per op)."""

    def __missing__(self, cls):
        answer = cls in _PYTHON_NUMBERS or (issubclass(cls, (int, float))
                                            and not hasattr(cls, "dtype"))
        self[cls] = answer
        return answer


CONST = _ConstByType()


def plain(v, name=None):
    """A NumPy number setting (np.float64(0.2), np.finfo(float).eps, a value from np.logspace)
    or one of a subclass of int or float (an IntEnum member) as the Python number it stands
    for, as torch reads one: weak in type promotion, so that a float32 input stays float32
    (NumPy 2 computes with an np.float64, or a float subclass, in float64) and the values are
    the Python number's; another kind of number (a Fraction) refused, naming `name`
    (autograd.python_number); anything else as it is. For the wrappers that hand an op its
    number settings (the VJP sees the same ones), never on apply's path."""
    if isinstance(v, numpy.generic):
        return v.item()
    return v if v.__class__ in _PYTHON_NUMBERS else python_number(v, name)


def plain_params(params, name=None):
    """`params` (an op's settings by name) with each NumPy number, or int or float of a
    subclass, as its Python number (plain); `params` itself where it holds none. Another kind
    of number is refused (a DTypeError naming `name`, the op, where given)."""
    if any(plain(v, name) is not v for v in params.values()):
        return {k: plain(v, name) for k, v in params.items()}
    return params


_PYTHON_NUMBERS = frozenset((int, float, bool))  # the quick exact-type check first (a set: a
# miss costs one hash, where a tuple compares three types)


def broadcast_shape(*shapes):
    """The shape NumPy broadcasting gives `shapes`; a ValueError if they do not broadcast."""
    return numpy.broadcast_shapes(*shapes)  # shape arithmetic only, on any backend


def broadcasts_to(shape, target):
    """Whether an array of `shape` broadcasts to exactly `target` (a mask to its scores)."""
    try:
        return numpy.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False
