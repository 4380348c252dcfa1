"""tinyattn.Generator (torch.Generator): a random stream of its own for every function that takes
generator=, reproducible from its seed, apart from the global stream, with its state saved and
restored; bad generators are errors that name the function; and the arguments of the random
functions checked as torch checks them (multinomial's samples, normal's std, uniform_'s bounds)."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn
from tinyattn.backends.numpy_backend import NumpyBackend

PROBS = ta.tensor([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.25, 0.25]])

DRAWS = {  # name -> draw(g): each a function that takes generator=
    "randn": lambda g: ta.randn(3, 4, generator=g),
    "rand": lambda g: ta.rand(5, generator=g, dtype=np.float64),
    "randint": lambda g: ta.randint(0, 100, (6,), generator=g),
    "randperm": lambda g: ta.randperm(9, generator=g),
    "normal": lambda g: ta.normal(2.0, 3.0, (4,), generator=g),
    "multinomial with replacement": lambda g: ta.multinomial(PROBS, 6, True, generator=g),
    "multinomial without": lambda g: ta.multinomial(PROBS, 3, generator=g),
    "bernoulli": lambda g: ta.bernoulli(ta.full((8,), 0.5), generator=g),
    "Tensor.normal_": lambda g: ta.zeros(2, 3).normal_(1.0, 2.0, generator=g),
    "Tensor.uniform_": lambda g: ta.zeros(7).uniform_(-1.0, 1.0, generator=g),
    "init.uniform_": lambda g: nn.init.uniform_(ta.zeros(4), generator=g),
    "init.normal_": lambda g: nn.init.normal_(ta.zeros(4), generator=g),
    "init.xavier_uniform_": lambda g: nn.init.xavier_uniform_(ta.zeros(3, 4), generator=g),
    "init.xavier_normal_": lambda g: nn.init.xavier_normal_(ta.zeros(3, 4), generator=g),
    "init.kaiming_uniform_": lambda g: nn.init.kaiming_uniform_(ta.zeros(3, 4), generator=g),
    "init.kaiming_normal_": lambda g: nn.init.kaiming_normal_(ta.zeros(3, 4), generator=g),
    "init.trunc_normal_": lambda g: nn.init.trunc_normal_(ta.zeros(3, 4), generator=g),
    "init.orthogonal_": lambda g: nn.init.orthogonal_(ta.zeros(3, 4), generator=g),
}


@pytest.mark.parametrize("draw", DRAWS.values(), ids=DRAWS.keys())
def test_a_seeded_generator_repeats_its_draws_whatever_the_global_stream_does(draw):
    """Two generators seeded alike draw alike, with the global stream reseeded and drawn from
    in between; another seed draws otherwise; and drawing from a generator leaves the global
    stream where it was."""
    ta.manual_seed(0)
    first = draw(ta.Generator().manual_seed(5)).numpy()
    ta.manual_seed(1)
    ta.randn(10)
    again = draw(ta.Generator().manual_seed(5)).numpy()
    np.testing.assert_array_equal(first, again)
    others = [draw(ta.Generator().manual_seed(s)).numpy() for s in (6, 7, 8)]
    assert any(not np.array_equal(first, o) for o in others)

    ta.manual_seed(3)
    want = ta.rand(4).numpy()
    ta.manual_seed(3)
    draw(ta.Generator().manual_seed(5))
    np.testing.assert_array_equal(ta.rand(4).numpy(), want)


def test_without_a_generator_the_global_stream_is_drawn_as_before():
    """generator=None is the backend's stream: manual_seed still makes every draw repeat."""
    ta.manual_seed(11)
    first = [d(None).numpy() for d in DRAWS.values()]
    ta.manual_seed(11)
    for want, d in zip(first, DRAWS.values(), strict=True):
        np.testing.assert_array_equal(d(None).numpy(), want)


def test_one_generator_goes_on_drawing_and_its_state_brings_it_back():
    g = ta.Generator().manual_seed(2)
    state = g.get_state()
    a, b = ta.rand(6, generator=g).numpy(), ta.rand(6, generator=g).numpy()
    assert not np.array_equal(a, b)  # the stream moves on
    assert g.set_state(state) is g
    np.testing.assert_array_equal(ta.rand(6, generator=g).numpy(), a)
    np.testing.assert_array_equal(ta.rand(6, generator=g).numpy(), b)
    state["bit_generator"]["state"]["state"] += 1  # the state returned is a copy
    g.set_state(g.get_state())
    assert g.initial_seed() == 2


def test_manual_seed_returns_the_default_generator_as_torch():
    """torch.manual_seed(s) returns torch.default_generator, the CPU's global stream: so does
    ta.manual_seed (it returned None), and that generator is the stream draws without
    generator= take: seeding it, drawing from it and restoring its state move that stream."""
    torch = pytest.importorskip("torch")
    assert torch.manual_seed(3) is torch.default_generator
    g = ta.manual_seed(3)
    assert g is ta.default_generator and isinstance(g, ta.Generator)
    assert g.initial_seed() == 3 and g.device == "cpu"  # a device, as torch's (and x.device)
    assert repr(g.device) == repr(torch.default_generator.device) == "device(type='cpu')"
    want = ta.randn(4).numpy()
    ta.manual_seed(3)
    np.testing.assert_array_equal(ta.randn(4, generator=g).numpy(), want)  # the same stream
    assert g.manual_seed(3) is g and g.initial_seed() == 3
    np.testing.assert_array_equal(ta.randn(4).numpy(), want)  # g.manual_seed reseeded it
    state = g.get_state()
    first = ta.rand(3).numpy()
    assert g.set_state(state) is g
    np.testing.assert_array_equal(ta.rand(3).numpy(), first)
    assert ta.manual_seed(5).initial_seed() == 5 and g.initial_seed() == 5


def test_seed_and_initial_seed():
    g = ta.Generator()
    s = g.seed()
    assert isinstance(s, int) and s >= 0 and g.initial_seed() == s
    a = ta.randn(3, generator=g).numpy()
    np.testing.assert_array_equal(ta.randn(3, generator=ta.Generator().manual_seed(s)).numpy(), a)
    seeds = {ta.Generator().seed() for _ in range(8)} | {s}
    assert len(seeds) == 9 and all(0 <= k < 2**63 for k in seeds)  # 63-bit system entropy
    assert max(seeds) > 2**56  # (all 9 below: 1 chance in 2**63)
    assert ta.Generator("numpy").device == ta.device("cpu") and "initial seed" in repr(g)
    with pytest.raises(ta.BackendError, match="unknown backend 'tpu'"):
        ta.Generator("tpu")
    for edge in (0, 2**63 - 1):  # the ends of the range are seeds too
        draws = [ta.rand(2, generator=ta.Generator().manual_seed(edge)).numpy() for _ in "ab"]
        np.testing.assert_array_equal(*draws)


@pytest.mark.parametrize("seed", [1.5, True, "3", None])
def test_a_seed_that_is_not_an_int_is_refused(seed):
    with pytest.raises(ValueError, match="Generator.manual_seed: the seed must be an int, got"):
        ta.Generator().manual_seed(seed)
    with pytest.raises(ValueError, match=r"Generator.manual_seed: the seed 18446744073709551616 "
                                         r"is past -2\*\*63\.\.2\*\*64 - 1"):
        ta.Generator().manual_seed(2**64)
    assert ta.Generator().manual_seed(-1).initial_seed() == 2**64 - 1  # (torch's: it wraps)


def test_set_state_takes_only_what_get_state_gave_for_its_backend():
    g = ta.Generator()
    with pytest.raises(TypeError, match="Generator.set_state: takes what Generator.get_state"):
        g.set_state(np.random.default_rng(0).bit_generator.state)
    other = {**g.get_state(), "device": "cupy"}
    with pytest.raises(ta.BackendError, match="the state is of a cupy generator, this one "
                                              "draws on numpy"):
        g.set_state(other)


@pytest.mark.parametrize("draw", DRAWS.values(), ids=DRAWS.keys())
def test_a_generator_of_the_wrong_kind_or_backend_is_an_error_naming_the_function(draw):
    with pytest.raises(TypeError, match=r"generator must be a tinyattn.Generator, got Generator"):
        draw(np.random.default_rng(0))
    g = ta.Generator()
    g.backend = NumpyBackend(0)  # another backend than the one the tensor is made on
    with pytest.raises(ta.BackendError, match=r"the generator draws on numpy, the tensor is "
                                              r"made on numpy: make it with tinyattn.Generator"):
        draw(g)


def test_the_function_named_in_the_error_is_the_one_called():
    for name, call in [("randn", lambda: ta.randn(2, generator=1)),
                       ("randperm", lambda: ta.randperm(3, generator=1)),
                       ("multinomial", lambda: ta.multinomial(PROBS, 1, generator=1)),
                       ("bernoulli", lambda: ta.bernoulli(PROBS, generator=1))]:
        with pytest.raises(TypeError, match=f"^{name}: generator must be"):
            call()


def test_a_captured_step_draws_from_the_generator_on_each_replay():
    """randn(..., generator=g) inside a captured step is made again on every replay from g, as
    an eager call would draw: the same losses and gradients bit for bit, in replay."""
    w = ta.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    g_step, g_eager = ta.Generator().manual_seed(4), ta.Generator().manual_seed(4)

    def fn(x, g):
        h = x @ w
        return F.mse_loss(h * ta.rand(4, generator=g), ta.randn(2, 4, generator=g))

    step = ta.capture(lambda x: fn(x, g_step))
    x = ta.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):
            w.grad = None
            got = step(x)
            want = fn(x, g_eager)
            (want_w,) = ta.autograd.grad(want, [w])
            assert got.item() == want.item()
            np.testing.assert_array_equal(w.grad.numpy(), want_w.numpy())
    assert step.state == "replaying"


def test_bernoulli_and_multinomial_draw_anew_on_each_replay_of_a_captured_step():
    """bernoulli and multinomial are ops: a captured step draws them again on every replay,
    from the global stream or a generator, as eagerly (bit for bit), with no warning; their
    weights may be fn's own tensors, an argument, or a tensor made outside."""
    w = ta.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    outside = ta.tensor([[0.1, 0.2, 0.3, 0.4], [0.7, 0.0, 0.2, 0.1]])
    gens = {"step": ta.Generator().manual_seed(1), "eager": ta.Generator().manual_seed(1)}

    def fn(x, probs, which):
        h = x @ w  # (2, 4)
        keep = ta.bernoulli(F.sigmoid(h).detach())
        drop = ta.bernoulli(ta.ones(2, 4), 0.5, generator=gens[which])
        picks = ta.multinomial(probs, 3, generator=gens[which])
        more = ta.multinomial(outside, 5, replacement=True)
        return (h * keep * drop).sum() + (h.gather(1, picks) ** 2).sum() + h.gather(1, more).sum()

    step = ta.capture(lambda x, probs: fn(x, probs, "step"))
    x = ta.ones(2, 3)
    seen = set()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(6):
            probs = ta.tensor([[1.0, 2.0, 3.0, 4.0], [4.0, 1.0, 0.0, 2.0]]) + k
            w.grad = None
            ta.manual_seed(k)
            got = step(x, probs)
            ta.manual_seed(k)
            want = fn(x, probs, "eager")
            (want_w,) = ta.autograd.grad(want, [w])
            assert got.item() == want.item()
            np.testing.assert_array_equal(w.grad.numpy(), want_w.numpy())
            seen.add(got.item())
    assert step.state == "replaying" and len(seen) > 3  # (the draws differ from call to call)


@pytest.mark.parametrize("call,match", [
    (lambda: ta.bernoulli(ta.tensor([0.5, 1.5])), r"bernoulli: every probability must be in "
                                                   r"\[0, 1\] \(input of shape \(2,\)\)"),
    (lambda: ta.bernoulli(ta.tensor([0.5, float("nan")])), r"must be in \[0, 1\]"),
    (lambda: ta.bernoulli(ta.zeros(3), -0.1), r"bernoulli: p must be in \[0, 1\], got -0.1"),
    (lambda: ta.multinomial(ta.tensor([[1.0, 2.0], [0.0, 0.0]]), 1),
     r"multinomial: weights must be finite, >= 0, and each row must have a positive sum "
     r"\(shape \(2, 2\)\)"),
])
def test_probabilities_out_of_range_are_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_on_cupy_the_state_is_the_device_streams_own_and_brings_it_back(monkeypatch):
    """CuPy keeps a stream's state in device memory (its bit generator cannot be pickled or
    deep-copied, and has no state dict: tests/support/fake_cupy.py mirrors that); get_state
    copies that memory, set_state brings the same draws back, on this or another generator."""
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    g = ta.Generator("cupy").manual_seed(3)
    ta.randn(5, generator=g, device="cupy")
    state = g.get_state()
    first = ta.randn(4, 3, generator=g, device="cupy").numpy()
    more = ta.rand(6, generator=g, device="cupy").numpy()
    g.set_state(state)
    np.testing.assert_array_equal(ta.randn(4, 3, generator=g, device="cupy").numpy(), first)
    other = ta.Generator("cupy").set_state(state)  # a state is a copy: it serves twice
    np.testing.assert_array_equal(ta.randn(4, 3, generator=other, device="cupy").numpy(), first)
    np.testing.assert_array_equal(ta.rand(6, generator=other, device="cupy").numpy(), more)
    assert other.initial_seed() == 3
    with pytest.raises(ta.BackendError, match="the state is of a numpy generator, this one "
                                              "draws on cupy"):
        g.set_state(ta.Generator("numpy").get_state())
    with pytest.raises(TypeError, match="Generator.set_state: the state of a cupy generator "
                                        "is what get_state returned"):
        g.set_state({**state, "bit_generator": {"state": 1}})


@pytest.mark.parametrize("reseed", ["manual_seed", "seed", "set_state"])
def test_reseeding_a_generator_inside_a_captured_step_is_refused_by_name(reseed):
    """g.manual_seed(0) (seed(), set_state()) inside fn, for the same noise on every call:
    a replay skipped it and drew on from where g was (other losses from the third call on).
    Refused by name, as the global manual_seed(): fn stays eager and right on every call."""
    w = ta.tensor(np.linspace(-1, 1, 4, dtype=np.float32), requires_grad=True)
    made = []

    def make():
        g = ta.Generator().manual_seed(3)
        start = g.get_state()

        def fn(x):
            if reseed == "manual_seed":
                g.manual_seed(0)
            elif reseed == "seed":
                g.seed()
            else:
                g.set_state(start)
            made.append(g.initial_seed())
            return (x * w * ta.randn(4, generator=g)).sum()
        return fn

    step, eager = ta.capture(make()), make()
    with pytest.warns(UserWarning) as seen:
        for _ in range(5):
            got = step(ta.ones(4))
            if reseed != "seed":  # (seed(): a new seed each call, which eager draws too)
                assert got.item() == eager(ta.ones(4)).item()
    assert step.state.startswith("eager")
    assert [str(r.message) for r in seen] == [
        f"capture: fn called Generator.{reseed}(), which a replay would not call again (the "
        "Python in fn runs only while recording); call it outside fn; running fn eagerly from "
        "now on"]
    assert len(made) == 10 if reseed != "seed" else len(made) == 5  # fn ran on every call


def test_a_generator_made_inside_fn_is_not_a_reseeding():
    """Generator() seeds itself when made: not a call of seed() on a generator fn reads."""
    from tinyattn.autograd import Tracer, tracing

    class Effects(Tracer):
        def __init__(self):
            self.seen = []

        def effect(self, what):
            self.seen.append(what)

    with tracing(Effects()) as effects:
        g = ta.Generator()
        ta.Generator(device="cpu").manual_seed(0)
    assert effects.seen == ["Generator.manual_seed()"]
    assert isinstance(g.initial_seed(), int)


def test_multinomial_refuses_what_torch_refuses():
    p = ta.tensor([1.0, 1.0, 1.0])
    for n in (0, -1):  # gave [0, 2] for -1 (a negative slice) and an empty tensor for 0
        with pytest.raises(ta.ShapeError, match=rf"multinomial: cannot sample n_sample <= 0 "
                           rf"samples \(num_samples={n}\)"):
            ta.multinomial(p, n, replacement=n == 0)
    for bad in (1.5, True):  # torch: TypeError ... must be int
        with pytest.raises(ta.DTypeError, match=r"multinomial: num_samples must be an int"):
            ta.multinomial(p, bad)
    with pytest.raises(ta.DTypeError, match=r"multinomial: .*floating-point.*int64"):
        ta.multinomial(ta.tensor([1, 2]), 1)  # torch: only supports floating-point dtypes
    for weights in ([1.0, float("nan")], [1.0, float("inf")], [1.0, -1.0], [0.0, 0.0]):
        with pytest.raises(ValueError, match=r"multinomial: weights must be finite, >= 0"):
            ta.multinomial(ta.tensor(weights), 1)
    assert ta.multinomial(ta.ones(0, 3), 2).shape == (0, 2)  # no rows: torch's (0, 2)
    for weights in (ta.zeros(2, 0), ta.zeros(0)):  # (a reshape error before)
        with pytest.raises(ta.ShapeError, match=r"multinomial: the weights .* no categories"):
            ta.multinomial(weights, 1, replacement=True)


def test_multinomial_without_replacement_draws_impossible_categories_last_as_torch():
    # torch 2.13 (CPU) does not refuse more samples than possible categories: it draws the
    # categories of weight 0 after the others
    for _ in range(20):
        got = ta.multinomial(ta.tensor([1.0, 0.0, 1.0, 0.0]), 4).tolist()
        assert sorted(got[:2]) == [0, 2] and sorted(got[2:]) == [1, 3]


def test_normal_refuses_a_negative_or_nan_std_as_torch():
    with pytest.raises(ValueError, match=r"normal: expects std >= 0.0, but found std -1.0"):
        ta.normal(0.0, -1.0, (3,))
    with pytest.raises(ValueError, match=r"normal: expects all elements of std >= 0.0"):
        ta.normal(ta.zeros(3), -ta.ones(3))
    with pytest.raises(ValueError, match=r"normal: expects all elements of std >= 0.0"):
        ta.normal(1.0, ta.tensor([1.0, float("nan")]))
    with pytest.raises(ValueError, match=r"normal: expects std >= 0.0, but found std nan"):
        ta.normal(ta.zeros(2), float("nan"))
    for std in (-1.0, float("nan")):
        with pytest.raises(ValueError, match=r"normal_: expects std >= 0.0"):
            ta.zeros(3).normal_(0.0, std)
    assert ta.normal(0.0, 0.0, (2,)).tolist() == [0.0, 0.0]
    assert ta.normal(ta.zeros(2), ta.tensor([0.0, 0.0])).tolist() == [0.0, 0.0]
    assert ta.zeros(2).normal_(1.0, 0.0).tolist() == [1.0, 1.0]


def test_uniform_refuses_bounds_torch_refuses():
    with pytest.raises(ValueError, match=r"uniform_: expects to return a \[from, to\) range, "
                       r"but found from=1.0 > to=0.0"):
        ta.zeros(3).uniform_(1.0, 0.0)
    for a, b in ((float("nan"), 1.0), (0.0, float("inf")), (-1e39, 1.0)):
        with pytest.raises(ValueError, match=r"uniform_: .* out of bounds for float32"):
            ta.zeros(3).uniform_(a, b)
    assert ta.zeros(2).uniform_(0.5, 0.5).tolist() == [0.5, 0.5]
