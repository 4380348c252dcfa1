"""Parity with PyTorch: every registered op, forward and backward, in float64.

Driven by the sample cases of `tinyattn.ops.samples` and the table `TORCH` below (op name ->
the same computation written with torch). An op registered without an entry there fails the
suite unless `TORCHLESS` lists it with the reason it cannot be compared. Skipped without torch.
"""

import itertools
import operator

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.ops import REGISTRY, special_poly, special_poly_derivatives
from tinyattn.ops import samples as S

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _masked_softmax(s, keep):
    """softmax over the last dim where keep, with rows that keep nothing giving zeros
    (tinyattn's documented convention; plain torch.softmax gives NaN there)."""
    s = s.masked_fill(~keep, float("-inf"))
    empty = ~keep.any(dim=-1, keepdim=True)
    return torch.softmax(s.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)


def _keep(shape, keep, causal):
    """The bool mask of attention: `keep` (or all True) and, if causal, j <= i (top-left)."""
    n_q, n_k = shape[-2], shape[-1]
    out = torch.ones(n_q, n_k, dtype=torch.bool) if keep is None else keep
    if causal:
        out = out & torch.ones(n_q, n_k, dtype=torch.bool).tril()
    return out.expand(shape)


def _softmax(x, dim=-1):
    return _masked_softmax(x.movedim(dim, -1), x.movedim(dim, -1) > float("-inf")).movedim(-1, dim)


def _scaled_masked_softmax(x, keep=None, scale=1.0, causal=False):
    return _masked_softmax(x * scale, _keep(x.shape, keep, causal))


def _attention(q, k, v, keep=None, scale=1.0, causal=False, block=None):
    s = q @ k.transpose(-2, -1)
    return _masked_softmax(s * scale, _keep(s.shape, keep, causal)) @ v


def _all_dims(x, dim):
    return tuple(range(x.ndim)) if dim is None else dim


def _getitem(x, index):
    """x[index] in torch, which has no negative slice steps: those become index_select first
    (fine for indices made only of slices and ints, where positions are dims)."""
    parts = index if isinstance(index, tuple) else (index,)
    if any(isinstance(p, slice) and (p.step or 1) < 0 for p in parts):
        assert all(isinstance(p, (slice, int)) for p in parts)
        fixed = []
        for d, p in enumerate(parts):
            if isinstance(p, slice) and (p.step or 1) < 0:
                picked = list(range(x.shape[d]))[p]
                x = x.index_select(d, torch.tensor(picked))
                p = slice(None)
            fixed.append(p)
        parts = fixed
    parts = tuple(torch.from_numpy(p) if isinstance(p, np.ndarray) else p for p in parts)
    return x[parts if isinstance(index, tuple) else parts[0]]


def _setitem(x, v, steps):
    """torch's x[index] = v on a copy, one index step after another."""
    out = x.clone()
    view = out
    for step in steps[:-1]:
        view = view[step]
    view[tuple(torch.from_numpy(p) if isinstance(p, np.ndarray) else p for p in steps[-1])] = v
    return out


def _maximum(x, y):
    return torch.maximum(*torch.broadcast_tensors(*map(torch.as_tensor, (x, y))))


def _minimum(x, y):
    return torch.minimum(*torch.broadcast_tensors(*map(torch.as_tensor, (x, y))))


def _part(src, index):
    """The part of src an index of that shape covers (src as it is when a number)."""
    if not isinstance(src, torch.Tensor):
        return src
    return src[tuple(slice(0, n) for n in index.shape)]


def _binary(fn):
    """torch's binary function with tensors for Python-number operands, broadcast together."""
    return lambda x, y: fn(*torch.broadcast_tensors(*map(
        lambda v: torch.as_tensor(v, dtype=torch.float64), (x, y))))


def _rotary(x, cos, sin, interleaved=False):
    """RoPE in torch: rotate-half (Hugging Face) or, interleaved, the complex product (Meta)."""
    if interleaved:
        z = torch.view_as_complex(x.reshape(x.shape[:-1] + (-1, 2)).contiguous())
        return torch.view_as_real(z * torch.complex(cos, sin)).reshape(x.shape)
    cos, sin = torch.cat([cos, cos], -1), torch.cat([sin, sin], -1)
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-b, a], -1) * sin


TORCH = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
    "div": operator.truediv,
    "pow": operator.pow,
    "neg": torch.neg,
    "exp": torch.exp,
    "log": torch.log,
    "sqrt": torch.sqrt,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "relu": torch.relu,
    "abs": torch.abs,
    "maximum": _maximum,
    "minimum": _minimum,
    "where": torch.where,
    "clip": lambda x, min=None, max=None: torch.clamp(x, min, max),  # noqa: A006
    "clone": torch.clone,
    "cast": lambda x, dtype: x.to(getattr(torch, np.dtype(dtype).name)),
    "sum": lambda x, dim=None, keepdim=False: torch.sum(x, _all_dims(x, dim), keepdim),
    "mean": lambda x, dim=None, keepdim=False: torch.mean(x, _all_dims(x, dim), keepdim),
    "max": lambda x, dim=None, keepdim=False: torch.amax(x, _all_dims(x, dim), keepdim),
    "min": lambda x, dim=None, keepdim=False: torch.amin(x, _all_dims(x, dim), keepdim),
    "var": lambda x, dim=None, keepdim=False, correction=1: torch.var(
        x, _all_dims(x, dim), correction=correction, keepdim=keepdim),
    "logsumexp": lambda x, dim=None, keepdim=False: torch.logsumexp(x, _all_dims(x, dim),
                                                                    keepdim),
    "reshape": torch.reshape,
    "permute": torch.permute,
    "expand": lambda x, shape: x.expand(shape),
    "diagonal": lambda x, offset=0, dim1=0, dim2=1: torch.diagonal(x, offset, dim1, dim2),
    "flip": lambda x, dims: torch.flip(x, dims),
    "getitem": _getitem,
    "setitem": _setitem,
    "take_along_dim": lambda x, indices, dim: torch.take_along_dim(x, indices.long(), dim),
    "cat": lambda *xs, dim=0: torch.cat(xs, dim),
    "stack": lambda *xs, dim=0: torch.stack(xs, dim),
    "matmul": torch.matmul,
    "linear": lambda x, w, b=None: TF.linear(x, w, b),
    "softmax": _softmax,
    "log_softmax": lambda x, dim=-1: torch.log_softmax(x, dim),
    "scaled_masked_softmax": _scaled_masked_softmax,
    "cross_entropy": lambda x, t, **kw: TF.cross_entropy(x, t.long(), **kw),
    "masked_fill": torch.masked_fill,
    "layer_norm": lambda x, w, b, n_dims=1, eps=1e-5: TF.layer_norm(x, x.shape[-n_dims:], w, b,
                                                                    eps),
    "rms_norm": lambda x, w, n_dims=1, eps=1e-5: TF.rms_norm(x, x.shape[-n_dims:], w, eps),
    "gelu": TF.gelu,
    "embedding": lambda ids, w: TF.embedding(ids.long(), w),
    "rotary": _rotary,
    "flash_attention": _attention,
    # pointwise math
    "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "atan2": _binary(torch.atan2),
    "sinh": torch.sinh, "cosh": torch.cosh, "asinh": torch.asinh, "acosh": torch.acosh,
    "atanh": torch.atanh, "exp2": torch.exp2, "expm1": torch.expm1, "log2": torch.log2,
    "log10": torch.log10, "log1p": torch.log1p, "logaddexp": _binary(torch.logaddexp),
    "erf": torch.erf, "logit": lambda x, eps=None: torch.logit(x, eps),
    "square": torch.square, "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal, "floor": torch.floor, "ceil": torch.ceil,
    "trunc": torch.trunc, "round": torch.round, "sign": torch.sign, "frac": torch.frac,
    "hypot": _binary(torch.hypot), "copysign": _binary(torch.copysign),
    "lerp": lambda s, e, w: torch.lerp(*torch.broadcast_tensors(
        *(torch.as_tensor(v, dtype=torch.float64) for v in (s, e, w)))),
    "remainder": _binary(torch.remainder), "fmod": _binary(torch.fmod),
    # torch has no gradient for floor_divide; floor(x / y) is the same function, flat a.e.
    "floor_divide": lambda x, y: torch.floor(x / y),
    "clamp": torch.clamp,
    # special functions and order statistics (ops/special.py)
    "erfc": torch.erfc, "erfinv": torch.erfinv, "lgamma": torch.lgamma,
    "digamma": torch.digamma, "nanmedian": torch.nanmedian,
    # torch.special's (ops/special_more.py; refuse_grad: tinyattn's flag, torch's refusal)
    # (torch's trigamma, polygamma(1, x), stops its series early: ~5e-10 off; ζ(2, x) is exact)
    "polygamma": lambda x, n: (torch.special.zeta(torch.full_like(x, 2.0), x) if n == 1 else
                               torch.polygamma(n, x)),
    "zeta": lambda x, q, refuse_grad=False: torch.special.zeta(x, q),
    "gammainc": lambda a, x, refuse_grad=False: torch.special.gammainc(a, x),
    "gammaincc": lambda a, x, refuse_grad=False: torch.special.gammaincc(a, x),
    "erfcx": torch.special.erfcx, "xlog1py": _binary(torch.special.xlog1py),
    "entr": torch.special.entr, "i0": torch.special.i0, "i0e": torch.special.i0e,
    "i1": torch.special.i1, "i1e": torch.special.i1e, "ndtri": torch.special.ndtri,
    "log_ndtr": torch.special.log_ndtr,
    "quantile": lambda x, q, ignore_nan=False, **kw: (torch.nanquantile if ignore_nan else
                                                      torch.quantile)(
        x, torch.tensor(q, dtype=x.dtype) if isinstance(q, tuple) else q, **kw),
    "prod": lambda x, dim=None, keepdim=False: (torch.prod(x) if dim is None else
                                                torch.prod(x, dim, keepdim)),
    "vector_norm": lambda x, ord=2, dim=None, keepdim=False: torch.linalg.vector_norm(  # noqa: A006
        x, ord, dim, keepdim),
    "cumsum": torch.cumsum, "cumprod": torch.cumprod, "logcumsumexp": torch.logcumsumexp,
    # (torch's own scatter backward fails on a src larger than the index: it reads src's part)
    "scatter": lambda x, i, src, dim: x.scatter(dim, i.long(), _part(src, i)),
    "scatter_add": lambda x, i, src, dim: x.scatter_add(dim, i.long(), _part(src, i)),
    "scatter_reduce": lambda x, i, src, dim, reduce, include_self=True: x.scatter_reduce(
        dim, i.long(), src, reduce, include_self=include_self),
    "einsum": lambda *xs, equation: torch.einsum(equation, *xs),
    # dense solvers and factorizations (ops/linalg.py; slogdet's output stacks sign, logabsdet)
    "inv": torch.linalg.inv, "det": torch.linalg.det,
    "slogdet": lambda a: torch.stack(tuple(torch.linalg.slogdet(a))),
    "solve": torch.linalg.solve, "cholesky": torch.linalg.cholesky,
    "solve_triangular": torch.linalg.solve_triangular,
    # activations
    "silu": TF.silu, "softplus": TF.softplus, "mish": TF.mish, "elu": TF.elu,
    "selu": TF.selu, "celu": TF.celu, "logsigmoid": TF.logsigmoid, "softsign": TF.softsign,
    "leaky_relu": TF.leaky_relu, "hardtanh": TF.hardtanh,
    # torch's own hardsigmoid backward multiplies by 1/6 rounded to float32 (a 3e-8 error);
    # relu6(x + 3) / 6 is the same function with the same edges, in float64
    "hardsigmoid": lambda x: TF.relu6(x + 3) / 6,
    "hardswish": TF.hardswish,
    "tanhshrink": TF.tanhshrink, "threshold": TF.threshold, "softshrink": TF.softshrink,
    "hardshrink": TF.hardshrink, "prelu": TF.prelu,
}

TORCHLESS = {
    "dropout": "its mask comes from tinyattn's own generator, which torch cannot reproduce; "
               "gradcheck covers its VJP and test_nn its train/eval behaviour",
    "rrelu": "its slopes come from tinyattn's own generator, as dropout's mask; gradcheck "
             "covers its VJP, tests/nn/test_shrink_threshold_prelu.py its eval form (torch's)",
    # torch.special's polynomials and Bessel functions have torch's values but no x-gradient
    # in torch ("not implemented"): tests/ops/test_special_polynomials_bessel.py compares the
    # values with torch's, gradcheck and test_special_poly_higher_order.py the derivatives
    **dict.fromkeys(
        [o.name for o in special_poly.OPS],
        "torch computes its values but has no gradient in x: the values are compared with "
        "torch's in tests/ops/test_special_polynomials_bessel.py, the gradients by gradcheck"),
    **dict.fromkeys(
        [o.name for o in special_poly_derivatives.OPS],
        "an internal op (a derivative the create_graph VJPs call) with no torch counterpart: "
        "compared with mpmath and numpy.polynomial in test_special_poly_higher_order.py"),
}


def parity_params():
    """(op name, case number) for every case; (name, None) for an op torch cannot be asked
    about and that has no reason written down, which the test turns into a failure."""
    params = []
    for name in sorted(REGISTRY):
        if name in TORCHLESS:
            continue
        if name not in TORCH:
            params.append((name, None))
            continue
        params += [(name, i) for i in range(len(REGISTRY[name].samples))]
    return params


def _to_torch(x):
    if isinstance(x, ta.Tensor):
        t = torch.from_numpy(x.numpy().copy())
        return t.requires_grad_() if x.requires_grad else t
    return x


def check_parity(name, index):
    """Case `index` of op `name`: the same forward values and input gradients as torch."""
    if index is None:
        pytest.fail(f"op {name!r} has no torch counterpart in TORCH and no reason in TORCHLESS")
    inputs, params = REGISTRY[name].samples[index]
    rng = np.random.default_rng(index)
    xs = S.materialize(inputs, rng, lambda v, rg: ta.tensor(v, requires_grad=rg))
    ts = [_to_torch(x) for x in xs]
    out = REGISTRY[name](*xs, **params)
    want = TORCH[name](*ts, **params)
    assert out.shape == tuple(want.shape), (out.shape, want.shape)
    assert out.dtype == np.float64 and want.dtype == torch.float64
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=f"{name} forward")
    g = rng.standard_normal(out.shape)
    out.backward(g)
    diff = [(x, t) for x, t in zip(xs, ts, strict=True)
            if isinstance(x, ta.Tensor) and x.requires_grad]
    grads = torch.autograd.grad(want, [t for _, t in diff], torch.from_numpy(g),
                                allow_unused=True)
    for i, ((x, _), gt) in enumerate(zip(diff, grads, strict=True)):
        gt = np.zeros(x.shape) if gt is None else gt.numpy()
        assert x.grad is not None, f"{name}: input {i} got no gradient"
        np.testing.assert_allclose(x.grad.numpy(), gt, rtol=1e-9, atol=1e-11,
                                   err_msg=f"{name} gradient of input {i}")


@pytest.mark.parametrize("name,index", parity_params(), ids=[f"{n}-{i}" for n, i in
                                                             parity_params()])
def test_parity_with_torch(name, index):
    check_parity(name, index)


def test_every_op_is_compared_or_says_why_not():
    assert set(TORCH) | set(TORCHLESS) >= set(REGISTRY)
    assert not set(TORCH) & set(TORCHLESS)
    assert set(TORCH) | set(TORCHLESS) <= set(REGISTRY), "stale names in the tables"
    assert all(len(why) > 20 for why in TORCHLESS.values())


def test_an_op_without_torch_mapping_fails(monkeypatch):
    monkeypatch.setitem(REGISTRY, "fresh_op", REGISTRY["neg"])
    assert ("fresh_op", None) in parity_params()
    with pytest.raises(pytest.fail.Exception, match="fresh_op.*no torch counterpart"):
        check_parity("fresh_op", None)
    monkeypatch.setitem(TORCHLESS, "fresh_op", "a test stand-in that torch has no name for")
    assert not [p for p in parity_params() if p[0] == "fresh_op"]


# Composite Tensor methods (built from the registered ops) against torch, forward and backward.

METHODS = {
    "transpose": lambda x: x.transpose(0, 2),
    "T": lambda x: x[1].T,
    "mT": lambda x: x.mT,
    "flatten": lambda x: x.flatten(1),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(1).unsqueeze(-1),
    "std": lambda x: x.std(dim=1),
    "split": lambda x: x.split([1, 2], dim=1)[1],
    "chunk": lambda x: x.chunk(2, dim=2)[0],
    "rsub_rdiv": lambda x: (2.0 - x) / (3.0 + x * x),
    "sq_pow": lambda x: (x * x) ** 1.5,
}


@pytest.mark.parametrize("name", list(METHODS))
def test_tensor_methods_match_torch(name):
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((2, 3, 4))
    g = None
    results = []
    for make in (lambda v: ta.tensor(v, requires_grad=True),
                 lambda v: torch.tensor(v, requires_grad=True)):
        x = make(xv)
        out = METHODS[name](x)
        g = rng.standard_normal(tuple(out.shape)) if g is None else g
        out.backward(g if isinstance(x, ta.Tensor) else torch.from_numpy(g))
        results.append((np.asarray(out.detach().numpy()), x.grad.numpy()))
    (a, ga), (b, gb) = results
    np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(ga, gb, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(S.GRID, 2)))
def test_broadcasting_grid_matches_torch(a, b):
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        pytest.skip("shapes do not broadcast")
    rng = np.random.default_rng(6)
    av, bv = rng.standard_normal(a), rng.uniform(0.5, 2.0, b)
    f = lambda x, y: (x * y - x / y + x.maximum(y)).exp().sum()  # noqa: E731
    x, y = ta.tensor(av, requires_grad=True), ta.tensor(bv, requires_grad=True)
    f(x, y).backward()
    tx, ty = torch.tensor(av, requires_grad=True), torch.tensor(bv, requires_grad=True)
    (tx * ty - tx / ty + torch.maximum(tx, ty)).exp().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-10)
