"""Ops: the registry of every op, merged from the family files.

Each family file (elementwise, pointwise, activation, reduce, scan, shape, index, matmul, softmax,
mask, nn, attention, special, special_more, special_poly, special_poly_derivatives, linalg)
defines its ops with `@op` from ops/op.py,
each forward directly above its VJP, and lists them in OPS.
REGISTRY maps every op's name to its Op.
"""

from . import (
    activation,
    attention,
    elementwise,
    half,  # noqa: F401 (float16 forms of the ops, for dtypes.promoted)
    index,
    linalg,
    mask,
    matmul,
    nn,
    pointwise,
    reduce,
    scan,
    shape,
    softmax,
    special,
    special_more,
    special_poly,
    special_poly_derivatives,
)
from .op import Op, op

__all__ = ["Op", "op", "REGISTRY", "FAMILIES"]

FAMILIES = (elementwise, pointwise, activation, reduce, scan, shape, index, matmul, softmax,
            mask, nn, attention, special, special_more, special_poly, special_poly_derivatives,
            linalg)


def _merge(families):
    registry = {}
    for family in families:
        for o in family.OPS:
            if o.name in registry:
                raise ValueError(f"op {o.name!r} is registered twice ({family.__name__})")
            registry[o.name] = o
    return registry


REGISTRY = _merge(FAMILIES)
