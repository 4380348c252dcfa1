"""Fuzzing with hypothesis: random compositions of registered ops on random broadcastable shapes
are checked against finite differences in float64 (and against PyTorch when it is installed);
random bad inputs must raise a TinyattnError (or a plain ValueError/TypeError), never an internal
AttributeError, IndexError or KeyError from inside the engine."""

import math
import types
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name

FUZZ = settings(deadline=None, derandomize=True, max_examples=60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---- one vocabulary for both libraries -----------------------------------------------------------

TA = types.SimpleNamespace(
    F=F, const=lambda a: ta.tensor(a), amax=lambda x, d, k: x.amax(dim=d, keepdim=k),
    where=F.where, cat=F.cat, stack=F.stack, maximum=lambda x, y: x.maximum(y),
    sdpa=lambda q, k, v, causal, impl: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                       impl=impl))


def torch_lib():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    return types.SimpleNamespace(
        F=tf, const=lambda a: torch.tensor(a), amax=lambda x, d, k: x.amax(dim=d, keepdim=k),
        where=torch.where, cat=torch.cat, stack=torch.stack, maximum=torch.maximum,
        sdpa=lambda q, k, v, causal, impl: tf.scaled_dot_product_attention(q, k, v,
                                                                           is_causal=causal))


# ---- the ops a program is made of: name -> (applies to shape?, draw its params, run it) ---------
# `run(lib, x, more, p)` takes the next extra inputs from `leaves`; `p` holds drawn parameters.


def _dim(draw, shape):
    return draw(st.integers(-len(shape), len(shape) - 1))


def _partner(draw, shape):
    """A shape that broadcasts with `shape`: some dims set to 1, some leading dims dropped, and
    maybe a new leading dim (so both operands can be stretched)."""
    dims = [draw(st.sampled_from([n, 1])) for n in shape]
    dims = dims[draw(st.integers(0, len(dims))):]
    if len(dims) == len(shape) < 3 and draw(st.booleans()):
        dims = [draw(st.integers(1, 2))] + dims
    return tuple(dims)


def _no_params(draw, shape):
    return {}


def _leaf(shape_fn):
    return lambda draw, shape: {"leaf": shape_fn(draw, shape)}


OPS = {
    "add": (lambda s: True, _leaf(_partner), lambda lib, x, more, p: x + next(more)),
    "sub": (lambda s: True, _leaf(_partner), lambda lib, x, more, p: next(more) - x),
    "mul": (lambda s: True, _leaf(_partner), lambda lib, x, more, p: x * next(more)),
    "div": (lambda s: True, _leaf(_partner), lambda lib, x, more, p: x / (next(more) ** 2 + 0.5)),
    "pow": (lambda s: True, _leaf(_partner), lambda lib, x, more, p: (x * x + 0.5) ** next(more)),
    "maximum": (lambda s: True, _leaf(_partner),
                lambda lib, x, more, p: lib.maximum(x, next(more))),
    "neg": (lambda s: True, _no_params, lambda lib, x, more, p: -x),
    "exp": (lambda s: True, _no_params, lambda lib, x, more, p: x.tanh().exp()),
    "log": (lambda s: True, _no_params, lambda lib, x, more, p: (x * x + 0.5).log()),
    "sqrt": (lambda s: True, _no_params, lambda lib, x, more, p: (x * x + 0.5).sqrt()),
    "sigmoid": (lambda s: True, _no_params, lambda lib, x, more, p: x.sigmoid()),
    "abs": (lambda s: True, _no_params, lambda lib, x, more, p: x.abs()),
    "relu": (lambda s: True, _no_params, lambda lib, x, more, p: x.relu()),
    "clip": (lambda s: True, _no_params, lambda lib, x, more, p: x.clip(-0.8, 0.8)),
    "gelu": (lambda s: True, lambda d, s: {"approx": d(st.sampled_from(["none", "tanh"]))},
             lambda lib, x, more, p: lib.F.gelu(x, approximate=p["approx"])),
    "softmax": (lambda s: len(s) > 0, lambda d, s: {"dim": _dim(d, s)},
                lambda lib, x, more, p: x.softmax(p["dim"])),
    "log_softmax": (lambda s: len(s) > 0, lambda d, s: {"dim": _dim(d, s)},
                    lambda lib, x, more, p: x.log_softmax(p["dim"])),
    "logsumexp": (lambda s: len(s) > 0, lambda d, s: {"dim": _dim(d, s)},
                  lambda lib, x, more, p: x.logsumexp(p["dim"])),
    "sum": (lambda s: len(s) > 0,
            lambda d, s: {"dim": _dim(d, s), "keep": d(st.booleans())},
            lambda lib, x, more, p: x.sum(p["dim"], keepdim=p["keep"])),
    "mean": (lambda s: len(s) > 0,
             lambda d, s: {"dim": _dim(d, s), "keep": d(st.booleans())},
             lambda lib, x, more, p: x.mean(p["dim"], keepdim=p["keep"])),
    "max": (lambda s: len(s) > 0,
            lambda d, s: {"dim": _dim(d, s), "keep": d(st.booleans())},
            lambda lib, x, more, p: lib.amax(x, p["dim"], p["keep"])),
    "transpose": (lambda s: len(s) >= 2, lambda d, s: {"a": _dim(d, s), "b": _dim(d, s)},
                  lambda lib, x, more, p: x.transpose(p["a"], p["b"])),
    "permute": (lambda s: len(s) >= 1,
                lambda d, s: {"dims": d(st.permutations(list(range(len(s)))))},
                lambda lib, x, more, p: x.permute(*p["dims"])),
    "reshape": (lambda s: True, _no_params, lambda lib, x, more, p: x.reshape(-1)),
    "unsqueeze": (lambda s: len(s) < 3, lambda d, s: {"dim": d(st.integers(0, len(s)))},
                  lambda lib, x, more, p: x.unsqueeze(p["dim"])),
    "slice": (lambda s: len(s) >= 1 and s[-1] > 1, _no_params,
              lambda lib, x, more, p: x[..., 1:]),
    "matmul": (lambda s: len(s) >= 1,
               lambda d, s: {"leaf": (s[-1], d(st.integers(1, 3)))},
               lambda lib, x, more, p: x @ next(more)),
    "layer_norm": (lambda s: len(s) >= 1 and s[-1] > 1,
                   lambda d, s: {"leaf": (s[-1],), "leaf2": (s[-1],)},
                   lambda lib, x, more, p: lib.F.layer_norm(x, (x.shape[-1],), next(more),
                                                            next(more))),
    "masked_fill": (lambda s: True,
                    lambda d, s: {"mask": np.array(d(st.lists(st.booleans(),
                                                              min_size=math.prod(s),
                                                              max_size=math.prod(s))),
                                                   dtype=bool).reshape(s)},
                    lambda lib, x, more, p: x.masked_fill(lib.const(p["mask"]), 0.5)),
    "where": (lambda s: True,
              lambda d, s: {"cond": np.array(d(st.lists(st.booleans(), min_size=math.prod(s),
                                                        max_size=math.prod(s))),
                                             dtype=bool).reshape(s), "leaf": _partner(d, s)},
              lambda lib, x, more, p: lib.where(lib.const(p["cond"]), x, next(more))),
    "cat": (lambda s: len(s) >= 1, lambda d, s: {"leaf": s, "dim": _dim(d, s)},
            lambda lib, x, more, p: lib.cat([x, next(more)], dim=p["dim"])),
    "stack": (lambda s: len(s) < 3, lambda d, s: {"leaf": s, "dim": d(st.integers(0, len(s)))},
              lambda lib, x, more, p: lib.stack([next(more), x], dim=p["dim"])),
    "attention": (lambda s: len(s) >= 2,
                  lambda d, s: (lambda n: {"leaf": s[:-2] + (n, s[-1]),
                                           "leaf2": s[:-2] + (n, d(st.integers(1, 3))),
                                           "causal": d(st.booleans()),
                                           "impl": d(st.sampled_from(["composite", "flash"]))})(
                      d(st.integers(1, 3))),
                  lambda lib, x, more, p: lib.sdpa(x, next(more), next(more), p["causal"],
                                                   p["impl"])),
    "cross_entropy": (lambda s: len(s) == 2,
                      lambda d, s: {"target": np.array(d(st.lists(st.integers(0, s[1] - 1),
                                                                  min_size=s[0],
                                                                  max_size=s[0])))},
                      lambda lib, x, more, p: lib.F.cross_entropy(x, lib.const(p["target"]))),
}


def _leaf_shapes(params):
    return [params[k] for k in ("leaf", "leaf2") if k in params]


@st.composite
def programs(draw):
    """(the input arrays, the steps): a random chain of 1-4 ops from a random start shape."""
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    arrays = [rng.uniform(-1.5, 1.5, shape)]
    steps = []
    x = ta.tensor(arrays[0])
    for _ in range(draw(st.integers(1, 4))):
        name = draw(st.sampled_from([n for n, (ok, _, _) in OPS.items() if ok(x.shape)]))
        params = OPS[name][1](draw, x.shape)
        leaves = [rng.uniform(-1.5, 1.5, s) for s in _leaf_shapes(params)]
        x = OPS[name][2](TA, x, iter([ta.tensor(a) for a in leaves]), params)
        arrays += leaves
        steps.append((name, params))
    return arrays, steps


def execute(lib, steps, xs):
    """Run the steps on xs (the start, then each step's extra inputs) with `lib`'s tensors."""
    leaves = iter(xs[1:])
    x = xs[0]
    for name, params in steps:
        x = OPS[name][2](lib, x, leaves, params)
    return x


@FUZZ
@given(programs())
def test_random_compositions_match_finite_differences(program):
    arrays, steps = program
    inputs = [ta.tensor(a, requires_grad=True) for a in arrays]
    assert ta.gradcheck(lambda *xs: execute(TA, steps, xs), inputs, atol=1e-6, rtol=1e-4)


@FUZZ
@given(programs(), st.integers(0, 2**16))
def test_random_compositions_match_pytorch(program, seed):
    torch = pytest.importorskip("torch")
    lib = torch_lib()
    arrays, steps = program
    ours = [ta.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = execute(TA, steps, ours), execute(lib, steps, theirs)
    assert out.shape == tuple(ref.shape), steps
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-12)
    cotangent = np.random.default_rng(seed).standard_normal(out.shape)
    out.backward(ta.tensor(cotangent))
    ref.backward(torch.tensor(cotangent))
    for a, b in zip(ours, theirs, strict=True):
        got = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
        want = np.zeros(a.shape) if b.grad is None else b.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10, err_msg=str(steps))


# ---- bad inputs ----------------------------------------------------------------------------------

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.bool_]


@st.composite
def tensors(draw):
    shape = tuple(draw(st.lists(st.integers(0, 3), max_size=4)))
    dtype = draw(st.sampled_from(DTYPES))
    values = np.random.default_rng(draw(st.integers(0, 99))).uniform(-3, 3, shape)
    t = ta.tensor(values.astype(dtype))
    if dtype in (np.float32, np.float64) and draw(st.booleans()):
        t.requires_grad = True
    return t


WEIRD = st.one_of(
    tensors(), tensors(), tensors(),
    st.integers(-6, 6), st.floats(allow_nan=True, allow_infinity=True), st.none(),
    st.text(max_size=2), st.booleans(),
    st.lists(st.integers(-3, 3), max_size=3), st.tuples(st.integers(-3, 4), st.integers(-3, 4)),
    st.just([[1.0, 2.0], [3.0]]), st.just(np.array(["a", "b"])), st.just(slice(None, None, -1)),
    st.just(np.array([1, None], dtype=object)), st.just(Ellipsis), st.just({"a": 1}),
    st.just(1 + 2j),
)

CALLS = {
    "add": lambda a, b: a + b, "radd": lambda a, b: b + a, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b, "matmul": lambda a, b: a @ b,
    "rmatmul": lambda a, b: b @ a, "maximum": lambda a, b: a.maximum(b),
    "sum": lambda a, b: a.sum(dim=b), "mean": lambda a, b: a.mean(b, keepdim=True),
    "max": lambda a, b: a.max(dim=b), "var": lambda a, b: a.var(dim=b),
    "argmax": lambda a, b: a.argmax(dim=b), "logsumexp": lambda a, b: a.logsumexp(b),
    "softmax": lambda a, b: a.softmax(b), "log_softmax": lambda a, b: F.log_softmax(a, b),
    "reshape": lambda a, b: a.reshape(b), "transpose": lambda a, b: a.transpose(b, 0),
    "permute": lambda a, b: a.permute(b), "unsqueeze": lambda a, b: a.unsqueeze(b),
    "squeeze": lambda a, b: a.squeeze(b), "flatten": lambda a, b: a.flatten(b),
    "expand": lambda a, b: a.expand(b), "getitem": lambda a, b: a[b],
    "split": lambda a, b: a.split(b), "chunk": lambda a, b: a.chunk(2, dim=b),
    "masked_fill": lambda a, b: a.masked_fill(b, 0.0), "where": lambda a, b: F.where(b, a, 0.0),
    "clip": lambda a, b: a.clip(b, None), "to": lambda a, b: a.to(b),
    "backward": lambda a, b: a.backward(b), "item": lambda a, b: a.item(),
    "cross_entropy": lambda a, b: F.cross_entropy(a, b),
    "cross_entropy_rev": lambda a, b: F.cross_entropy(b, a),
    "layer_norm": lambda a, b: F.layer_norm(a, b), "embedding": lambda a, b: F.embedding(a, b),
    "embedding_rev": lambda a, b: F.embedding(b, a), "gelu": lambda a, b: F.gelu(a, b),
    "dropout": lambda a, b: F.dropout(a, b), "cat": lambda a, b: F.cat([a, b], dim=-1),
    "stack": lambda a, b: F.stack([a, b]), "sdpa": lambda a, b: F.scaled_dot_product_attention(
        a, b, b), "sdpa_mask": lambda a, b: F.scaled_dot_product_attention(a, a, a, attn_mask=b),
    "sdpa_flash": lambda a, b: F.scaled_dot_product_attention(a, b, b, impl="flash"),
    "mse_loss": lambda a, b: F.mse_loss(a, b), "tensor": lambda a, b: ta.tensor(b),
    "tensor_dtype": lambda a, b: ta.tensor(a.numpy(), dtype=b),
    "requires_grad": lambda a, b: ta.tensor(b, requires_grad=True),
    "zeros": lambda a, b: ta.zeros(b), "full": lambda a, b: ta.full(b, 1.0),
    "setitem": lambda a, b: a.__setitem__(b, 1.0),
}


def allowed(e):
    """A TinyattnError, or a plain ValueError/TypeError; never an internal lookup error."""
    if isinstance(e, ta.TinyattnError):
        return True
    return isinstance(e, (ValueError, TypeError)) and not isinstance(
        e, (AttributeError, IndexError, KeyError))


@settings(deadline=None, derandomize=True, max_examples=400,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(CALLS)), tensors(), WEIRD)
def test_random_bad_inputs_raise_only_tinyattn_or_plain_value_and_type_errors(name, a, b):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NumPy's overflow and divide-by-zero RuntimeWarnings
        try:
            out = CALLS[name](a, b)
            if isinstance(out, ta.Tensor) and out.requires_grad:
                out.sum().backward()  # the VJPs must take whatever the forward took
        except Exception as e:  # noqa: BLE001 - the class is what is under test
            assert allowed(e), f"{name}({a!r}, {b!r}) raised {type(e).__name__}: {e}"
