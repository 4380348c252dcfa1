"""float16 tensors with Python numbers compute as torch 2.13 computes them, bit for bit, forward
and gradients; float16 overflow gives inf without NumPy's RuntimeWarnings (torch's silence).

NumPy 2 (NEP 50) casts a Python float to float16 first: x / 70000.0 was x / inf = 0 and
x * 0.1 was x * float16(0.1). torch casts the number to float16 for +, -, %, fmod, pow, where
and the comparisons, but x * c, x / c, x // c (and their VJPs g * c, g / c) take c in float32
and round once; c / x is x.reciprocal() * c; c // x and x // y go step by step in float16; a
pow exponent, clamp bound, fill value or alpha past 65504 is refused. The arrays have 64
entries: torch's vectorized loop covers them all (its scalar tail, for the last n % 32 entries,
rounds add's alpha * y and addcmul's product to float16 first, so torch itself differs there).
"""

import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import autograd as ag
from tinyattn.errors import DTypeError

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")  # torch warns of none either

H = np.float16
_EDGES = [65504.0, -65504.0, 60000.0, 32768.0, 2049.0, 1000.0, 6e-8, -6e-8, 1e-7, 6.1e-5, 1e-4,
          0.1, 0.3333, 3.0, -2.5, 0.5, 1.0, -1.0, 0.0, 7.0, 1e-3, -0.1, 255.9, 2.0]


def _values(seed=0, positive=False):
    rng = np.random.default_rng(seed)
    rest = np.concatenate([rng.standard_normal(20) * 10, rng.uniform(-1e-3, 1e-3, 10),
                           rng.uniform(-7e4, 7e4, 10)])
    with np.errstate(over="ignore"):
        v = np.concatenate([_EDGES, rest]).astype(H)
    v = v[:64]
    return np.abs(v) if positive else v


X = _values()
NUMBERS = [70000.0, -70000.0, 65519.0, 65504.0, 100000, 0.1, 3.0, 1e-8, 0.3, 2, 1.0001,
           2049.0, 1 / 3]
IN_RANGE = [n for n in NUMBERS if abs(n) <= 65504]


def _pair(values=X, grad=False):
    return (ta.tensor(values, requires_grad=grad),
            torch.tensor(values, requires_grad=grad))


def _same(got, want, ulp=0, signed_zeros=True):
    """Bit for bit (every NaN alike), or within `ulp` float16 steps; without signed_zeros, 0.0
    and -0.0 alike (a masked gradient here is g * False, which is -0.0 for a negative g, in
    every dtype; torch selects 0.0)."""
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if got.dtype != H:
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(got) & np.isnan(want)
    a, b = got.view(np.uint16).astype(np.int64), want.view(np.uint16).astype(np.int64)
    if ulp:  # (signed-magnitude bits to a line of integers: neighbours differ by 1)
        a, b = (np.where(v & 0x8000, -(v & 0x7FFF), v) for v in (a, b))
        bad = ~nan & (np.abs(a - b) > ulp) & ~(got == want)
    else:
        bad = ~nan & (a != b) & (signed_zeros | (got != want))
    assert not bad.any(), [(i, X[i] if len(X) == len(got) else None, got[i], want[i])
                           for i in np.flatnonzero(bad)[:6]]


def _both(fn, *values, grad_seed=None, ulp=0, wrt=None):
    """fn on tinyattn and torch tensors made of `values` (float16): the outputs the same, and
    with grad_seed, the gradients too (backward of a random float16 gradient)."""
    grad = grad_seed is not None
    ours = [ta.tensor(v, requires_grad=grad) for v in values]
    theirs = [torch.tensor(v, requires_grad=grad) for v in values]
    got, want = fn(ta, *ours), fn(torch, *theirs)
    _same(got, want, ulp)
    if grad:
        g = (np.random.default_rng(grad_seed).standard_normal(want.shape) * 4).astype(H)
        got.backward(ta.tensor(g))
        want.backward(torch.tensor(g))
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            if wrt is None or i in wrt:
                assert a.grad.dtype == H
                _same(a.grad, b.grad, ulp, signed_zeros=False)


# ---- arithmetic with a number: forward -----------------------------------------------------------

BINARY = {
    "add": lambda x, c: x + c, "radd": lambda x, c: c + x, "sub": lambda x, c: x - c,
    "rsub": lambda x, c: c - x, "mul": lambda x, c: x * c, "rmul": lambda x, c: c * x,
    "div": lambda x, c: x / c, "rdiv": lambda x, c: c / x, "true_divide": lambda x, c:
    x.true_divide(c), "floordiv": lambda x, c: x // c, "rfloordiv": lambda x, c: c // x,
    "floor_divide": lambda x, c: x.floor_divide(c), "mod": lambda x, c: x % c,
    "rmod": lambda x, c: c % x, "remainder": lambda x, c: x.remainder(c),
    "fmod": lambda x, c: x.fmod(c), "rpow": lambda x, c: c ** x,
    "div_floor": lambda x, c: x.div(c, rounding_mode="floor"),
    "div_trunc": lambda x, c: x.div(c, rounding_mode="trunc"),
    "eq": lambda x, c: x == c, "ne": lambda x, c: x != c, "lt": lambda x, c: x < c,
    "le": lambda x, c: x <= c, "gt": lambda x, c: x > c, "ge": lambda x, c: x >= c,
}


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("c", NUMBERS)
def test_a_number_operand_as_torch(name, c):
    fn = BINARY[name]
    _both(lambda lib, x: fn(x, c), X)


def test_the_classic_cases():
    x = ta.tensor(np.array([1.0, 3.0, 60000.0], H))
    assert (x / 70000.0).numpy().tolist() == torch.tensor([1.0, 3.0, 60000.0],
                                                          dtype=torch.float16).div(7e4).tolist()
    assert float((x / 70000.0)[0]) > 0  # not x / inf
    assert (x * 0.1).numpy()[1] == H(0.3)  # 3 * 0.1 in float32, rounded once (not 0.2998)
    assert (x * 70000.0).numpy()[0] == np.inf


@pytest.mark.parametrize("c", [2, 3.0, 0.5, 0.1, -1.0, -0.5, 1e-8, 65504.0, -2])
def test_pow_with_a_number_exponent(c):
    _both(lambda lib, x: x ** c, X)
    _both(lambda lib, x: x.pow(c), _values(1, positive=True), grad_seed=1)


@pytest.mark.parametrize("c", [70000.0, 65505.0, -70000.0, 100000])
def test_pow_refuses_an_exponent_past_float16(c):
    with pytest.raises(RuntimeError):
        torch.tensor(X) ** c
    with pytest.raises(DTypeError, match="without overflow"):
        ta.tensor(X) ** c
    ta.tensor(X) ** math.inf  # (inf fits: torch takes it too)


def test_tensor_by_tensor_floor_division_and_remainder():
    y = _values(3)
    for fn in (lambda lib, a, b: a // b, lambda lib, a, b: a % b, lambda lib, a, b: b // a,
               lambda lib, a, b: a.fmod(b), lambda lib, a, b: lib.floor_divide(a, b)):
        _both(fn, X, y)


# ---- gradients -----------------------------------------------------------------------------------

GRADIENTS = {
    "add": lambda x, c: x + c, "sub": lambda x, c: x - c, "rsub": lambda x, c: c - x,
    "mul": lambda x, c: x * c, "rmul": lambda x, c: c * x, "div": lambda x, c: x / c,
    "rdiv": lambda x, c: c / x, "mod": lambda x, c: x % c, "fmod": lambda x, c: x.fmod(c),
}


@pytest.mark.parametrize("name", GRADIENTS)
@pytest.mark.parametrize("c", NUMBERS)
def test_gradients_with_a_number(name, c):
    fn = GRADIENTS[name]
    _both(lambda lib, x: fn(x, c), X, grad_seed=2)


@pytest.mark.parametrize("c", [2.0, 0.5, 0.1, 3.0, 70000.0, 0.0, -2.0])
def test_rpow_gradients(c):
    _both(lambda lib, x: c ** x, _values(4) / H(4000), grad_seed=5)


def test_the_vjp_sees_float32_numbers_and_gives_float16_gradients():
    """x * 70000 and x / 70000: the VJP computes g * c and g / c in float32; the walk hands
    float16 gradients to float16 leaves (an inf where g * c overflows)."""
    for fn in (lambda x: x * 70000.0, lambda x: x / 70000.0, lambda x: 70000.0 / x,
               lambda x: (x * 0.1) * 3.0):
        x, t = _pair(np.array([1.0, 3.0, 0.1], H), grad=True)
        fn(x).sum().backward()
        fn(t).sum().backward()
        assert x.grad.dtype == H
        _same(x.grad, t.grad)
    x = ta.tensor(np.array([1.0], H), requires_grad=True)
    (x * 70000.0).sum().backward()
    assert x.grad.numpy()[0] == np.inf


def test_a_node_that_saved_only_a_number_runs_again():
    """x * c keeps c alone (torch's too): a second backward through it works."""
    x = ta.tensor(np.array([1.0, 2.0], H), requires_grad=True)
    y = x * 0.1
    y.sum().backward()
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), (2 * (np.float32(1) * np.float32(0.1))
                                                   ).astype(H) * np.ones(2, H))


# ---- numbers as values, bounds and weights -------------------------------------------------------

@pytest.mark.parametrize("c", IN_RANGE + [-math.inf, math.inf])
def test_where_masked_fill_full_like_clamp(c):
    _both(lambda lib, x: lib.where(x > 1, x, c), X, grad_seed=6)
    _both(lambda lib, x: lib.where(x > 1, c, x), X, grad_seed=6)
    _both(lambda lib, x: x.masked_fill(x > 1, c), X, grad_seed=7)
    _both(lambda lib, x: lib.full_like(x, c), X)
    _both(lambda lib, x: x.clamp(min=c), X, grad_seed=8)
    _both(lambda lib, x: x.clamp(max=c), X, grad_seed=8)
    _both(lambda lib, x: x.clip(-abs(c), abs(c)), X, grad_seed=8)


@pytest.mark.parametrize("c", [70000.0, 65505.0, -70000.0, 100000])
def test_a_value_or_bound_past_float16_is_refused(c):
    x, t = _pair()
    for fn in (lambda v: v.clamp(min=c), lambda v: v.clamp(max=c), lambda v: v.clip(-1, c),
               lambda v: v.masked_fill(v > 1, c), lambda v: v.clone().fill_(c),
               lambda v: v.clone().clamp_(max=c), lambda v: v.add(v, alpha=c),
               lambda v: v.sub(v, alpha=c)):
        with pytest.raises(RuntimeError, match="without overflow"):
            fn(t)
        with pytest.raises(DTypeError, match="without overflow"):
            fn(x)
    with pytest.raises(DTypeError):
        ta.full_like(x, c)
    _both(lambda lib, x: lib.where(x > 1, x, c), X)  # where casts: inf, quietly


@pytest.mark.parametrize("w", [0.1, 0.3, 0.5, 0.7, 3.0, -2.0, 1e-8, 70000.0])
def test_lerp_with_a_number_weight(w):
    _both(lambda lib, a, b: a.lerp(b, w), X, _values(9), grad_seed=10)


@pytest.mark.parametrize("v", [0.1, 2, 3.0, 1 / 3, 1e-8, 65504.0, 70000.0, -70000.0])
def test_addcmul_and_addcdiv_values(v):
    y, z = _values(11) / H(16), _values(12, positive=True) + H(0.5)
    _both(lambda lib, x, a, b: x.addcmul(a, b, value=v), X, y, z)
    _both(lambda lib, x, a, b: x.addcdiv(a, b, value=v), X, y, z)
    _both(lambda lib, x, a, b: lib.addcmul(x, a, b, value=v), X, y, z, grad_seed=13)
    if abs(v) <= 65504:  # (torch's addcdiv VJP fills value into a float16 tensor: refused)
        _both(lambda lib, x, a, b: lib.addcdiv(x, a, b, value=v), X, y, z, grad_seed=13)


@pytest.mark.parametrize("alpha", [0.1, 3.0, 1 / 3, 1e-3, 2049.0, 2, -0.5])
def test_add_and_sub_with_alpha(alpha):
    y = _values(14)
    _both(lambda lib, x, b: x.add(b, alpha=alpha), X, y)
    _both(lambda lib, x, b: x.sub(b, alpha=alpha), X, y)
    _both(lambda lib, x: x.add(0.3, alpha=alpha), X)
    # torch's VJP multiplies by alpha in float32, the forward by float16(alpha)
    _both(lambda lib, x, b: x.add(b, alpha=alpha), X, y, grad_seed=15)
    _both(lambda lib, x, b: x.sub(b, alpha=alpha), X, y, grad_seed=16)
    _both(lambda lib, x, b: b.clone().add_(x, alpha=-alpha), X, y)  # an optimizer's step


IN_PLACE = {
    "mul_": lambda x: x.mul_(0.1), "div_": lambda x: x.div_(70000.0),
    "imul": lambda x: x.__imul__(0.3), "itruediv": lambda x: x.__itruediv__(3.0),
    "ifloordiv": lambda x: x.__ifloordiv__(0.1), "imod": lambda x: x.__imod__(-3.0),
    "addcmul_": lambda x: x.addcmul_(x.clone(), x.clone(), value=0.1),
    "addcdiv_": lambda x: x.addcdiv_(x.clone(), x.clone() + 70000, value=3.0),
    "lerp_": lambda x: x.lerp_(x.clone() * 2, 0.3), "pow_": lambda x: x.pow_(2),
    "add_": lambda x: x.add_(x.clone(), alpha=0.1), "sub_": lambda x: x.sub_(2.0, alpha=0.3),
    "remainder_": lambda x: x.remainder_(-3.0), "clamp_": lambda x: x.clamp_(0.1, 3.0),
    "masked_fill_": lambda x: x.masked_fill_(x > 1, 0.1), "fill_": lambda x: x.fill_(1e-8),
}


@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_forms(name):
    _both(lambda lib, x: IN_PLACE[name](x.clone()), X)


def test_a_recorded_add_with_alpha_in_place():
    a0, b0 = _pair(grad=True)
    a, b = a0 * 1.0, b0 * 1.0
    a.add_(a0, alpha=0.1)
    b.add_(b0, alpha=0.1)
    _same(a, b)
    a.sum().backward()
    b.sum().backward()
    _same(a0.grad, b0.grad)


# ---- no RuntimeWarning where float16 overflows ---------------------------------------------------


def test_float16_overflow_gives_inf_without_warnings():
    """What overflows float16 is inf, silently, as in torch: elementwise ops, a matrix
    product, sum and mean, casts (.half(), .to(float16), tensor(..., dtype=float16)) and the
    backward passes through them."""
    big = np.array([60000.0, 65504.0, -65504.0, 1.0], H)
    # (each leaf used once: where two gradient parts of one tensor overflow to +inf and -inf,
    # backward's sum of them still warns, NumPy's "invalid value in add")
    ops = [lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x * 3.0,
           lambda x, y: x * 70000.0, lambda x, y: x - 70000.0, lambda x, y: x + 1e39,
           lambda x, y: x / 1e-8, lambda x, y: 1.0 / x, lambda x, y: x ** 3,
           lambda x, y: 2.0 ** x, lambda x, y: x.exp(), lambda x, y: x // 1e-8,
           lambda x, y: x % 0.0, lambda x, y: x.lerp(y, 3.0),
           lambda x, y: x.addcmul(y, y.detach(), value=2.0),
           lambda x, y: x.addcdiv(y, y.detach() * 1e-4, value=2.0),
           lambda x, y: x.add(y, alpha=2.0), lambda x, y: x.where(x.detach() > 0, 70000.0),
           lambda x, y: x.square(), lambda x, y: x.sum(), lambda x, y: x.mean(),
           lambda x, y: x.reshape(2, 2) @ y.reshape(2, 2), lambda x, y: x.float().half(),
           lambda x, y: (x.double() * 1e6).to(ta.float16),
           lambda x, y: x.div(1e-4, rounding_mode="trunc"),
           lambda x, y: x.clamp(max=math.inf)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fn in ops:
            x, y = (ta.tensor(big, requires_grad=True) for _ in range(2))
            out = fn(x, y)
            assert out.dtype == H
            out.backward(ta.ones_like(out) * 3.0)
            assert x.grad.dtype == H
        x = ta.tensor(big)
        assert np.isinf((x.reshape(2, 2) @ x.reshape(2, 2)).numpy()).all()
        for made in (ta.tensor([1e5, 70000.0], dtype=ta.float16), ta.tensor([100000]).half(),
                     ta.tensor(np.array([1e6])).half(),
                     ta.tensor(np.array([1e6, 1.0], np.float32)).to(H)):
            assert made.dtype == H and np.isinf(made.numpy()[0])


# ---- float32 and float64 stay off the rare branch ------------------------------------------------


def test_float32_and_float64_never_reach_promoted(monkeypatch):
    """apply's promotion branch is for float16, mixed dtypes and integers only: a float32 or
    float64 op with Python numbers runs as before, without a call into dtypes.promoted."""
    def refuse(op, arrays):
        raise AssertionError(f"{op.name} took the promotion branch")

    monkeypatch.setattr(ag, "promoted", refuse)
    for dtype in (np.float32, np.float64):
        x = ta.tensor(np.array([1.0, 2.0, 3.0], dtype), requires_grad=True)
        y = ((x * 0.1 + 1) / 70000.0 - x ** 2 + 2.0 ** x).clamp(min=-1e6).exp()
        z = (x.reshape(3, 1) @ x.reshape(1, 3)).sum() + y.mean() + (x // 0.3).sum()
        z.backward()
        assert z.dtype == dtype and x.grad.dtype == dtype


def test_a_captured_step_replays_the_float16_forms():
    """capture() records the float16 forms apply ran: the replay gives the eager step's loss
    and gradients bit for bit (x * 0.1 in float32, 3.0 / x through the reciprocal, ...)."""
    w = ta.tensor(_values(20)[:8] / H(100), requires_grad=True)

    def fn(x):
        h = (w * 0.1 + x) / 70000.0 * 65504.0 - 3.0 / (w + 2049.0) + (x // 0.3) * 1e-3
        return (h.lerp(x, 0.3) ** 2).sum() + w.addcmul(x, x, value=0.1).mean()

    step = ta.capture(fn)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = ta.tensor((rng.standard_normal(8) * 3).astype(H))
        w.grad = None
        got = step(x)
        want, (gw,) = fn(x), ta.autograd.grad(fn(x), [w])
        _same(got, want)
        _same(w.grad, gw)
    assert step.state == "replaying"


# ---- a 0-d float32 or float64 tensor operand, as a number ----------------------------------------

ZERO_D = {
    "mul": lambda x, t: x * t, "rmul": lambda x, t: t * x, "div": lambda x, t: x / t,
    "rdiv": lambda x, t: t / x, "floordiv": lambda x, t: x // t, "rfloordiv": lambda x, t: t // x,
    "div_floor": lambda x, t: x.div(t, rounding_mode="floor"),
    "div_trunc": lambda x, t: x.div(t, rounding_mode="trunc"), "add": lambda x, t: x + t,
    "sub": lambda x, t: x - t, "mod": lambda x, t: x % t, "pow": lambda x, t: x.abs() ** t,
    "mul_": lambda x, t: x.clone().mul_(t), "div_": lambda x, t: x.clone().div_(t),
    "floor_divide_": lambda x, t: x.clone().floor_divide_(t),
    "clamp": lambda x, t: x.clamp(min=t), "lerp": lambda x, t: x.lerp(x * 2, t),
}
ZERO_D_VALUES = [70000.0, -70000.0, 0.1, 7.0, 1 / 3, 65519.0, 2049.0, 1e-8, 1.0001]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ZERO_D)
@pytest.mark.parametrize("c", ZERO_D_VALUES)
def test_a_0d_wide_tensor_as_torch(dtype, name, c):
    """torch takes a 0-d float32 (float64) tensor as the second operand of a float16 *, / or //
    as a number, in float32 (h / tensor(70000.) is not h / inf = 0); as the first operand, or
    of +, -, %, pow, clamp, lerp, it is cast to float16 first."""
    if name in ("clamp",) and abs(c) > 65504:
        return  # (torch's clamp casts a tensor bound: inf)
    t_ours, t_theirs = ta.tensor(np.array(c, dtype)), torch.tensor(np.array(c, dtype))
    x, t = _pair()
    _same(ZERO_D[name](x, t_ours), ZERO_D[name](t, t_theirs))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["mul", "rmul", "div", "rdiv", "add", "sub"])
@pytest.mark.parametrize("c", [70000.0, 0.1, 7.0, 1 / 3, 1e-3, -2049.0])
def test_a_0d_wide_tensor_gradients(dtype, name, c):
    """Both gradients as torch's: the float16 input's (g * c, g / c in float32, rounded once),
    and the 0-d tensor's, computed in float16 step by step (for /: -g * ((x / c) / c)), summed
    (in float32, rounded to float16) and given in the tensor's dtype."""
    fn = ZERO_D[name]
    g = (np.random.default_rng(21).standard_normal(len(X)) * 4).astype(H)
    got, want = [], []
    for lib, out in ((ta, got), (torch, want)):
        x = lib.tensor(X, requires_grad=True)
        t = lib.tensor(np.array(c, dtype), requires_grad=True)
        y = fn(x, t)
        y.backward(lib.tensor(g))
        out += [y, x.grad, t.grad]
    for a, b in zip(got, want, strict=True):
        _same(a, b, signed_zeros=False)


def test_the_0d_tensor_cases_of_the_review():
    h, th = (lib.tensor([1.5, 3.0, 600.0], dtype=lib.float16, requires_grad=True)
             for lib in (ta, torch))
    y, ty = h / ta.tensor(70000.0), th / torch.tensor(70000.0)
    assert float(y[0]) > 0
    _same(y, ty)
    y.sum().backward()
    ty.sum().backward()
    _same(h.grad, th.grad)
    assert (h.grad.numpy() > 0).all()
    _same(h.detach() // ta.tensor(0.1), th.detach() // torch.tensor(0.1))
    h16 = h.detach().clone()
    h16.div_(ta.tensor(7e4))
    _same(h16, th.detach().clone().div_(torch.tensor(7e4)))


def test_tensor_by_tensor_division_gradients():
    """torch's VJP of x / y in float16: g / y and -g * ((x / y) / y), each step rounded (not
    -(g / y) * x / y)."""
    y = _values(22) + H(0.5)
    _both(lambda lib, a, b: a / b, X, y, grad_seed=23)
    _both(lambda lib, a, b: a / b, _values(24) / H(1000), y / H(3000), grad_seed=25)


# ---- number parameters of other ops: torch's float16 kernels take most in float32 --------------


def _every_float16(low=-math.inf, high=math.inf):
    """Every finite float16 value in [low, high], a multiple of 64 of them (torch's vector loop)"""
    v = np.arange(65536, dtype=np.uint16).view(H)
    v = v[np.isfinite(v) & (v >= low) & (v <= high)]
    return v[: len(v) // 64 * 64]


ALL = _every_float16()
PARAMS = [0.3, 1 / 3, 0.1, 2049.5, 1e-8, 2.5, 7e4]


def _nnf(lib):
    """lib's torch.nn.functional"""
    return ta.nn.functional if lib is ta else torch.nn.functional


def _all_values(fn, values=ALL, ulp=0):
    """fn on every float16 value: torch's output and gradient (of a random float16 g)"""
    _both(fn, values, grad_seed=30, ulp=ulp)


@pytest.mark.parametrize("c", PARAMS)
def test_threshold_compares_in_float32(c):
    """x <= threshold in float32 (0.30005 is above 0.3; 70000 is a threshold, no error); the
    value is cast to float16 (past 65504: refused, as torch)"""
    _all_values(lambda lib, x: _nnf(lib).threshold(x, c, -7.0))
    _all_values(lambda lib, x: _nnf(lib).threshold(x, -c, 3.0))
    with pytest.raises(DTypeError, match="without overflow"):
        _nnf(ta).threshold(ta.tensor(X), c, 7e4)


@pytest.mark.parametrize("c", PARAMS)
def test_shrinks_leaky_relu_hardtanh(c):
    _all_values(lambda lib, x: _nnf(lib).leaky_relu(x, c))
    _all_values(lambda lib, x: _nnf(lib).leaky_relu(x, -c))
    _all_values(lambda lib, x: _nnf(lib).rrelu(x, c / 4, c))  # (eval: the mean slope)
    if c > 65504:  # torch refuses these past float16's range
        x = ta.tensor(X)
        for fn in (lambda: _nnf(ta).hardshrink(x, c), lambda: _nnf(ta).hardtanh(x, -c, c),
                   lambda: _nnf(ta).hardtanh(x, -1.0, c)):
            with pytest.raises(DTypeError, match="without overflow"):
                fn()
        return
    _all_values(lambda lib, x: _nnf(lib).softshrink(x, c))
    _all_values(lambda lib, x: _nnf(lib).hardshrink(x, c))
    _all_values(lambda lib, x: _nnf(lib).hardtanh(x, -c, c))
    _all_values(lambda lib, x: _nnf(lib).hardtanh(x, c / 3, c))
    _all_values(lambda lib, x: x.clamp(-c, c))
    _all_values(lambda lib, x: _nnf(lib).leaky_relu(x.clone(), c, inplace=True) * 1)


@pytest.mark.parametrize("c", PARAMS)
def test_celu_elu_softplus(c):
    """in float32 with torch's formulas; its exp and log1p (SLEEF's) differ from NumPy's in the
    last float32 bit, which moves a few values by one float16 step"""
    _all_values(lambda lib, x: _nnf(lib).celu(x, c), ulp=1)
    _all_values(lambda lib, x: _nnf(lib).elu(x, c), ulp=1)
    _all_values(lambda lib, x: _nnf(lib).softplus(x, c, 20.0), ulp=1)
    _all_values(lambda lib, x: _nnf(lib).softplus(x, 1.5, c), ulp=1)


def test_celu_with_a_tiny_alpha_and_softplus_past_its_exp():
    """celu(x, 1e-8): x * 1e8 in float32 (not x / float16(1e-8) = x / 0, NaN); softplus with a
    threshold above ~88 / beta is torch's log1p(exp(88.8)) = inf there (and a NaN gradient)"""
    _both(lambda lib, x: _nnf(lib).celu(x, 1e-8), X, grad_seed=31)
    _both(lambda lib, x: _nnf(lib).softplus(x, 1.0, 7e4), X, grad_seed=32)
    assert np.isinf(_nnf(ta).softplus(ta.tensor(np.array([100.0], H)), 1.0, 7e4).numpy()).all()


@pytest.mark.parametrize("eps", [0.1, 1e-3, 1 / 3, 1e-8, 0.4999, 0.0])
def test_logit_clamps_to_float16s_one_minus_eps(eps):
    """[f16(eps), f16(1 - f16(eps))], not f16(1 - eps): 1/3 gives 0.667, not 0.6665"""
    _all_values(lambda lib, x: x.logit(eps), _every_float16(0, 1))


def test_the_parameter_cases_of_the_review():
    v = np.array([0.3, 0.1, -0.3], H)
    _same(_nnf(ta).threshold(ta.tensor(v), 0.3, -7.0),
          _nnf(torch).threshold(torch.tensor(v), 0.3, -7.0))
    assert _nnf(ta).threshold(ta.tensor(v), 0.3, -7.0).numpy()[0] == H(0.3)
    _same(_nnf(ta).threshold(ta.tensor(v), 70000.0, 0.0),
          _nnf(torch).threshold(torch.tensor(v), 7e4, 0.0))
    w = np.array([0.3, -0.3, -65504.0], H)
    got = _nnf(ta).leaky_relu(ta.tensor(w), 70000.0)
    _same(got, _nnf(torch).leaky_relu(torch.tensor(w), 70000.0))
    assert got.numpy()[1] == H(-21008) and got.numpy()[2] == -np.inf


# ---- no RuntimeWarning where torch gives inf or NaN silently ------------------------------------


def _silently(fn):
    """fn() on both libraries under warnings-as-errors: the same values (lists of tensors)"""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got, want = fn(ta), fn(torch)
    for a, b in zip(got, want, strict=True):
        _same(a, b)


def test_float16_gradient_sums_past_65504_are_inf_silently():
    """two gradient parts of one tensor (backward's sum), .grad over two backward() calls (in
    place, and into a .grad the user holds), a broadcast gradient summed, a float32 gradient
    cast to a float16 leaf"""
    def parts(lib):
        x = lib.tensor(np.array([40000.0, 1.0, -40000.0], H), requires_grad=True)
        y = x * 1
        (y * 1 + y * 1 - y * 0).backward(lib.tensor(np.array([30000.0, 1.0, 40000.0], H)))
        return [x.grad]

    def twice(lib):
        x = lib.tensor(np.array([1.0, 1.0], H), requires_grad=True)
        (x * 40000.0).sum().backward()
        held = x.grad
        (x * 40000.0).sum().backward()
        x.grad = x.grad.clone()  # (a copy: the next sum goes into a new array)
        (x * 40000.0).sum().backward()
        return [x.grad, held]

    def summed(lib):
        x = lib.tensor(np.array([1.0, -1.0], H), requires_grad=True)
        y = lib.tensor(np.array([[30000.0, -30000.0]] * 3, H))
        (x * y).backward(lib.tensor(np.array([[1.0, 1.0], [1.0, 1.0], [1.0, -1.0]], H)))
        return [x.grad]

    def cast(lib):
        x = lib.tensor(np.array([1.0, 2.0], H), requires_grad=True)
        (x * lib.tensor(np.array([1e6, 1.0], np.float32))).sum().backward()
        x2 = lib.tensor(np.array([1.0, 2.0], H), requires_grad=True)
        x2.float().mul(1e6).sum().backward()
        return [x.grad, x2.grad]

    def indexed(lib):  # (getitem's parts go straight into the sum)
        x = lib.tensor(np.array([1.0, 2.0], H), requires_grad=True)
        y = x * 1
        (y[0] * 40000.0 + y[0] * 40000.0 + y[1]).backward()
        x2 = lib.tensor(np.array([1.0, 2.0], H), requires_grad=True)
        (x2[0] * 40000.0 + x2[0] * 40000.0 + x2[1:] * 3.0).sum().backward()
        return [x.grad, x2.grad]

    for fn in (parts, twice, summed, cast, indexed):
        _silently(fn)


def test_float16_stores_past_65504_are_inf_silently():
    def stores(lib):
        big = lib.tensor(np.array([1e5, 3.0], np.float32))
        x = lib.tensor(np.array([60000.0, 1.0], H))
        z = lib.zeros(2, dtype=lib.float16)
        w = lib.zeros(3, dtype=lib.float16)
        w[0] = lib.tensor(1e5)
        w[1:] = lib.tensor([7e4, 1.0])
        return [x.clone().mul_(big), x.clone().add_(big), z.clone().copy_(big),
                z.clone().fill_(lib.tensor(1e5)), w, x.clone().div_(lib.tensor(1e-9))]

    def recorded(lib):  # (setitem, copy_ recorded in the graph)
        x = lib.tensor(np.array([1.0, 2.0], H), requires_grad=True)
        y = x * 1
        y[0] = lib.tensor(1e5, requires_grad=True)
        y.copy_(lib.tensor([7e4, 1.0], requires_grad=True))
        y.sum().backward()
        return [y, x.grad]

    _silently(stores)
    _silently(recorded)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_rounded_division_by_zero_float_power_special_functions(dtype):
    """div(..., rounding_mode="trunc") by 0 is ±inf and NaN in every float dtype (one node, with
    zero gradients, as torch's: not 0 / 0 = NaN through x / y); float_power past float64;
    lgamma and digamma of 3e38 and 1e-45 (float32's); erfinv's gradient at ±1; add with
    alpha = inf"""
    def fn(lib):
        dt = getattr(lib, dtype)
        x = lib.tensor([1.0, -1.0, 0.0, 7.5], dtype=dt, requires_grad=True)
        zeros = lib.zeros(4, dtype=dt, requires_grad=True)
        outs = [x.div(0.0, rounding_mode=m) for m in ("trunc", "floor")]
        outs.append(x.div(zeros, rounding_mode="trunc"))
        outs.append(x.div(lib.tensor(0.1, dtype=dt), rounding_mode="trunc"))
        for o in outs[:3]:  # (not summed: a float32 sum of inf and -inf warns, as NumPy's)
            o.backward(lib.ones(4, dtype=dt))
        p = lib.tensor([1e5, 2.0, 0.0, -3e5], dtype=dt, requires_grad=True)
        fp = lib.float_power(p, 201.0)
        fp.backward(lib.ones(4, dtype=lib.float64))
        e = lib.tensor([1.0, -1.0], dtype=dt, requires_grad=True)
        inv = lib.erfinv(e)
        inv.backward(lib.ones(2, dtype=dt))
        out = outs + [x.grad, zeros.grad, fp, p.grad, inv, e.grad]
        if dtype != "float16":
            s, s2 = (lib.tensor([3e38, 1e-45, -1e-45, 3.4e38], dtype=dt, requires_grad=True)
                     for _ in range(2))
            lg, dg = lib.lgamma(s), lib.digamma(s2)
            lg.backward(lib.ones(4, dtype=dt))
            dg.backward(lib.ones(4, dtype=dt))
            out += [lg, dg, s.grad, s2.grad]
        else:
            a = lib.tensor(np.array([1.0, 0.0, -1.0], H), requires_grad=True)
            b = lib.tensor(np.array([1.0, 0.0, -1.0], H), requires_grad=True)
            c = a.add(b, alpha=math.inf)
            c.backward(lib.tensor(np.array([1.0, 0.0, 1.0], H)))
            out += [c, b.grad]
        return out

    _silently(fn)


def test_a_float16_division_with_a_rounding_mode_as_torch():
    """trunc: trunc(x / c) in float32 (c a number or a 0-d float32 tensor), rounded once"""
    y = _values(33) + H(0.5)
    for c in (0.1, 1 / 3, 7e4, 1e-8, -2.5):
        _both(lambda lib, x, c=c: x.div(c, rounding_mode="trunc"), X, grad_seed=34)
        _both(lambda lib, x, c=c: x.div(lib.tensor(c), rounding_mode="trunc"), X)
    _both(lambda lib, a, b: a.div(b, rounding_mode="trunc"), X, y, grad_seed=35)
