"""What every graph VJP is written with: `Ctx` (what a VJP reads of its node), `call` (an op
by name, recording a graph), `tensor_on` (a Tensor on an array, with a chosen node), the
tensor-level helpers (sum_to, masked, const...) and GRAPH_VJPS, {op name: graph VJP}, which
the family modules (core, elementwise, reductions, indexing, nn) fill."""

import numpy

from .. import autograd
from ..errors import GraphError, ShapeError, fmt_shape
from ..ops import REGISTRY
from ..tensor import Tensor

GRAPH_VJPS = {}  # op name -> graph VJP (filled by tinyattn/higher_order/__init__.py)
_OPS = REGISTRY


def call(name, *inputs, **params):
    return _OPS[name](*inputs, **params)


def tensor_on(array, be, node=None, version=None):
    """A Tensor on `array` whose node is `node` (None: a constant of the new graph)."""
    t = Tensor._wrap(array, be)
    t._node = node
    if version is not None:
        t._version_counter = version
    return t


def is_array(v):
    return isinstance(v, (numpy.ndarray, numpy.generic)) or hasattr(v, "__cuda_array_interface__")


class Ctx:
    """What a graph VJP reads: the gradient `g` (a Tensor), the node, its saved values, params
    and `parents` (those the walk sends gradient to: None for an input that needs none)."""

    __slots__ = ("node", "g", "be", "saved", "params", "parents")

    def __init__(self, node, g, parents):
        self.node, self.g, self.be, self.parents = node, g, g.backend, parents
        self.saved, self.params = node.saved, node.params

    def need(self, i):
        return i < len(self.parents) and self.parents[i] is not None

    def _version(self, i):
        for version, _, j in self.node.versions if self.node.versions is not autograd._FREED \
                else ():
            if j == i:
                return version
        return None

    def input(self, i):
        """Input i as the op saved it: a Tensor whose node is the input's (a Python number as
        it is); a GraphError if the op did not save it."""
        op = self.node.op
        place = op.saves.get(i)
        value = None if place is None else self.saved[place]
        if value is None:
            raise GraphError(f"create_graph: {op.name} did not save its input {i}, which the "
                             "gradient of its gradient needs")
        if not is_array(value):
            return value
        return tensor_on(value, self.be, self.node.parents[i], self._version(i))

    def out(self):
        """The op's output on the array it saved, whose node is the node itself."""
        op = self.node.op
        value = None if op.saves_out is None else self.saved[op.saves_out]
        if value is None:
            raise GraphError(f"create_graph: {op.name} did not save its output, which the "
                             "gradient of its gradient needs")
        return tensor_on(value, self.be, self.node, self._version(None))


# ---- tensor-level helpers -------------------------------------------------------------------


def sum_to(g, shape):
    """Tensor g summed over the dims broadcasting added or stretched, to `shape`."""
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, g.shape[lead:], strict=True)):
        raise ShapeError(f"cannot sum a gradient of shape {fmt_shape(g.shape)} to "
                         f"{fmt_shape(shape)}")
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape)
                                      if n == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(dim=axes, keepdim=True)
    return call("reshape", g, shape=shape)


def sum_dims(t, axes, keepdim=False):
    """t summed over `axes` (none: t itself; sum(dim=()) would sum every dim)."""
    return t.sum(dim=tuple(axes), keepdim=keepdim) if axes else t


def const(c, array, dtype=None):
    return tensor_on(array if dtype is None else array.astype(dtype), c.be)


def masked(c, keep, g):
    """g where keep, else 0 (keep a constant mask, as the array VJPs select)."""
    return call("where", c.be.xp.asarray(keep, dtype=bool), g, 0.0)


def swap_last(t):
    dims = list(range(t.ndim))
    dims[-1], dims[-2] = dims[-2], dims[-1]
    return call("permute", t, dims=tuple(dims))


def unreduce(g, axes, keepdim, shape):
    """g, the gradient of a reduction over `axes`, spread back to the input's `shape`."""
    if not keepdim:
        g = call("reshape", g, shape=tuple(1 if i in axes else n for i, n in enumerate(shape)))
    return call("expand", g, shape=tuple(shape))
