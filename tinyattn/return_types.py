"""The named pairs that max, min, sort, topk, cummax, cummin, median, nanmedian and kthvalue
return with a dim, as torch.return_types, and the named tuples of torch.linalg's
factorizations; and Size, the tuple x.shape and x.size() are (torch.Size).

    values, indices = x.max(dim=1)      # or: x.max(dim=1).values / .indices
"""

import builtins
import operator
from collections import namedtuple

max = namedtuple("max", ["values", "indices"])  # noqa: A001 - torch.return_types' names
min = namedtuple("min", ["values", "indices"])  # noqa: A001
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
median = namedtuple("median", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
aminmax = namedtuple("aminmax", ["min", "max"])
histogram = namedtuple("histogram", ["hist", "bin_edges"])
slogdet = namedtuple("slogdet", ["sign", "logabsdet"])  # torch.slogdet, Tensor.slogdet
linalg_slogdet = namedtuple("linalg_slogdet", ["sign", "logabsdet"])  # torch.linalg.slogdet
linalg_svd = namedtuple("linalg_svd", ["U", "S", "Vh"])  # torch.linalg's factorizations
linalg_eigh = namedtuple("linalg_eigh", ["eigenvalues", "eigenvectors"])
linalg_qr = namedtuple("linalg_qr", ["Q", "R"])
linalg_lu = namedtuple("linalg_lu", ["P", "L", "U"])
linalg_lu_factor = namedtuple("linalg_lu_factor", ["LU", "pivots"])
linalg_lstsq = namedtuple("linalg_lstsq", ["solution", "residuals", "rank", "singular_values"])
linalg_inv_ex = namedtuple("linalg_inv_ex", ["inverse", "info"])
linalg_cholesky_ex = namedtuple("linalg_cholesky_ex", ["L", "info"])
linalg_solve_ex = namedtuple("linalg_solve_ex", ["result", "info"])
linalg_lu_factor_ex = namedtuple("linalg_lu_factor_ex", ["LU", "pivots", "info"])
linalg_ldl_factor = namedtuple("linalg_ldl_factor", ["LD", "pivots"])
linalg_ldl_factor_ex = namedtuple("linalg_ldl_factor_ex", ["LD", "pivots", "info"])
# torch's older top-level factorizations (routines_linalg.py) and Tensor.frexp
svd = namedtuple("svd", ["U", "S", "V"])
qr = namedtuple("qr", ["Q", "R"])
_lu_with_info = namedtuple("_lu_with_info", ["LU", "pivots", "info"])
lu_unpack = namedtuple("lu_unpack", ["P", "L", "U"])
triangular_solve = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])
frexp = namedtuple("frexp", ["mantissa", "exponent"])


# what a Device may name: torch's cpu and cuda, and tinyattn's backend names
_DEVICE_TYPES = frozenset(("cpu", "cuda", "numpy", "np", "cupy", "gpu", "meta"))


class Device(str):
    """A tensor's (and a Generator's) device, as torch's (x.device.type, .index,
    device(type='cpu')), that is its name as a str too: x.device == "cpu", a dict key as
    "cpu", x.to(x.device). device("cuda:0") is device(type='cuda', index=0), equal to "cuda"
    (one GPU: the backend's)."""

    def __new__(cls, type="cpu", index=None):  # noqa: A002 - torch's name
        if not isinstance(type, str):
            raise TypeError(f"device: expected a device string such as 'cpu' or 'cuda:0', got "
                            f"{builtins.type(type).__name__} {type!r}")
        kind, colon, number = type.partition(":")
        if kind not in _DEVICE_TYPES or colon and not number.isdigit():
            raise RuntimeError(f"Invalid device string: {type!r} (as torch); tinyattn's "
                               f"devices are {', '.join(sorted(_DEVICE_TYPES))}, with an index "
                               "after a colon: 'cuda:0'")
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)
                                  or index < 0 or colon):
            raise RuntimeError(f"device: the index must be an int >= 0, given once, got {index!r}"
                               f" for {type!r}")
        self = super().__new__(cls, kind)
        self.index = int(number) if colon else index
        return self

    @classmethod
    def of_backend(cls, name):
        """The device of a backend: cpu for numpy, cuda for cupy (another keeps its name)."""
        return cls({"numpy": "cpu", "cupy": "cuda"}.get(name, name))

    @property
    def type(self):
        return str.__str__(self)

    def __repr__(self):
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self}'{index})"


class Size(tuple):
    """A tensor's shape, as torch.Size: a tuple of ints, equal to (and hashed as) the plain
    tuple, with numel(); a slice of it, and a tuple added to it, is a Size again."""

    __slots__ = ()

    def __new__(cls, sizes=()):
        """As torch.Size(sizes): each an int, or what reads as one (a NumPy int, a bool, a
        one-element integer tensor) made an int; anything else (2.5, a float tensor, None) a
        TypeError. (A tensor's shape skips the check: Size._of(shape), its ints as they are.)"""
        out = tuple.__new__(cls, sizes)
        if all(type(d) is int for d in out):
            return out
        made = []
        for i, d in enumerate(out):
            try:
                made.append(int(operator.index(d)))  # (int(): True is 1, as torch's)
            except TypeError:
                raise TypeError(f"Size() takes an iterable of 'int' (item {i} is "
                                f"'{type(d).__name__}')") from None
        return tuple.__new__(cls, made)

    @classmethod
    def _of(cls, shape):
        """The Size of an array's shape (a tuple of ints already): no check, as fast as a
        tuple (a tensor's .shape makes one on every read)."""
        return tuple.__new__(cls, shape)

    def numel(self):
        """The number of entries a tensor of this shape has (1 for ())."""
        n = 1
        for d in self:
            n *= d
        return n

    def __getitem__(self, index):
        out = tuple.__getitem__(self, index)  # (a slice's items are ints already: no check)
        return tuple.__new__(Size, out) if type(index) is slice else out

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(self, other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple.__add__(other, self))

    def __mul__(self, n):
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __repr__(self):
        return f"ta.Size({list(self)})"

    __str__ = __repr__
