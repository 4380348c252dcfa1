"""dtypes: the default float dtype and PyTorch's type promotion, in one table.

Categories rank bool < integer < floating point. Operands come in three priorities: tensors with
dims, 0-d tensors, and Python numbers. A lower priority can raise the result's category (an int
tensor plus 0.5 is floating point) but never its precision within a category (float32 plus a 0-d
float64 tensor stays float32). A Python float counts as the default dtype, a Python int as int64.
`autograd.apply` calls `promoted` (`promote`, and float16's forms of the ops) for every op that
declares `promote=` given mixed dtypes or integers, and for every float16 call (DESIGN.md: dtypes).
"""

import functools

import numpy as np

from .errors import DTypeError

# the floating dtypes, the commonest first: a test `in FLOATS` (apply's: `in WIDE`) tries
# identity first (NumPy and CuPy arrays hand out these very dtype objects)
FLOATS = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))
# the float dtypes computed in as they are: apply's test is `in WIDE`, so that float16 (what
# torch computes otherwise, see `promoted`) takes the rare branch and these two never do
WIDE, HALF = FLOATS[:2], FLOATS[2]
_BOOL, _INT64 = np.dtype(np.bool_), np.dtype(np.int64)
_default = np.dtype(np.float32)


def get_default_dtype():
    """The dtype of Python floats, float lists, randn/zeros/ones and float functions of ints."""
    return _default


def set_default_dtype(dtype):
    """Make `dtype` (float16, float32 or float64) the default float dtype, as torch does."""
    global _default
    dt = as_dtype(dtype)
    if dt not in FLOATS:
        raise TypeError(f"set_default_dtype: only floating-point dtypes (float16, float32, "
                        f"float64) can be the default, got {dt}")
    _default = dt


def as_dtype(dtype):
    """`dtype` (a NumPy dtype, its name or type, or a torch dtype: torch.float16) as a NumPy
    dtype. bfloat16 (and any other dtype NumPy lacks) is a DTypeError naming it and the
    float dtypes there are, not NumPy's "data type not understood"."""
    if isinstance(dtype, np.dtype) and dtype.kind in "biuf":  # (an array's own: the commonest)
        return dtype
    if type(dtype).__module__ == "torch":  # torch.float16 -> "float16" (torch.bool -> "bool")
        dtype = str(dtype).removeprefix("torch.")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    name = str(dtype if dt is None else dt)
    # (ml_dtypes' bfloat16 is of kind "V"; strings, bytes, objects and dates hold no numbers)
    if dt is None or dt.kind not in "biuf" or "bfloat16" in name:
        raise DTypeError(f"dtype {name} is not supported: tinyattn holds bools, integers and "
                         f"the float dtypes float16, float32 and float64{_hint(name)}")
    return dt


ROPE_HINT = ("Write rotary embeddings in the cos/sin form: emb = cat((freqs, freqs), -1), "
             "x * emb.cos() + cat((-x2, x1), -1) * emb.sin() (x1, x2 the halves of x; for "
             "weights trained with the complex form, pair x[..., 0::2] with x[..., 1::2])")
NO_COMPLEX = ("complex numbers are not supported: tinyattn holds bools, integers and real "
              "floats. " + ROPE_HINT)


def _hint(name):
    """The end of as_dtype's message for a dtype tinyattn lacks: what to do instead."""
    if "bfloat16" in name:
        return "; convert a bfloat16 tensor with .float() first"
    if "complex" in name or name in ("cfloat", "cdouble", "chalf"):  # (torch's aliases)
        return "; complex numbers are not supported. " + ROPE_HINT
    return ""


def category(dtype):
    """0 for bool, 1 for integers, 2 for floating point."""
    kind = dtype.kind
    return 2 if kind == "f" else 0 if kind == "b" else 1


def promote_types(a, b):
    """The dtype two operands of the same priority give: the higher category wins outright
    (int32 with float16 is float16, as in torch, not NumPy's float32), else the wider dtype."""
    if a is None or a == b:
        return b
    if b is None:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def _combine(higher, lower):
    """A higher-priority result, raised to `lower`'s category if that category is above it."""
    if higher is None:
        return lower
    if lower is None or higher.kind == "f":
        return higher
    if higher == _BOOL or lower.kind == "f":
        return promote_types(higher, lower)
    return higher


def operand_dtype(x):
    """(priority, dtype) of one operand: 0 for arrays with dims, 1 for 0-d, 2 for Python numbers;
    None for None."""
    if x is None:
        return None
    if isinstance(x, np.generic):  # a tensor's 0-d value (np.float64 is also a Python float)
        return 1, x.dtype
    if isinstance(x, bool):
        return 2, _BOOL
    if isinstance(x, int):
        return 2, _INT64
    if isinstance(x, float):
        return 2, _default
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        raise TypeError(f"cannot use a {type(x).__name__} as a tensor operand")
    return (1 if x.ndim == 0 else 0), np.dtype(dtype)


def result_type(*operands):
    """The dtype torch gives an op on these operands (arrays, 0-d arrays, Python numbers)."""
    slots = [None, None, None]
    for x in operands:
        found = operand_dtype(x)
        if found is not None:
            slots[found[0]] = promote_types(slots[found[0]], found[1])
    return _combine(slots[0], _combine(slots[1], slots[2]))


def promote(kind, arrays, skip=()):
    """`arrays` (the op's inputs) with every array input cast to the op's result dtype.

    kind "common": the result type of the inputs (where, cat, pow, ...); kind "wrap": the same,
    and a Python int out of an integer result's range wraps into it, as torch's arithmetic has
    it (int8 + 1000 is int8 + -24; add, sub, mul, //, %); kind "float": the same, but a bool or
    integer result becomes the default float dtype (true division, exp, ...); kind "sum": bools
    and integers are summed in int64, as torch's sums and products (uint8 too, not NumPy's
    uint64), floats stay. Python numbers stay as they are (NumPy keeps them from raising
    precision, as torch does); one out of an integer result's range is an error but for "wrap".
    Positions in `skip` (masks, indices) take no part.
    """
    if kind == "sum":
        return [_summed_in(a) for a in arrays]
    return _cast(kind, _target(kind, arrays, skip), arrays, skip)


def _target(kind, arrays, skip):
    """The dtype promote casts the arrays to (kinds but "sum")."""
    target = result_type(*(a for i, a in enumerate(arrays) if i not in skip))
    if kind == "float" and target is not None and target.kind != "f":
        target = _default
    return target


def _cast(kind, target, arrays, skip):
    """The arrays cast to `target` (promote's second half)."""
    out = list(arrays)
    for i, a in enumerate(arrays):
        if i not in skip and hasattr(a, "dtype") and a.dtype != target:
            out[i] = a.astype(target)
        elif type(a) is int and not 0 <= a <= 127 and target.kind in "iu":  # (0..127 fit all)
            out[i] = _int_in(a, target, wrap=kind == "wrap")
    return out


def refuse_bool_subtraction(operands):
    """torch's rule: x - y with a bool tensor (or a Python bool) on either side is refused,
    before any promotion (NumPy would subtract an int's or a float's 0s and 1s)."""
    for a in operands:
        if a.__class__ is bool or getattr(a, "dtype", None) == _BOOL:
            raise DTypeError("sub: Subtraction, the `-` operator, with a bool tensor is not "
                             "supported (as torch); to invert a mask, use ~mask or "
                             "mask.logical_not(); for 0s and 1s, convert it first: mask.int()")


def promoted(op, arrays):
    """apply's rare branch: (the op to run, its inputs promoted as op.promote asks). For a
    float16 result the op is its float16 form (ops/half.py): torch's values for float16 with
    Python numbers (mul, div, // take the number in float32 and round once; pow, clamp refuse
    one past float16's range), and no NumPy warning where float16 overflows to inf (torch
    gives inf silently), forward and VJP. apply comes here for float16 inputs of any op (one
    dtype: `first_dtype not in WIDE`), mixed dtypes and integers; float32 and float64 never."""
    kind = op.promote
    if op.name == "sub":  # (bools take this branch: they are no floating dtype)
        refuse_bool_subtraction(arrays)
    if kind is None:  # float16 alone, an op that promotes nothing
        return _half(op), arrays
    if kind == "sum":
        xs = [_summed_in(a) for a in arrays]
        return (_half(op) if getattr(arrays[0], "dtype", None) == HALF else op), xs
    target = _target(kind, arrays, op.nondiff)
    if target != HALF:
        return op, _cast(kind, target, arrays, op.nondiff)
    with np.errstate(over="ignore"):  # (an int past 65504: inf, as torch)
        xs = _cast(kind, target, arrays, op.nondiff)
    for i in _as_numbers.get(op, ()):  # x * t, x / t, x // t: a 0-d float32 or float64
        # tensor t stays, which the float16 form takes as torch takes a CPU scalar operand
        t = arrays[i]
        if getattr(t, "ndim", None) == 0 and t.dtype in WIDE:
            xs[i] = t
    return _half(op), xs


def _half(op):
    """op's float16 form (ops/half.py hands it over with use_half_ops; op itself before)."""
    return op if _half_form is None else _half_form(op)


_half_form = None
_as_numbers = {}  # op -> the positions where its float16 form takes a 0-d float32 array as is


def use_half_ops(half_form, as_numbers=None):
    """Give `promoted` the function that makes an op's float16 form (ops/half.py does), and
    {op: positions} where it leaves a 0-d float32 or float64 array uncast for that form (x * t,
    x / t, x // t: torch computes them with t as a float32 number)."""
    global _half_form, _as_numbers
    _half_form, _as_numbers = half_form, dict(as_numbers or {})


def _summed_in(a):
    """An array to be summed or multiplied up (kind "sum"), unsigned integers in int64: NumPy
    sums the other integers and bools in int64 already, but uint8 in uint64."""
    if getattr(a, "dtype", _INT64).kind == "u":
        return a.astype(_INT64)
    return a


def _int_in(value, dtype, wrap):
    """A Python int operand of an op whose result is the integer `dtype`: itself if it fits,
    else wrapped into the dtype's range (torch's arithmetic), or a TypeError (which apply turns
    into the op's DTypeError) where the op does not wrap, as torch's pow, where, clamp."""
    lo, hi = int_range(dtype)
    if lo <= value <= hi:
        return value
    if not wrap or not -2**63 <= value < 2**64:  # (torch: "Overflow when unpacking long")
        raise TypeError(f"the Python int {value} does not fit {dtype} ({lo}..{hi}): value "
                        "cannot be converted without overflow")
    return (value - lo) % (hi - lo + 1) + lo


@functools.cache
def int_range(dtype):
    """(smallest, largest) value of an integer dtype (np.iinfo is slow to make, so kept)."""
    info = np.iinfo(dtype)
    return int(info.min), int(info.max)


class UnsupportedDType:
    """A torch dtype name tinyattn has no dtype for (ta.bfloat16): the name exists, so that
    scripts that mention it (`x.dtype in {ta.float16, ta.bfloat16}`, `ta.bfloat16 if ... else`)
    run, and any use of it as a dtype is as_dtype's DTypeError, naming it."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"tinyattn.{self.name}"

    def __reduce__(self):
        return UnsupportedDType, (self.name,)

    is_floating_point = True  # (torch's attribute on its dtypes; bfloat16 is a float)
    is_complex = False


class UnsupportedComplexDType(UnsupportedDType):
    """torch's complex dtypes (ta.complex64, ta.cfloat): names that as_dtype refuses, as
    tinyattn has no complex numbers."""

    __slots__ = ()

    def __reduce__(self):
        return UnsupportedComplexDType, (self.name,)

    is_floating_point = False
    is_complex = True


bfloat16 = UnsupportedDType("bfloat16")
complex32 = chalf = UnsupportedComplexDType("complex32")
complex64 = cfloat = UnsupportedComplexDType("complex64")
complex128 = cdouble = UnsupportedComplexDType("complex128")
