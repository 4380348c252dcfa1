"""Sample inputs for every registered op: what `tinyattn gradcheck` and the test suite check.

`SAMPLES[name]` is a list of cases; a case is (inputs, params). An input is a shape (random
float64 values that require grad), `pos(shape)` (positive values, for log, sqrt, pow),
`vals(...)` (these exact float64 values, requiring grad: ties, boundaries), `const(...)` (a fixed
array that needs no grad: masks, ids, targets) or a Python number. Binary broadcasting ops and
unary elementwise ops are also checked over the broadcasting grid of shapes `GRID`.
An op registered without samples fails the suite.
"""

import itertools

import numpy as np

GRID = [(), (3,), (2, 3), (1, 3), (2, 1)]
BINARY_BROADCASTING = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")
UNARY_ELEMENTWISE = ("neg", "exp", "log", "sqrt", "tanh", "sigmoid", "relu", "abs")
POSITIVE = ("log", "sqrt", "pow")  # ops whose (first) input must be positive


class pos:  # noqa: N801 - reads as a word in the tables below
    def __init__(self, shape):
        self.shape = shape


class vals:  # noqa: N801
    def __init__(self, values):
        self.values = np.asarray(values, dtype=np.float64)


class const:  # noqa: N801
    def __init__(self, values, dtype=None):
        self.values = np.asarray(values, dtype=dtype)


def case(*inputs, **params):
    return inputs, params


_CAUSAL_PAD = np.array([[True, True, False, False], [True, True, True, False],
                        [False, False, False, False], [True, True, True, True]])

# Ties: a finite difference splits a two-way tie evenly (0.5 each), which is what the max/min
# VJPs do; a k-way tie gets 1/k from the VJP, which finite differences cannot see (tests do).
SAMPLES = {
    "add": [case((2, 3), 1.5), case(2.0, (3,))],
    "sub": [case((2, 3), 0.5), case(1.0, (2, 3))],
    "mul": [case((2, 3), 3.0), case(-2.0, (3,))],
    "div": [case((2, 3), 4.0), case(2.0, pos((2, 3)))],
    "pow": [case(pos((2, 3)), 3), case(pos((2, 3)), 0.5), case(2.0, (2, 3)),
            case(vals([0.0, 1.5, -2.0]), 2)],
    "neg": [],
    "exp": [],
    "log": [],
    "sqrt": [],
    "tanh": [],
    "sigmoid": [case(vals([-40.0, -1.0, 0.0, 2.0, 40.0]))],
    "relu": [],
    "abs": [],
    "maximum": [case(vals([1.0, 2.0, 3.0]), vals([1.0, 0.0, 5.0])), case((2, 3), 0.0)],
    "minimum": [case(vals([1.0, 2.0, 3.0]), vals([1.0, 0.0, 5.0])), case((2, 3), 0.0)],
    "where": [case(const([[True, False, True], [False, False, True]]), (2, 3), (2, 3)),
              case(const([True, False, True]), (2, 3), 0.0),
              case(const([[True], [False]]), (3,), (2, 1))],
    "clip": [case((3, 4), min=-0.5, max=0.5), case((3, 4), min=0.0), case((5,), max=0.2)],
    "clone": [case((2, 3)), case(())],
    "cast": [case((2, 3), dtype=np.float64)],
    "sum": [case((2, 3, 4)), case((2, 3, 4), dim=1), case((2, 3, 4), dim=(0, 2), keepdim=True),
            case((), dim=0), case((3,), dim=-1)],
    "mean": [case((2, 3, 4)), case((2, 3, 4), dim=-1, keepdim=True), case((2, 3), dim=(0, 1))],
    "max": [case((2, 3, 4), dim=1), case(vals([[1.0, 3.0, 3.0], [2.0, 2.0, 0.0]]), dim=1),
            case(vals([[1.0, 3.0], [3.0, 0.0]])), case((2, 3), dim=0, keepdim=True)],
    "min": [case((2, 3, 4), dim=-1), case(vals([[1.0, 0.0, 0.0], [2.0, 2.0, 5.0]]), dim=1),
            case((4,))],
    "var": [case((2, 3, 4)), case((2, 5), dim=1), case((3, 4), dim=0, keepdim=True,
                                                        correction=0)],
    "logsumexp": [case((2, 3, 4), dim=-1), case((3, 4)), case((2, 3), dim=0, keepdim=True),
                  case(vals([[1e4, 1e4 - 1.0, -1e4]]), dim=1)],
    "reshape": [case((2, 3, 4), shape=(6, 4)), case((2, 3), shape=(-1,)),
                case((), shape=(1, 1))],
    "permute": [case((2, 3, 4), dims=(2, 0, 1)), case((2, 3), dims=(1, 0))],
    "expand": [case((1, 3), shape=(4, 3)), case((3,), shape=(2, 4, 3)),
               case((2, 1, 3), shape=(2, 5, 3))],
    "getitem": [case((4, 5), index=(slice(1, 3), 2)),
                case((4, 5), index=(slice(None, None, 2), slice(4, 0, -1))),
                case((2, 3, 4), index=(Ellipsis, None, 1)),
                case((4, 5), index=np.array([0, 2, 0, 3])),  # a repeated row accumulates
                case((4, 5), index=(np.array([1, 1, 3]), np.array([0, 0, 4]))),
                case((3, 4), index=np.array([[True, False, True, True], [False] * 4,
                                             [True] * 4]))],
    "setitem": [case((4, 5), (2, 5), steps=((slice(1, 3),),)),
                case((4, 5), 2.0, steps=((slice(None), 1),)),
                case((3, 4), (4,), steps=((np.array([0, 2]),),)),  # the value broadcasts
                case((3, 4, 5), (4, 2), steps=((0, slice(None), slice(None)),  # x[0, :, [1, 2]]
                                               (slice(None), np.array([1, 2]))))],
    "take_along_dim": [case((3, 4), const([[3, 0, 1, 2], [0, 1, 2, 3], [2, 2, 0, 0]]), dim=1),
                       case((2, 3), const([[1, 0, 1]]), dim=0),  # repeats collect both
                       case((2, 3, 4), const(np.zeros((2, 3, 1), dtype=np.int64)), dim=-1)],
    "cat": [case((2, 3), (2, 4), dim=1), case((1, 3), (2, 3), (3, 3), dim=0),
            case((2, 2, 2), (2, 2, 2), dim=-1)],
    "stack": [case((2, 3), (2, 3), dim=0), case((2, 3), (2, 3), (2, 3), dim=2)],
    "matmul": [case((3, 4), (4, 2)), case((2, 3, 4), (4, 5)), case((2, 3, 4), (2, 4, 5)),
               case((4,), (4, 3)), case((3, 4), (4,)), case((4,), (4,)),
               case((2, 1, 3, 4), (5, 4, 2)), case((3,), (2, 3, 4))],
    "softmax": [case((2, 5)), case((2, 3, 4), dim=1), case(vals([[1e4, -1e4, 0.0, 1e4 - 2.0]])),
                case(vals([[0.5, float("-inf"), 1.0], [float("-inf")] * 3]))],
    "log_softmax": [case((2, 5)), case((2, 3, 4), dim=0),
                    case(vals([[1e4, -1e4, 0.0, 1e4 - 2.0]]))],
    "scaled_masked_softmax": [
        case((2, 4, 4), None, scale=0.5, causal=True),
        case((2, 4, 4), const(_CAUSAL_PAD), scale=1.5),  # row 2 is fully masked: zeros
        case((1, 2, 3, 5), const(np.ones((3, 5), dtype=bool)), scale=0.3, causal=True),
    ],
    "cross_entropy": [
        case((4, 5), const([0, 3, 4, 1])),
        case((4, 5), const([0, -100, 4, 1]), reduction="sum"),
        case((4, 5), const([0, 3, 2, 2]), label_smoothing=0.1),
        case((2, 5, 3), const([[0, 1, 4], [2, 2, 3]]), reduction="none"),
        case((5,), const(2)),
        case((3, 4), const([1, 7, 2]), ignore_index=7, label_smoothing=0.2),
    ],
    "masked_fill": [case((2, 3), const([[True, False, False], [False, True, False]]), value=-1.0),
                    case((2, 3, 3), const(np.tril(np.ones((3, 3), dtype=bool))), value=0.0)],
    "linear": [case((2, 3, 4), (5, 4), (5,)), case((4,), (2, 4), None), case((3, 4), (2, 4))],
    "layer_norm": [case((2, 3, 4), (4,), (4,)), case((3, 4), None, None),
                   case((2, 3, 4), (3, 4), (3, 4), n_dims=2), case((2, 5), (5,), None, eps=1e-3)],
    "gelu": [case((3, 4)), case((3, 4), approximate="tanh"),
             case(vals([-8.0, -3.0, -0.5, 0.0, 0.7, 2.6, 6.0]))],
    "embedding": [case(const([[0, 2, 2], [1, 0, 4]]), (5, 3)), case(const([3, 3, 3]), (4, 2))],
    "dropout": [case((4, 5), p=0.5, seed=0), case((2, 3, 4), p=0.1, seed=3)],
    "flash_attention": [
        case((2, 5, 4), (2, 5, 4), (2, 5, 3), None, scale=0.5, causal=True, block=2),
        case((4, 4), (4, 4), (4, 2), const(_CAUSAL_PAD), scale=0.7, block=3),  # a masked row
        case((1, 2, 3, 4), (3, 1, 6, 4), (3, 1, 6, 2), None, scale=0.4, block=4),  # broadcast
        case((2, 7, 3), (2, 5, 3), (2, 5, 3), None, scale=1.0, causal=True, block=2),  # T > S
    ],
}


def cases(name):
    """Every case for op `name`: its own samples, plus the grid for broadcasting/unary ops."""
    out = list(SAMPLES[name])
    if name in BINARY_BROADCASTING:
        first = pos if name in POSITIVE else tuple
        second = pos if name == "div" else tuple  # keep divisors away from zero
        for a, b in itertools.product(GRID, GRID):
            try:
                np.broadcast_shapes(a, b)
            except ValueError:
                continue
            out.append(case(first(a), second(b)))
    if name in UNARY_ELEMENTWISE:
        out += [case(pos(s) if name in POSITIVE else s) for s in GRID]
    return out


def materialize(inputs, rng, make_tensor):
    """The concrete inputs of a case: float64 tensors that require grad, constants, numbers."""
    made = []
    for spec in inputs:
        if isinstance(spec, tuple):
            made.append(make_tensor(rng.standard_normal(spec), True))
        elif isinstance(spec, pos):
            made.append(make_tensor(rng.uniform(0.5, 2.0, spec.shape), True))
        elif isinstance(spec, vals):
            made.append(make_tensor(spec.values.copy(), True))
        elif isinstance(spec, const):
            made.append(make_tensor(spec.values, False))
        else:
            made.append(spec)  # a Python number or None
    return made
