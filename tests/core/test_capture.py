"""ta.capture: a step recorded on its first calls and replayed after gives, bit for bit, the
loss and gradients of the eager step; what would make a replay wrong sends it back to eager."""

import functools
import re
import tracemalloc
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

V, B, T = 11, 3, 6


def _model(seed=0, **kw):
    ta.manual_seed(seed)
    return ta.nn.TinyTransformer(V, 16, 2, 2, max_len=T, **kw)


def _loss(model):
    def fn(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    return fn


def _batch(rng, b=B):
    return ta.tensor(rng.integers(0, V, (b, T))), ta.tensor(rng.integers(0, V, (b, T)))


def _grads(model):
    return {n: p.grad.numpy().copy() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        assert a[k].dtype == b[k].dtype, k


class Double(ta.autograd.Function):
    """An op of the user's own: capture cannot see inside its forward."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


CONFIGS = [{}, {"dropout": 0.2}, {"rotary": True, "norm": "rms", "qk_norm": True},
           {"tie": False, "bias": False}]


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: ",".join(kw) or "default")
def test_replay_equals_eager_bit_for_bit_over_training(kw):
    """Two twin models trained side by side, one eagerly, one through capture: every step's
    loss, every gradient and the updated weights are equal (dropout too: the replayed ops draw
    from the generator in the same order)."""
    eager, captured = _model(**kw), _model(**kw)
    opts = [ta.optim.AdamW(m.parameters(), lr=1e-2) for m in (eager, captured)]
    step, eager_fn = ta.capture(_loss(captured)), _loss(eager)
    rng = np.random.default_rng(1)
    for i in range(5):
        x, y = _batch(rng)
        for opt in opts:
            opt.zero_grad()
        ta.manual_seed(100 + i)
        want = eager_fn(x, y)
        want.backward()
        ta.manual_seed(100 + i)
        got = step(x, y)
        assert got.item() == want.item()
        assert got._node is None  # detached, as loss.detach()
        _assert_same(_grads(captured), _grads(eager))
        for opt in opts:
            opt.step()
    assert step.state == "replaying"
    listing = str(step.program).splitlines()
    assert listing[0].startswith("%0 = embedding(arg0, ") and "cross_entropy(" in listing[-2]
    _assert_same({n: p.numpy() for n, p in captured.named_parameters()},
                 {n: p.numpy() for n, p in eager.named_parameters()})


def _counting_forward(model):
    """Count the calls of model's forward (an instance attribute, not a hook)."""
    calls, forward = [], model.forward

    def counted(*args, **kw):
        calls.append(1)
        return forward(*args, **kw)

    object.__setattr__(model, "forward", counted)
    return calls


def test_the_program_is_replayed_without_the_modules():
    """After two agreeing recordings, calls run no module forward (the point of it)."""
    model = _model()
    calls = _counting_forward(model)
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(0))
    for _ in range(4):
        step(x, y)
    assert step.state == "replaying" and len(calls) == 2  # the two recording calls only


def test_gradients_accumulate_across_calls_as_backward_does():
    model, twin = _model(), _model()
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(2))
    for _ in range(4):
        step(x, y)
        _loss(twin)(x, y).backward()
    _assert_same(_grads(model), _grads(twin))


def _check_against_eager(step, model, twin, x, y, fn=_loss):
    """One call of `step` (on model) and the eager step on its twin: equal loss and gradients."""
    model.zero_grad()
    twin.zero_grad()
    got = step(x, y)
    want = fn(twin)(x, y)
    want.backward()
    assert got.item() == want.item()
    _assert_same(_grads(model), _grads(twin))


def test_a_new_batch_shape_is_recorded_again():
    """The arguments' shapes are guarded: a 5-row batch after 3-row ones (and back) is not run
    through the 3-row program."""
    model, twin = _model(), _model()
    step = ta.capture(_loss(model))
    rng = np.random.default_rng(3)
    for b in (3, 3, 3, 5, 5, 5, 3):
        _check_against_eager(step, model, twin, *_batch(rng, b))
    assert step.state == "replaying"


def _replays_after(step, *args, calls=3):
    for _ in range(calls):
        step(*args)
    return step.state == "replaying"


def test_small_functions_replay_promotion_broadcasting_and_views_as_eager():
    """Mixed dtypes (promoted), a broadcast parameter (summed back), a leaf used three times,
    views and a getitem into a parameter: replayed gradients equal eager ones."""
    ta.manual_seed(0)
    w = ta.randn(4, requires_grad=True)
    m = ta.randn(3, 4, requires_grad=True)

    index = ta.tensor([[0, 2, 1, 0]])

    def fn(x):
        h = (m * w + x).tanh()  # x is float64: promoted
        # src cast to m's dtype (scatter takes no other, as torch); the int64 index is nondiff
        spread = m.scatter(0, index, x[:1].to(m.dtype))
        return (h.T @ h)[1:].sum() + (m[0] * w).exp().mean() + w.sum() + (spread ** 2).sum()

    step = ta.capture(fn)
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = ta.tensor(rng.standard_normal((3, 4)))
        w.grad = m.grad = None
        got = step(x)
        want_w, want_m = ta.autograd.grad(fn(x), [w, m])
        assert got.dtype == np.float64
        np.testing.assert_array_equal(w.grad.numpy(), want_w.numpy())
        np.testing.assert_array_equal(m.grad.numpy(), want_m.numpy())
    assert step.state == "replaying"


def test_a_mode_switch_is_recorded_again():
    """train() and eval() change which ops run (dropout): each mode gets its own recording, and
    every call equals the eager step on a twin in the same mode with the same seed."""
    model, twin = _model(dropout=0.3), _model(dropout=0.3)
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(4))
    for mode in (True, True, True, False, False, False, True, False):
        model.train(mode)
        twin.train(mode)
        for _ in range(2):
            ta.manual_seed(7)
            model.zero_grad()
            got = step(x, y)
            ta.manual_seed(7)
            twin.zero_grad()
            want = _loss(twin)(x, y)
            want.backward()
            assert got.item() == want.item()
            _assert_same(_grads(model), _grads(twin))


def test_a_frozen_or_replaced_parameter_is_seen():
    model, twin = _model(), _model()
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(5))
    for _ in range(3):
        _check_against_eager(step, model, twin, x, y)
    for m in (model, twin):  # freeze the first block: its parameters get no gradient
        m.blocks[0].requires_grad_(False)
    _check_against_eager(step, model, twin, x, y)
    assert model.blocks[0].ln1.weight.grad is None
    for m in (model, twin):  # a new head: read (and given a gradient) from now on
        ta.manual_seed(9)
        m.lm_head = ta.nn.Linear(16, V, bias=False)
    for _ in range(3):
        _check_against_eager(step, model, twin, x, y)
    assert step.state == "replaying" and model.lm_head.weight.grad is not None
    for m in (model, twin):  # the parameters' arrays replaced by ones of another dtype (all
        for q in m.parameters():  # of them: a norm refuses a weight of another dtype, as torch)
            q.data = q.data.double()
    for _ in range(3):
        _check_against_eager(step, model, twin, x, y)
    assert model.ln_f.weight.grad.dtype == np.float64


@pytest.mark.parametrize("case", ["closure batch", "in place", "retain_grad", "hook",
                                  "function"])
def test_what_a_replay_would_get_wrong_stays_eager_with_a_warning(case):
    """Each of these would make a replay differ from the eager step (a value it would not see,
    a change or a hook it would not make): the step warns once and stays eager, and is right."""
    ta.manual_seed(0)
    w = ta.randn(3, 4, requires_grad=True)
    batches = iter(np.random.default_rng(6).standard_normal((6, 3, 4)))

    def fn(x):
        if case == "closure batch":  # the batch should come in as an argument
            x = x + ta.tensor(next(batches))
        h = w * x
        if case == "in place":
            h.mul_(2)
        elif case == "retain_grad":
            h.retain_grad()
        elif case == "hook":
            h.register_hook(lambda g: g * 3)
        elif case == "function":
            h = Double.apply(h)
        return (h * h).sum()

    step = ta.capture(fn)
    x = ta.ones(3, 4)
    with pytest.warns(UserWarning, match="capture: .*running fn eagerly"):
        for _ in range(4):
            step(x)
    assert step.state.startswith("eager: ")
    results = []
    for run in (step, lambda x: _backward_of(fn(x))):
        batches = iter(np.random.default_rng(7).standard_normal((6, 3, 4)))  # noqa: F841
        w.grad = None
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the warning came once only
            results.append((run(x).item(), w.grad.numpy().copy()))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])


def _backward_of(loss):
    loss.backward()
    return loss


def test_calls_the_replay_must_not_take():
    """A tracer watching (explain mode, anomaly checks) or grad disabled: the call runs fn
    eagerly (a forward hook sees it); under no_grad a step (which runs backward) is refused
    by name."""
    model = _model()
    seen = _counting_forward(model)
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(7))
    assert _replays_after(step, x, y)
    n = len(seen)
    with ta.autograd.tracing(ta.autograd.Tracer()):
        step(x, y)
    assert len(seen) == n + 1
    with ta.no_grad(), pytest.raises(ta.GraphError, match=r"capture: the step was called "
                                                         r"inside no_grad\(\)"):
        step(x, y)
    assert len(seen) == n + 1  # (refused before fn ran)


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(TypeError, match="capture: fn must be callable"):
        ta.capture(3)
    step = ta.capture(lambda x: (x * 2).sum())
    with pytest.raises(TypeError, match="argument 0 must be a Tensor"):
        step(np.ones(3))
    with pytest.raises(ta.GraphError, match="argument 0 requires grad"):
        step(ta.ones(3, requires_grad=True))
    w = ta.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match="must return the loss as a Tensor, or a tuple .*got "
                                        "float"):
        ta.capture(lambda x: float((x * w).sum().item()))(ta.ones(3))
    with pytest.raises(TypeError, match="got tuple"):
        ta.capture(lambda x: ((x * w).sum(), 1.0))(ta.ones(3))
    with pytest.raises(TypeError, match="got list"):
        ta.capture(lambda x: [])(ta.ones(3))
    for out in (lambda x: x * w, lambda x: (x * w, (x * w).sum())):
        with pytest.raises(ta.errors.ShapeError, match=r"fn must return the loss \(one value\) "
                                                       r"first, got a tensor of shape \(3,\)"):
            ta.capture(out)(ta.ones(3))
    assert ta.capture(lambda x: (x * w).sum(-1, keepdim=True))(ta.ones(3)).shape == (1,)
    with pytest.raises(TypeError, match=r"pass the tensors by position, step\(x, y\); got "
                                        r"keyword argument\(s\) x"):
        step(x=ta.ones(3))


def test_too_many_shapes_fall_back_to_eager():
    w = ta.ones(1, requires_grad=True)
    step = ta.capture(lambda x: (x * w).sum())
    with pytest.warns(UserWarning, match="more than 8 argument shapes"):
        for n in range(1, 11):
            for _ in range(2):
                step(ta.ones(n))
    assert step.state.startswith("eager")


def test_forward_hooks_keep_running():
    """A forward hook, there from the start or registered once the step replays, is called on
    every call: the step records again, sees it and stays eager (with a warning)."""
    model = _model()
    x, y = _batch(np.random.default_rng(8))
    step = ta.capture(_loss(model))
    assert _replays_after(step, x, y)
    seen = []
    model.blocks[1].mlp.register_forward_hook(lambda m, a, out: seen.append(out.shape))
    with pytest.warns(UserWarning, match=r"MLP \(blocks\.1\.mlp\) has forward hooks"):
        step(x, y)
    for _ in range(3):
        step(x, y)
    assert seen == [(B, T, 16)] * 4 and step.state.startswith("eager")


def test_train_called_every_step_does_not_record_again():
    """model.train() in the loop, as many training loops do: no mode changes, the step keeps
    replaying (a forward counter sees no call)."""
    model = _model(dropout=0.1)
    calls = _counting_forward(model)
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(9))
    for _ in range(6):
        model.train()
        step(x, y)
    assert len(calls) == 2 and step.state == "replaying"


def test_more_tensors_come_back_with_the_loss():
    """fn may return (loss, logits, ...): each comes back detached, replayed as computed; a
    returned tensor that is no op's output (an argument) keeps the step eager."""
    model, twin = _model(), _model()

    def fn(m):
        def loss_and_logits(x, y):
            logits = m(x)
            return F.cross_entropy(logits.reshape(-1, V), y.reshape(-1)), logits, logits[:, -1]
        return loss_and_logits

    step = ta.capture(fn(model))
    rng = np.random.default_rng(10)
    for _ in range(4):
        x, y = _batch(rng)
        model.zero_grad()
        twin.zero_grad()
        got = step(x, y)
        want = fn(twin)(x, y)
        want[0].backward()
        assert isinstance(got, tuple) and len(got) == 3 and all(t._node is None for t in got)
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        _assert_same(_grads(model), _grads(twin))
    assert step.state == "replaying" and "returns %" in str(step.program)
    w = ta.ones(3, requires_grad=True)
    echo = ta.capture(lambda x: ((x * w).sum(), x))
    with pytest.warns(UserWarning, match="not the output of an op it ran"):
        loss, x = echo(ta.ones(3))
    assert echo.state.startswith("eager") and x.shape == (3,) and loss.item() == 3


def test_masks_from_comparisons_replay_and_values_from_outside_are_never_frozen():
    """A mask made from the targets by a comparison is an op: it replays, right on every new
    batch. A tensor made from values read out (numpy()) is refused even when the first calls
    see the same batch, as a benchmark's would: frozen, it would be wrong on the next batch.
    (The read itself is what capture refuses; a tensor made afresh is refused too: below.)"""
    w = ta.ones(4, requires_grad=True)

    def loss(x, mask):
        return ((((x * w) ** 2).sum(-1)) * mask.float()).sum()

    step = ta.capture(lambda x, y: loss(x, (y != 0) & ~(y == 5)))
    x = ta.ones(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for y in ([1, 0, 2], [1, 0, 2], [1, 0, 2], [0, 5, 2], [3, 3, 3]):
            w.grad = None
            got = step(x, ta.tensor(y)).item()
            assert got == 4.0 * sum(v not in (0, 5) for v in y)
            assert w.grad.numpy().tolist() == [2.0 * sum(v not in (0, 5) for v in y)] * 4
    assert step.state == "replaying" and "ne(arg1, c0)" in str(step.program)
    outside = ta.capture(lambda x, y: loss(x, ta.tensor(y.numpy() != 0)))
    with pytest.warns(UserWarning, match=r"read a tensor's values into Python \(numpy\(\)\)"):
        for _ in range(3):
            outside(x, ta.tensor([1, 0, 2]))
    w.grad = None
    assert outside(x, ta.tensor([0, 0, 2])).item() == 4.0 and w.grad.numpy().tolist() == [2.0] * 4


def test_detach_and_constants_made_outside_replay():
    """x.detach() is the same values as x (recognised by its array), and a mask made once
    outside fn is read as any tensor: both replay, equal to eager."""
    ta.manual_seed(0)
    w = ta.randn(4, 4, requires_grad=True)
    future = ~F.causal_mask(4)

    def fn(x):
        h = x @ w
        scores = F.softmax(h.masked_fill(future, float("-inf")), dim=-1)
        return (scores * h.detach()).sum() + (h * h).mean()

    step = ta.capture(fn)
    rng = np.random.default_rng(11)
    for _ in range(4):
        x = ta.tensor(rng.standard_normal((4, 4)).astype(np.float32))
        w.grad = None
        got = step(x)
        (want,) = ta.autograd.grad(fn(x), [w])
        np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
        assert got.item() == fn(x).item()
    assert step.state == "replaying"


def test_the_listing_and_the_state_say_what_happened():
    """The program prints one line per op (its inputs: %j an op's output, argK an argument, tK
    a tensor read live, cK a constant; its settings), then what it returns and how much
    backward there is; state and repr follow the calls."""
    w = ta.ones(3, requires_grad=True)

    def fn(x):
        h = (x * w) * 2.0
        return h.sum(), h[1:], h.detach()

    step = ta.capture(fn)
    assert repr(step) == "<CapturedStep fn: recording>" and step.program is None
    x = ta.ones(3)
    step(x)
    assert step.state == "recording" and step.program is None
    step(x)
    assert step.state == "recording" and step.program is not None  # (replays from the next)
    assert str(step.program) == (
        "%0 = mul(arg0, t0)\n%1 = mul(%0, c0)\n%2 = sum(%1) {'dim': None, 'keepdim': False}\n"
        "%3 = getitem(%1) {'index': slice(1, None, None)}\n"
        "returns %2, %3, %1; backward from %2: 4 ops on the graph, 1 leaf tensors")
    loss, tail, h = step(ta.full((3,), 2.0))
    assert repr(step) == "<CapturedStep fn: replaying>" and tail.tolist() == [4.0, 4.0]
    assert h.tolist() == [4.0] * 3 and h._node is None

    def named(x):
        return (x * w).sum()

    assert repr(ta.capture(named)) == "<CapturedStep named: recording>"
    assert repr(ta.capture(functools.partial(fn))) == "<CapturedStep fn: recording>"
    assert repr(ta.capture(_loss(_model()))) == "<CapturedStep fn: recording>"


def test_integer_inputs_are_promoted_as_eagerly():
    """An integer argument divided (true division promotes to the default float, float32, not
    NumPy's float64) and added to a float32 parameter: the replay promotes as apply does."""
    w = ta.ones(3, requires_grad=True)

    def fn(x):
        return ((x / 2) * w + x).sum()

    step = ta.capture(fn)
    for k in range(4):
        x = ta.tensor(np.arange(3) + k)
        w.grad = None
        got = step(x)
        assert got.dtype == np.float32 and w.grad.dtype == np.float32
        assert got.item() == fn(x).item() and w.grad.numpy().tolist() == (x.numpy() / 2).tolist()
    assert step.state == "replaying"


def test_parts_summed_into_arrays_the_replay_does_not_own():
    """A gradient's first part can be another's array (a broadcast view, read-only): a later
    getitem part is added into a copy, and a leaf's .grad is a copy of it, as backward does;
    the sums then accumulate across calls into .grad, and no two .grad share memory."""
    w = ta.ones(2, 3, requires_grad=True)
    b = ta.ones(3, requires_grad=True)

    def fn(x):
        h = x * w + b
        unused = (h * 3).sum()  # on the graph, but not in the loss: gets no gradient
        del unused
        return h[0].sum() + h.sum() + w[1].sum() + w.sum() + (w + b).sum()

    step = ta.capture(fn)
    x = ta.ones(2, 3)
    for calls in range(1, 5):
        step(x)
        assert w.grad.numpy().tolist() == [[4.0 * calls] * 3, [4.0 * calls] * 3]
        assert b.grad.numpy().tolist() == [5.0 * calls] * 3
    assert step.state == "replaying" and not np.shares_memory(w.grad.numpy(), b.grad.numpy())
    u, v = ta.ones(3, requires_grad=True), ta.ones(3, requires_grad=True)
    both = ta.capture(lambda x: (x * (u + v)).sum())  # add's VJP hands u and v one array
    for calls in range(1, 5):
        u.grad = v.grad = None  # each .grad made anew from that one array: a copy each
        both(ta.full((3,), float(calls)))
        assert not np.shares_memory(u.grad.numpy(), v.grad.numpy())
        both(ta.full((3,), 1.0))  # added into in place: u's sum is not v's
        assert u.grad.tolist() == v.grad.tolist() == [calls + 1.0] * 3
    assert both.state == "replaying"


def test_a_replay_holds_no_more_memory_than_the_eager_step():
    """Outputs no later op reads, and saved arrays once their VJP ran, are let go: the
    replayed step's peak is at most the eager step's."""
    from tinyattn.bench import step as bench

    V_, B_, T_, C_, H_ = bench.SIZES["tiny"]  # noqa: N806
    p = bench.make_params(V_, T_, C_)
    idx, tgt = bench.make_batch(V_, B_, T_)
    eager, twin = bench.tinyattn_setup(p, H_), bench.tinyattn_setup(p, H_)
    captured = bench.captured_setup(twin)
    peaks = {}
    for name, run in (("eager", lambda: bench.tinyattn_step(eager, idx, tgt)),
                      ("captured", lambda: bench.captured_step(twin, captured, idx, tgt))):
        for _ in range(3):
            run()
        tracemalloc.start()
        run()
        peaks[name] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert captured.state == "replaying" and peaks["captured"] <= peaks["eager"]


def test_a_first_call_that_differs_still_ends_up_replaying():
    """A module that sets itself up on its first call runs other ops once: the next two calls,
    which agree, make the program. After a mode switch (a fresh start), the same."""
    model = _model()
    mults = iter([1.0, 2.0, 2.0, 2.0, 3.0, 3.0])  # the constant of each call that runs fn
    step = ta.capture(lambda x, y: _loss(model)(x, y) * next(mults))
    xb, yb = _batch(np.random.default_rng(12))
    states = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(8):
            if k == 4:
                model.eval()
            step(xb, yb)
            states.append(step.state)
    assert states == ["recording"] * 3 + ["replaying"] + ["recording"] * 3 + ["replaying"]


def test_eight_shapes_replay_and_a_ninth_gives_up():
    w = ta.ones(1, requires_grad=True)
    step = ta.capture(lambda x: (x * w).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 9):
            for _ in range(3):
                step(ta.ones(n))
            assert step.state == "replaying"
    with pytest.warns(UserWarning, match="more than 8 argument shapes"):
        for _ in range(2):
            step(ta.ones(9))


def test_a_detached_argument_is_still_the_argument():
    """x.detach() of an argument reads the new argument on every call (not the first's)."""
    w = ta.ones(3, requires_grad=True)
    step = ta.capture(lambda x: (x.detach() * w).sum() + (x * w).sum())
    for k in range(4):
        w.grad = None
        assert step(ta.full((3,), float(k))).item() == 6.0 * k
        assert w.grad.numpy().tolist() == [2.0 * k] * 3
    assert step.state == "replaying"


def test_an_eager_step_returns_what_fn_returns():
    w = ta.ones(3, requires_grad=True)
    echo = ta.capture(lambda x: ((x * w).sum(), x))
    with pytest.warns(UserWarning):
        echo(ta.ones(3))
    loss, x = echo(ta.full((3,), 2.0))  # eager from now on, still a tuple
    assert loss.item() == 6.0 and x.tolist() == [2.0] * 3 and w.grad.tolist() == [3.0] * 3


def test_same_compares_values_and_arrays_by_identity():
    """The comparison of two recordings' constants and settings (replay._same)."""
    from tinyattn.replay import _same

    a = np.arange(3.0)
    assert _same(a, a) and not _same(a, a.copy())  # equal arrays made twice: not the same
    assert _same(np.float32(np.nan), np.float32(np.nan)) and _same(np.float32(1), np.float32(1))
    assert not _same(np.float32(1), np.float32(2)) and not _same(np.float32(1), np.float64(1))
    assert not _same(np.float32(1), 1.0) and not _same(np.zeros(()), np.zeros((1,)))
    assert _same(float("nan"), float("nan")) and _same(None, None) and not _same(None, 0)
    assert not _same(float("nan"), 1.0) and not _same(1.0, float("nan"))
    nan32, one32 = np.float32(np.nan), np.float32(1)
    assert not _same(nan32, one32) and not _same(one32, nan32)
    assert _same(2, 2) and not _same(2, 2.0) and not _same(True, 1) and not _same(1, 2)
    assert _same((1, slice(0, 2)), (1, slice(0, 2))) and not _same((1, 2), [1, 2])
    assert not _same(slice(0, 2), slice(0, 3)) and not _same(slice(0, 2), (0, 2, None))
    assert not _same((1, 2), (1, 2, 3)) and not _same((1, 2), (1, 3))
    assert _same({"a": 1, "b": (2,)}, {"a": 1, "b": (2,)}) and not _same({"a": 1}, {"a": 2})
    assert not _same({"a": 1}, {"b": 1}) and not _same({"a": 1}, ("dict", ("a", 1)))
    t = ta.ones(2)
    assert _same(t, t) and not _same(t, ta.ones(2)) and not _same(t, t.numpy())
    assert _same(ta.tensor(np.float32(3))._data[()], np.float32(3))


@pytest.mark.parametrize("case,message", [
    ("closure batch", "fn made a (3, 4) tensor outside the ops capture records (from a "
                      "comparison, a cast without grad, new values...), which a replay could "
                      "not make again; make it outside fn and pass it in"),
    ("in place", "a tensor was changed in place inside fn"),
    ("in place, unused after", "a tensor was changed in place inside fn"),
    ("retain_grad", "a tensor inside fn keeps its gradient (retain_grad)"),
    ("hook", "a tensor inside fn has a hook (register_hook)"),
    ("function", "Double is an autograd.Function, whose forward capture cannot see"),
    ("outside", "an op's output came from outside the recorded ops (made before fn?)"),
    ("constant", "a constant input differs between two calls (a batch read from outside fn "
                 "instead of passed in? an array made afresh each call?)"),
    ("returns an argument", "fn returned a tensor that is not the output of an op it ran (the "
                            "loss on the graph)"),
    ("ops", "fn ran 3 ops on one call and 4 on the next"),
    ("op", "op 1 (add) differs between two calls"),
    ("returns", "fn returned or read different tensors on two calls"),
    ("reads", "fn returned or read different tensors on two calls"),
])
def test_each_refusal_says_why(case, message):
    ta.manual_seed(0)
    w = ta.randn(3, 4, requires_grad=True)
    v = ta.randn(3, 4, requires_grad=True)
    before = w * 2
    calls = np.zeros(1, dtype=int)  # (a list fn reaches would be watched: a fresh start a call)

    def fn(x):
        calls[0] += 1
        h = (v if case == "reads" and calls[0] % 2 else w) * x  # reads: odd calls another
        if case == "closure batch":
            h = h + ta.tensor(np.full((3, 4), float(calls[0]), dtype=np.float32))
        elif case == "in place":
            h.mul_(2)
        elif case == "in place, unused after":
            extra = h * 1
            with ta.no_grad():
                extra.add_(1)
        elif case == "retain_grad":
            h.retain_grad()
        elif case == "hook":
            h.register_hook(lambda g: g)
        elif case == "function":
            h = Double.apply(h)
        elif case == "outside":
            h = h + before
        elif case == "constant":
            h = h + float(calls[0])
        elif case == "returns an argument":
            return (h * h).sum(), x
        elif case == "ops":  # (odd and even calls differ: no two in a row agree)
            h = h * 1 if calls[0] % 2 else h
        elif case == "op":
            h = h + 1 if calls[0] % 2 else h - 1
        elif case == "returns":  # the same ops, another one returned on odd calls
            total, mean = (h * h).sum(), (h * h).mean()
            return total if calls[0] % 2 else mean
        return (h * h).sum()

    step = ta.capture(fn)
    with pytest.warns(UserWarning) as seen:
        for _ in range(1 if case == "outside" else 4):  # (eager backward frees `before`)
            step(ta.ones(3, 4))
    assert [str(r.message) for r in seen] == [
        f"capture: {message}; running fn eagerly from now on"]


def test_a_hook_on_the_root_module_is_named():
    model = _model()
    model.register_forward_hook(lambda m, a, out: None)
    step = ta.capture(_loss(model))
    with pytest.warns(UserWarning) as seen:
        step(*_batch(np.random.default_rng(13)))
    assert str(seen[0].message) == ("capture: TinyTransformer has forward hooks, which a replay "
                                    "would not call; running fn eagerly from now on")


def test_the_zeros_a_getitem_starts_from_have_the_gradients_dtype():
    """A getitem's gradient, the first part of its input's: zeros of the input's dtype (float32
    here: in float64 the matmul's VJP after it would round differently)."""
    ta.manual_seed(0)
    w, v = ta.randn(5, 5, requires_grad=True), ta.randn(5, 5, requires_grad=True)

    def fn(x):
        h = x @ w
        return (h @ v).sum() + h[0].sum()

    step = ta.capture(fn)
    for k in range(4):
        x = ta.tensor(np.random.default_rng(k).standard_normal((5, 5)).astype(np.float32))
        w.grad = v.grad = None
        step(x)
        want_w, want_v = ta.autograd.grad(fn(x), [w, v])
        assert w.grad.dtype == np.float32
        np.testing.assert_array_equal(w.grad.numpy(), want_w.numpy())
        np.testing.assert_array_equal(v.grad.numpy(), want_v.numpy())
    assert step.state == "replaying"


def test_freezing_and_unfreezing_every_call_keeps_up():
    """requires_grad switched on a parameter before every call (as alternating training
    does): each switch is a change the step records again after, never a disagreement that
    would make it give up; the gradients are right each time."""
    model = _model()
    step = ta.capture(_loss(model))
    twin = _model()
    x, y = _batch(np.random.default_rng(14))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(8):
            frozen = k % 4 >= 2
            for m in (model, twin):
                m.lm_head.weight.requires_grad = not frozen  # (tied: wte too)
            _check_against_eager(step, model, twin, x, y)
            assert (model.wte.weight.grad is None) == frozen
    assert step.state in ("recording", "replaying")


def test_a_detached_parameter_read_first_is_refused():
    """w.detach() before fn reads w itself: a new tensor around w's array on every call, which
    a replay would read from the recording (stale once the optimizer replaces w's array)."""
    w = ta.ones(3, requires_grad=True)
    step = ta.capture(lambda x: (x * w.detach()).sum() + (x * w).sum())
    with pytest.warns(UserWarning, match=r"made a \(3,\) tensor outside the ops"):
        for _ in range(3):
            step(ta.ones(3))
    assert step.program is None and step.state.startswith("eager")
    with ta.no_grad():
        w.data = w.data * 3  # a new array, as p.data = p.data - lr * g makes
    w.grad = None
    assert step(ta.ones(3)).item() == 18.0 and w.grad.tolist() == [1.0] * 3


def test_a_buffer_registered_anew_is_read_by_the_replay():
    """register_buffer with a new tensor, twice, while the step replays: each time the step
    records again and reads the new buffer."""

    class Shift(ta.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = ta.nn.Parameter(ta.ones(3))
            self.register_buffer("shift", ta.zeros(3))

        def forward(self, x):
            return ((x + self.shift) * self.w).sum()

    m = Shift()
    step = ta.capture(lambda x: m(x))
    x = ta.ones(3)
    for value in (0.0, 2.0, 5.0):
        m.register_buffer("shift", ta.full((3,), value))
        for _ in range(3):
            assert step(x).item() == 3 * (1 + value)
    assert step.state == "replaying"


def test_one_tensor_passed_twice_is_not_two_arguments_later():
    """Recorded with step(x, x), the program reads one argument for both: step(x, y) after is
    recorded anew (a signature of its own), never replayed with y read as x."""
    w = ta.ones(3, requires_grad=True)
    step = ta.capture(lambda x, y: (x * w).sum() + 10 * (y * w).sum())
    x = ta.ones(3)
    for _ in range(3):
        assert step(x, x).item() == 33.0
    assert step(x, ta.zeros(3)).item() == 3.0 and step(ta.zeros(3), x).item() == 30.0
    for _ in range(3):
        assert step(x, x.detach()).item() == 33.0 and step(x, ta.full((3,), 2.0)).item() == 63.0


INDEXED = {
    "getitem": lambda h, i: h[i],
    "getitem in a tuple": lambda h, i: h[1:, i[:2]],
    "index_select": lambda h, i: h.index_select(0, i),
    "take_along_dim": lambda h, i: h[:3].take_along_dim(i[:, None], 1),
    "gather": lambda h, i: h[:3].gather(1, i[:, None]),
    "index from argmax": lambda h, i: h[:3].take_along_dim((h[:3] * i[:, None]).argmax(1,
                                                                   keepdim=True), 1),
}


@pytest.mark.parametrize("pick", INDEXED.values(), ids=INDEXED.keys())
def test_an_index_argument_is_read_afresh_on_each_replay(pick):
    """An index tensor reaches its op as an array inside the op's settings (getitem's index) or
    as a constant input (take_along_dim): a replay reads the argument of the call there, never
    the array it was recorded with (which was frozen in once: a silent wrong result)."""
    rng = np.random.default_rng(0)
    w = ta.tensor(rng.standard_normal((5, 7)), requires_grad=True)

    def fn(x, i):
        return (pick(x @ w, i) ** 2).sum()

    step = ta.capture(fn)
    x = ta.tensor(rng.standard_normal((4, 5)))
    first, other = ta.tensor([0, 1, 2]), ta.tensor([3, 3, 0])
    assert _replays_after(step, x, first)
    for i in (other, first, ta.tensor([2, 0, 1])):
        w.grad = None
        got = step(x, i)
        (want,) = ta.autograd.grad(fn(x, i), [w])
        assert got.item() == fn(x, i).item()
        np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert step.state == "replaying"
    assert "arg1" in str(step.program)


def test_a_mask_whose_count_changes_goes_back_to_eager():
    """A bool mask's values decide the shape it picks: a replay whose pick comes out another
    shape than recorded stops before writing anything, warns, and the call runs eagerly."""
    w = ta.tensor(np.arange(35.0).reshape(5, 7) / 10, requires_grad=True)
    x = ta.ones(4, 5, dtype=np.float64)

    def fn(x, m):
        return ((x @ w)[m] ** 2).sum()

    two = ta.tensor([True, False, True, False])
    assert _replays_after(step := ta.capture(fn), x, two)
    step(x, ta.tensor([False, True, False, True]))  # two again: replayed
    assert step.state == "replaying"
    three = ta.tensor([True, True, True, False])
    w.grad = None
    with pytest.warns(UserWarning, match=r"op 1 \(getitem\) gave \(3, 7\) where the recording "
                                         r"had \(2, 7\)"):
        got = step(x, three)
    (want,) = ta.autograd.grad(fn(x, three), [w])
    assert got.item() == fn(x, three).item()
    np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert step.state.startswith("eager: op 1 (getitem)")


READS = {
    "item()": ("item()", lambda x: x.sum().item()),
    "float()": ("item()", lambda x: float(x.sum())),
    "int() as an index": ("item()", lambda x: [1.0, 2.0, 3.0][int(x[0, 0])]),
    "bool()": ("bool()", lambda x: 2.0 if bool(x.sum() > 30) else 1.0),
    "numpy()": ("numpy()", lambda x: float(x.numpy().sum())),
    "tolist()": ("numpy()", lambda x: x.tolist()[0][0]),
    "np.asarray": ("numpy()", lambda x: float(np.asarray(x).sum())),
}


@pytest.mark.parametrize("how, read", READS.values(), ids=READS.keys())
def test_values_read_into_python_are_never_frozen(how, read):
    """A number read out of a tensor inside fn (item(), float(), a branch on bool()) would be
    replayed as the recording's number: capture refuses it by name, and fn stays eager and
    right when the batch changes (it was frozen before: a silent wrong result)."""
    w = ta.ones(5, 7, dtype=np.float64, requires_grad=True)

    def fn(x):
        return (x @ w).sum() * read(x)

    step = ta.capture(fn)
    x = ta.ones(4, 5, dtype=np.float64)
    said = (rf"read a tensor's values into Python \({re.escape(how)}\), which a replay would "
            "take as they were when recorded; compute with ops instead, or read them from what "
            "fn returns")
    with pytest.warns(UserWarning, match=said):
        for _ in range(3):
            step(x)
    assert step.state.startswith("eager")
    w.grad = None
    assert step(x * 2).item() == fn(x * 2).item() != fn(x).item() * 2
    (want,) = ta.autograd.grad(fn(x * 2), [w])
    np.testing.assert_array_equal(w.grad.numpy(), want.numpy())


_EMB = ta.nn.Embedding(7, 5, padding_idx=0)
LIBRARY = {  # fn(h, y, ids): h (4, 7) logits on the graph, y (4,) targets, ids (2, 3) token ids
    "nll_loss": lambda h, y, ids: F.nll_loss(F.log_softmax(h, 1), y),
    "nll_loss weighted": lambda h, y, ids: F.nll_loss(F.log_softmax(h, 1), y,
                                                      weight=ta.linspace(0.5, 1.5, 7)),
    "cross_entropy weighted, smoothed": lambda h, y, ids: F.cross_entropy(
        h, y, weight=ta.linspace(0.5, 1.5, 7), label_smoothing=0.1),
    "cross_entropy on one_hot": lambda h, y, ids: F.cross_entropy(
        h, F.one_hot(y.clamp(0, 6), 7).float()),
    "embedding with padding_idx": lambda h, y, ids: (_EMB(ids) ** 2).sum() + h.sum(),
    "causal_mask": lambda h, y, ids: F.scaled_dot_product_attention(
        h[None, :, :4], h[None, :, 3:], h[None], attn_mask=F.causal_mask(4)).sum(),
    "pad, constant and reflect": lambda h, y, ids: (F.pad(h, (1, 2)) ** 2).sum()
        + (F.pad(h, (2, 1), mode="reflect") ** 3).sum(),
    "zeros, full, arange": lambda h, y, ids: F.mse_loss(h, ta.zeros(4, 7)) + (
        h * ta.arange(7) * ta.full((4, 1), 0.5)).sum(),
    "randn, rand": lambda h, y, ids: (h * ta.randn(4, 7)).sum() + (h * ta.rand(7)).sum(),
    "index_fill, index_add, index_copy": lambda h, y, ids: (
        h.index_fill(1, ids[0], 0.5).index_add(1, ids[1], h[:, :3] * 2).index_copy(
            0, ids[1, :1].clamp(0, 3), h[1:2].exp()) ** 2).sum(),
    "diag of a vector": lambda h, y, ids: (h[0].diag(1) ** 2).sum() + (h[1].diag(-2) ** 3).sum(),
    "bernoulli, multinomial": lambda h, y, ids: (h * ta.bernoulli(ta.full((4, 7), 0.5))).sum()
        + h.gather(1, ta.multinomial(h.detach().exp(), 3)).sum(),
}


@pytest.mark.parametrize("use", LIBRARY.values(), ids=LIBRARY.keys())
def test_tensors_the_library_makes_inside_fn_replay(use):
    """What a loss or layer makes inside fn (class indices and weights from the targets, a
    one-hot, a padding mask, a causal mask, pad's blocks and indices, zeros, random draws) is
    made again on each replay from that call's arguments: loss and gradients equal eager's bit
    for bit on new targets (ignored ones included), and no warning."""
    rng = np.random.default_rng(0)
    w = ta.tensor(rng.standard_normal((5, 7)).astype(np.float32), requires_grad=True)

    def fn(x, y, ids):
        return use(x @ w, y, ids)

    step = ta.capture(fn)
    x = ta.tensor(rng.standard_normal((4, 5)).astype(np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k, (y, ids) in enumerate([([1, 3, -100, 6], [[0, 3, 4], [2, 0, 1]])] * 3 + [
                ([0, -100, 2, 2], [[1, 1, 0], [6, 5, 4]]), ([6, 5, 4, 3], [[0, 0, 0], [0, 0, 2]])]):
            y, ids = ta.tensor(y), ta.tensor(ids)
            w.grad = None
            ta.manual_seed(k)  # (randn and rand draw the same numbers in both)
            got = step(x, y, ids)
            ta.manual_seed(k)
            want = fn(x, y, ids)
            (want_w,) = ta.autograd.grad(want, [w])
            assert got.item() == want.item()
            np.testing.assert_array_equal(w.grad.numpy(), want_w.numpy())
    assert step.state == "replaying"


def test_a_target_out_of_range_is_an_error_in_a_replay_too():
    """The range check of the class indices is part of the op a replay runs again."""
    w = ta.ones(5, 7, requires_grad=True)
    step = ta.capture(lambda x, y: F.nll_loss(F.log_softmax(x @ w, 1), y))
    x = ta.ones(4, 5)
    assert _replays_after(step, x, ta.tensor([1, 2, 3, 4]))
    with pytest.raises(ta.errors.DimError, match="nll_loss: target 7 is out of range for 7"):
        step(x, ta.tensor([1, 7, 3, 4]))
    with pytest.raises(ta.errors.DimError, match="one_hot: class ids must be in 0..6"):
        ta.capture(lambda x, y: (x @ w * F.one_hot(y, 7)).sum())(x, ta.tensor([0, 1, 2, 9]))
    inferred = ta.capture(lambda x, y: (x @ w * F.one_hot(y)[:, :7]).sum())
    with pytest.warns(UserWarning, match=r"read a tensor's values into Python \(one_hot without "
                                         "num_classes"):
        inferred(x, ta.tensor([0, 1, 2, 6]))


def test_a_new_default_dtype_is_seen_by_what_fn_makes():
    """ta.zeros(...) inside fn takes the default dtype: after set_default_dtype the step is
    recorded again, and its loss comes out in the dtype an eager call gives."""
    w = ta.ones(3, dtype=np.float32, requires_grad=True)
    step = ta.capture(lambda x: F.mse_loss(x * w, ta.ones(3)))
    x = ta.ones(3, dtype=np.float32) * 2
    assert _replays_after(step, x) and step(x).dtype == np.float32
    try:
        ta.set_default_dtype(np.float64)
        for _ in range(3):
            got = step(x)
            assert got.dtype == np.float64 and got.item() == 1.0
    finally:
        ta.set_default_dtype(np.float32)
    assert step.state == "replaying" and step(x).dtype == np.float32


def _effects():
    w = ta.ones(3, requires_grad=True)
    opt = ta.optim.SGD([w], lr=0.1)
    step_lr = ta.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    layer = ta.nn.Linear(3, 1)
    sched = ta.optim.lr_scheduler
    restarts = sched.CosineAnnealingWarmRestarts(opt, T_0=2)
    seq = sched.SequentialLR(opt, [sched.ConstantLR(opt), sched.ExponentialLR(opt, 0.9)], [2])
    plateau = sched.ReduceLROnPlateau(opt)
    cosine = ta.optim.CosineSchedule(opt, total=10, warmup=2)
    return w, {"zero_grad()": opt.zero_grad, "Module.zero_grad()": layer.zero_grad,
               "SGD.step()": opt.step, "StepLR.step()": step_lr.step,
               "CosineAnnealingWarmRestarts.step()": restarts.step,
               "SequentialLR.step()": seq.step,
               "ReduceLROnPlateau.step()": lambda: plateau.step(1.0),
               "CosineSchedule.step()": cosine.step, "manual_seed()": lambda: ta.manual_seed(0)}


@pytest.mark.parametrize("what", list(_effects()[1]))
def test_what_fn_calls_besides_ops_is_refused_by_name(what):
    """zero_grad(), an optimizer's or scheduler's step or manual_seed() inside fn would run on
    the recording calls only: capture refuses them by name and fn stays eager (a zero_grad()
    inside fn let the gradients pile up over replays before: a silent wrong result)."""
    w, effects = _effects()
    call = effects[what]

    def fn(x):
        call()
        return (x * w).sum()

    step = ta.capture(fn)
    name = "zero_grad()" if what.endswith("zero_grad()") else what
    with pytest.warns(UserWarning, match=rf"fn called {re.escape(name)}, which a replay would "
                                         r"not call again \(the Python in fn runs only while "
                                         r"recording\); call it outside fn"):
        for _ in range(4):
            w.grad = None
            step(ta.ones(3))
    assert step.state.startswith("eager")
    if what == "zero_grad()":
        step(ta.ones(3))
        assert w.grad.numpy().tolist() == [1.0, 1.0, 1.0]


def test_a_module_setting_changed_between_calls_is_recorded_again():
    """Dropout.p (or any attribute a forward reads) set anew between calls: the step records
    again, as for a mode switch, instead of replaying the old setting; setting the same value
    again keeps replaying."""
    ta.manual_seed(0)
    drop = ta.nn.Dropout(0.5)
    model = ta.nn.Sequential(ta.nn.Linear(4, 4), drop)
    step = ta.capture(lambda x: model(x).sum())
    x = ta.ones(2, 4)
    assert _replays_after(step, x)
    drop.p = drop.p
    step(x)
    assert step.state == "replaying"
    drop.p = 0.0
    assert step(x).item() == model(x).sum().item()  # no dropout: the same loss eagerly
    assert step.state == "recording" and _replays_after(step, x)


def test_an_index_read_live_is_read_afresh_from_its_tensor():
    """A tensor fn reads from outside (a buffer, say) and also uses as an index: the replay
    reads the index from the tensor each call, so a change made to it in place between calls
    is seen, as the eager step sees it."""
    w = ta.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    rows = ta.tensor([2, 0])

    def fn(x):
        return (rows * 0).sum() + ((x * w)[rows] ** 2).sum()

    step = ta.capture(fn)
    x = ta.ones(3, 4, dtype=np.float64)
    assert _replays_after(step, x)
    for new in ([1, 1], [0, 2]):
        rows.data[...] = new
        w.grad = None
        got = step(x)
        (want,) = ta.autograd.grad(fn(x), [w])
        assert got.item() == fn(x).item()
        np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert step.state == "replaying" and "t0" in str(step.program).split("getitem")[1]


class _Counting(ta.nn.Module):
    """A layer that sets an attribute in every forward (a call counter)."""

    def __init__(self):
        super().__init__()
        self.lin = ta.nn.Linear(3, 1)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.lin(x)


def test_a_state_that_changes_every_call_is_named_once():
    """A module attribute set in each forward moves the module state every call, so no two
    recordings agree on it: the step stays right (eager), and says why once."""
    layer = _Counting()
    step = ta.capture(lambda x: layer(x).sum())
    x = ta.ones(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the first call and three fresh starts: no word yet
        for _ in range(4):
            step(x)
    with pytest.warns(UserWarning, match=r"capture: fn was recorded anew on 4 calls in a row "
                                         r"because a module's mode, parameters, buffers or "
                                         r"attributes \(one set inside forward\?\) or the "
                                         "default dtype changed between calls"):
        step(x)
    assert step.state == "recording" and layer.calls == 5
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        for _ in range(5):
            step(x)


def test_the_count_of_fresh_starts_begins_again_after_a_replay():
    """Four fresh starts in a row are counted from the last time a program was found: after a
    replay, the word comes on the fourth state change, not earlier."""
    w = ta.ones(3, requires_grad=True)
    drop = ta.nn.Dropout(0.0)
    step = ta.capture(lambda x: drop(x * w).sum())
    x = ta.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for p in (0.0, 0.0, 0.0, 0.1, 0.1, 0.0, 0.0, 0.0):  # changes, then agreement: replays
            drop.p = p
            step(x)
        assert step.state == "replaying"
        for p in (0.1, 0.2, 0.3):
            drop.p = p
            step(x)
    drop.p = 0.4
    with pytest.warns(UserWarning, match="recorded anew on 4 calls in a row"):
        step(x)


def test_a_parameter_reshaped_every_call_is_named_once():
    """The same parameter read with a new shape on each call: recorded anew each time, named."""
    w = ta.ones(2, requires_grad=True)
    step = ta.capture(lambda x: (x * w).sum())
    with pytest.warns(UserWarning, match=r"because a tensor it reads \(its shape, dtype or "
                                         r"requires_grad\) changed between calls"):
        for n in range(3, 8):
            w.data = np.ones(n, np.float32)
            w.grad = None
            assert step(ta.ones(1)).item() == n


METHODS = {  # h (4, 6) on the graph: methods whose indices or masks a replay makes again
    "tril, triu": lambda h: (h.tril() * h.triu(1)).sum() + h.tril(-1).sum(),
    "roll": lambda h: (h.roll((1, -2), (0, 1)) * h).sum(),
    "diagonal": lambda h: h.diagonal().sum() + (h.diagonal(1) ** 2).sum(),
    "repeat_interleave": lambda h: (h.repeat_interleave([1, 2, 0, 1], dim=0) ** 2).sum(),
    "sort, argsort": lambda h: (h.sort(1, descending=True).values * ta.arange(6)).sum()
        + (h * h.argsort(0)).sum(),
    "topk": lambda h: (h.topk(2, 1).values ** 2).sum(),
    "median, kthvalue": lambda h: (h.median(1).values ** 2).sum() + h.kthvalue(2, 0).values.sum(),
    "cummax, cummin": lambda h: (h.cummax(1).values ** 2).sum() + h.cummin(0).values.sum(),
}


@pytest.mark.parametrize("use", METHODS.values(), ids=METHODS.keys())
def test_methods_that_make_indices_replay(use):
    """Masks and indices built from settings (tril's mask, roll's and diagonal's indices) and
    orders found from values (sort, topk, median, cummax) are ops a replay runs again: equal to
    eager on a batch whose order differs, and no warning."""
    rng = np.random.default_rng(0)
    w = ta.tensor(rng.standard_normal((5, 6)), requires_grad=True)

    def fn(x):
        return use(x @ w)

    step = ta.capture(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in [rng.standard_normal((4, 5))] * 3 + [rng.standard_normal((4, 5))] * 2:
            x = ta.tensor(x)
            w.grad = None
            got = step(x)
            (want,) = ta.autograd.grad(fn(x), [w])
            assert got.item() == fn(x).item()
            np.testing.assert_array_equal(w.grad.numpy(), want.numpy())
    assert step.state == "replaying"


def test_repeats_from_a_tensor_are_a_value_read():
    """repeat_interleave with counts in a tensor: the output's shape depends on its values, so
    capture refuses it by name and the step stays right."""
    w = ta.ones(3, requires_grad=True)
    step = ta.capture(lambda x, r: (x * w).repeat_interleave(r).sum())
    with pytest.warns(UserWarning, match=r"read a tensor's values into Python \(numpy\(\)\)"):
        for _ in range(3):
            assert step(ta.ones(3), ta.tensor([1, 0, 2])).item() == 3.0
    assert step(ta.ones(3), ta.tensor([2, 2, 2])).item() == 6.0


class _WithBuffer(ta.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = ta.nn.Linear(3, 3)
        self.register_buffer("pos", ta.ones(3))
        self.register_buffer("scale", ta.full((3,), 2.0))

    def forward(self, x):
        return self.lin((x + self.pos) * self.scale)


@pytest.mark.parametrize("passed", ["buffer", "its detach()", "a frozen parameter"])
def test_a_tensor_a_module_holds_is_not_taken_as_an_argument(passed):
    """step(model.pos): fn reads the buffer as the argument and through the module, one place
    in the recording, so a replay would read the next call's argument for both (a silent wrong
    result before). Capture refuses to record it, by name, and the step stays right."""
    ta.manual_seed(0)
    model = _WithBuffer()
    model.lin.bias.requires_grad = False
    arg = {"buffer": model.pos, "its detach()": model.pos.detach(),
           "a frozen parameter": model.lin.bias}[passed]
    step = ta.capture(lambda x: model(x).sum())
    said = (r"argument 0 is a module's parameter or buffer \(or shares its memory\), which fn "
            "may also read through the module, where a replay would read the next call's "
            r"argument; pass a copy \(x.clone\(\)\)")
    with pytest.warns(UserWarning, match=said):
        for _ in range(3):
            assert step(arg).item() == model(arg).sum().item()
    assert step(ta.zeros(3)).item() == model(ta.zeros(3)).sum().item()
    copy = ta.capture(lambda x: model(x).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            copy(arg.clone())
    assert copy.state == "replaying"
    assert copy(ta.zeros(3)).item() == model(ta.zeros(3)).sum().item()


def test_a_tensor_hook_once_removed_no_longer_keeps_the_step_eager():
    """register_hook then remove(), before the recording or after replays began: the step
    replays (a removed hook leaves an empty dict, which is no hook)."""
    model, twin = _model(), _model()
    handle = model.wte.weight.register_hook(lambda g: None)
    handle.remove()
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "has a hook" warning
        assert _replays_after(step, x, y)
        model.wte.weight.register_hook(lambda g: g * 2).remove()  # between two replays
        assert _replays_after(step, x, y, calls=1)
    _check_against_eager(step, model, twin, x, y)


def _as_eager(fn):
    """fn run as a captured step's eager call runs it: fn(x), then backward, the loss back."""
    return lambda x: _backward_of(fn(x))


def _against_eager(make, calls=5):
    """make() -> (fn, w): a function of x and a tensor whose .grad it fills, made afresh for
    each run. The captured step and the eager one, each on its own make(), called `calls`
    times: [(loss, w.grad)] per call, for each; and the warnings the captured one gave."""
    runs = []
    for step_of in (ta.capture, _as_eager):
        fn, w = make()
        step = step_of(fn)
        got = []
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for _ in range(calls):
                loss = step(ta.ones(3))
                got.append((loss.item(), None if w.grad is None else w.grad.numpy().tolist()))
        runs.append(got)
        if step_of is ta.capture:
            said = [str(r.message) for r in seen if issubclass(r.category, UserWarning)]
            state = step.state
    return runs[0], runs[1], said, state


def _backward_in_fn(how):
    """make() for a fn that runs a backward pass of its own (`how`) besides the step's."""
    def make():
        w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
        inner = ta.capture(lambda x: (w * x * x).sum())

        def fn(x):
            loss = (w * x).sum()
            if how == "backward()":
                (w * w).sum().backward()
            elif how == "backward_steps()":
                for _ in (w * w).sum().backward_steps():
                    pass
            elif how == "autograd.grad()":  # its gradient used as a value of the loss
                (gw,) = ta.autograd.grad((w * w).sum(), [w])
                loss = loss + (gw.detach() * x).sum()
            elif how == "a captured step":  # one captured step called by another's fn
                loss = loss + inner(x) * 0.0
            return loss

        return fn, w
    return make


@pytest.mark.parametrize("how", ["backward()", "backward_steps()", "autograd.grad()",
                                 "a captured step"])
def test_a_backward_pass_inside_fn_is_refused_by_name(how):
    """backward() (backward_steps(), autograd.grad(), a captured step of its own) inside fn
    fills .grad or computes values on the recording calls only: a replay skipped it, and the
    gradients silently changed from the third call on. Refused by name: fn stays eager, right
    on every call, with one warning."""
    got, want, said, state = _against_eager(_backward_in_fn(how))
    assert got == want
    assert state.startswith("eager")
    assert len(said) == 1
    assert said[0].startswith(f"capture: fn called {how}, which a replay would not call again")


def _state_change_in_fn(how):
    """make() for a fn that changes, besides its ops, state a replay would not change again."""
    def make():
        w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
        v = ta.tensor([0.5, 0.5, 0.5], requires_grad=True)
        buf, src = ta.zeros(3), ta.zeros(3)

        def fn(x):
            if how == ".grad = None":  # set_to_none inside fn: each call's gradient alone
                w.grad = None
            elif how == ".grad.zero_()":
                if w.grad is not None:
                    w.grad.zero_()
            elif how == "requires_grad_()":  # on for the ops, off after them
                v.requires_grad_(True)
            elif how == "copy_() into a buffer":  # the buffer read after, the source moving
                src.data += 1.0  # (as a schedule outside fn would move it between calls)
                buf.copy_(src)
            elif how == ".data =":
                w.data = w.data * 2
            loss = (w * x * buf.exp()).sum() + (v * x).sum()
            if how == "requires_grad_()":
                v.requires_grad_(False)
            return loss

        return fn, w
    return make


@pytest.mark.parametrize("how,message", [
    (".grad = None", "fn set a tensor's .grad"),
    (".grad.zero_()", "a tensor was changed in place inside fn"),
    ("requires_grad_()", "fn changed a tensor's requires_grad"),
    ("copy_() into a buffer", "a tensor was changed in place inside fn"),
    (".data =", "fn replaced a tensor's .data"),
])
def test_a_state_change_inside_fn_is_refused_by_name(how, message):
    """Setting .grad (p.grad = None), zeroing it in place, switching requires_grad, writing
    into a tensor fn has not read yet, replacing a tensor's .data: each is Python a replay
    would skip (gradients piled up, a buffer went stale, a replay crashed). fn stays eager,
    right on every call, with one warning that says what it did."""
    got, want, said, state = _against_eager(_state_change_in_fn(how))
    assert got == want
    assert state.startswith("eager")
    assert len(said) == 1 and said[0].startswith(f"capture: {message}")


def test_what_fn_makes_for_itself_is_no_state_change():
    """A tensor made inside fn with its .grad None and requires_grad off, a Generator made
    and never reseeded, .grad read: none of these changes state a replay skips; the step
    replays."""
    w = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    g = ta.Generator().manual_seed(0)

    def fn(x):
        scale = ta.ones(3, requires_grad=False) * 2
        scale.requires_grad_(False)
        assert w.grad is None or w.grad.shape == (3,)
        return (w * x * scale * ta.rand(3, generator=g)).sum()

    step = ta.capture(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _replays_after(step, ta.ones(3), calls=4)


COUNTS = {
    "nonzero()": lambda x: x.nonzero().shape[0],
    "nonzero(as_tuple=True)": lambda x: len(x.nonzero(as_tuple=True)[0]),
    "argwhere()": lambda x: x.argwhere().shape[0],
}


@pytest.mark.parametrize("count", COUNTS.values(), ids=COUNTS.keys())
def test_a_count_of_nonzero_entries_is_a_value_read(count):
    """nonzero() and argwhere() give a shape their input's values decide (a count read into
    Python): capture refuses them by name, as item(), and the step stays right when the count
    changes (it was frozen before: 0.5 where eager gives 1.0)."""
    w = ta.tensor(np.ones(3), requires_grad=True)

    def fn(x):
        return (w * x).sum() / count(x)

    step = ta.capture(fn)
    with pytest.warns(UserWarning, match=r"read a tensor's values into Python \((nonzero|"
                                         r"argwhere)\(\)\)"):
        for _ in range(3):
            assert step(ta.tensor([1.0, 1.0, 0.0])).item() == 1.0
    assert step.state.startswith("eager")
    w.grad = None
    assert step(ta.tensor([1.0, 0.0, 0.0])).item() == 1.0
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.0, 0.0])


def test_a_mask_whose_count_decides_a_later_shape_goes_back_to_eager():
    """masked_scatter finds the mask's positions with an op and takes as many of source's
    entries: a replay whose mask picks another count stops before writing anything (it took
    the recording's count before: a silent wrong result) and runs eagerly."""
    w = ta.tensor(np.arange(4.0), requires_grad=True)

    def fn(x, m):
        return (w.masked_scatter(m, x * 10) ** 2).sum()

    step = ta.capture(fn)
    x = ta.tensor(np.arange(1.0, 5.0))
    one = ta.tensor([True, False, False, False])
    assert _replays_after(step, x, one)
    three = ta.tensor([True, True, False, True])
    w.grad = None
    with pytest.warns(UserWarning, match=r"op \d+ \(masked_positions\) gave \(3,\) where the "
                                         r"recording had \(1,\)"):
        got = step(x, three)
    (want,) = ta.autograd.grad(fn(x, three), [w])
    assert got.item() == fn(x, three).item() == 1404.0
    np.testing.assert_array_equal(w.grad.numpy(), want.numpy())


def test_a_branch_on_data_is_a_value_read():
    """`.data` is a detached tensor: a branch on it (or a number from it) in fn would be frozen
    into the replay. A read of .data from fn's own code while recording is refused by name
    (the library's reads are not), the step stays eager and right, and .data is again the
    plain getter after the recording, also when fn raised."""
    plain = ta.Tensor.data.fget
    w = ta.tensor(np.ones(3), requires_grad=True)

    def fn(x, flag):
        loss = (w * x).sum()
        return loss * 2 if flag.data > 0 else loss

    step = ta.capture(fn)
    x = ta.ones(3, dtype=np.float64)
    with pytest.warns(UserWarning, match=r"capture: fn read a tensor's values into Python "
                                         r"\(bool\(\)\)"):  # (the branch on .data's values)
        for _ in range(3):
            assert step(x, ta.tensor(1.0)).item() == 6.0
    assert step.state.startswith("eager")
    w.grad = None
    assert step(x, ta.tensor(-1.0)).item() == 3.0
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0, 1.0])

    def with_data(x):  # .data's values in ops, which a replay would take as recorded
        return (w.data * x).sum() + (w * x).sum()

    step = ta.capture(with_data)
    with pytest.warns(UserWarning, match=r"capture: fn read a tensor's \.data \(detached\), "
                                         r"which a replay would take as it was when recorded"):
        for _ in range(3):
            assert step(x).item() == 6.0
    assert step.state.startswith("eager")
    w.grad = None
    assert step(x).item() == 6.0
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0, 1.0])  # (.data's part: none)
    assert ta.Tensor.data.fget is plain

    def broken(x):
        x.data  # noqa: B018 - a read, then an error
        raise KeyError("in fn")

    with pytest.raises(KeyError, match="in fn"):
        ta.capture(broken)(x)
    assert ta.Tensor.data.fget is plain


_SCALE = ta.tensor(2.0)  # a global fn reads by name (rebound by the test below)


@pytest.mark.parametrize("where", ["closure", "global"])
def test_a_tensor_rebound_by_name_after_the_recording_is_read_by_the_replay(where):
    """A tensor fn reads through a name of its own (a closure variable, a global) is read at
    record time; rebound to another tensor once the step replays (a schedule outside fn), the
    replay read the old one before (a silent wrong result). Now the name is checked before
    each replay: the step records again and then replays with the new tensor."""
    global _SCALE
    w = ta.tensor(np.ones(3), requires_grad=True)
    scale = _SCALE = ta.tensor(2.0)

    def fn(x):
        return (w * x * (scale if where == "closure" else _SCALE)).sum()

    step = ta.capture(fn)
    x = ta.tensor(np.arange(3.0))
    assert _replays_after(step, x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for value, calls in ((5.0, 3), (7.0, 1)):
            scale = _SCALE = ta.tensor(value)
            for _ in range(calls):
                w.grad = None
                assert step(x).item() == 3.0 * value
                np.testing.assert_array_equal(w.grad.numpy(), np.arange(3.0) * value)
            assert step.state == ("replaying" if calls == 3 else "recording")
    assert _replays_after(step, x)


class _Gated(ta.nn.Module):
    """A module whose forward reads a plain list attribute (which layers are on)."""

    def __init__(self):
        super().__init__()
        self.lins = ta.nn.ModuleList([ta.nn.Linear(3, 1) for _ in range(3)])
        self.active = [0, 1, 2]
        self.scales = {0: 1.0}

    def forward(self, x):
        return sum(self.lins[i](x).sum() * self.scales.get(i, 2.0) for i in self.active)


def test_a_modules_list_or_dict_changed_in_place_is_recorded_again():
    """A module's list or dict attribute changed in place (m.active.remove(1), m.scales[1] =
    3.0) is no attribute assignment, which the module state counts: the replay ran the old
    program before. Its contents (the objects in it) are compared before each replay now."""
    ta.manual_seed(0)
    m, twin = _Gated(), _Gated()
    twin.load_state_dict(m.state_dict())
    step = ta.capture(lambda x: m(x))
    x = ta.ones(2, 3)
    assert _replays_after(step, x)
    for change in (lambda g: g.active.remove(1), lambda g: g.scales.__setitem__(2, 3.0),
                   lambda g: g.active.append(1)):
        change(m)
        change(twin)
        for _ in range(3):
            m.zero_grad()
            twin.zero_grad()
            got, want = step(x), twin(x)
            want.backward()
            assert got.item() == want.item()
            np.testing.assert_array_equal(m.lins[1].weight.grad is None,
                                          twin.lins[1].weight.grad is None)
            for a, b in zip(m.parameters(), twin.parameters(), strict=True):
                if b.grad is not None:
                    np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
        assert step.state == "replaying"


@pytest.mark.parametrize("make", [lambda y: ta.zeros_like(y), lambda y: ta.ones_like(y),
                                  lambda y: ta.full_like(y, 2.0), lambda y: ta.empty_like(y)])
def test_a_like_tensor_of_a_strided_one_replays_with_its_layout(make):
    """zeros_like(x.t()) keeps x.t()'s strides (torch's preserve_format) through an op
    (laid_out), so a captured fn that makes one replays, not 'fn replaced a tensor's .data'."""
    w = ta.randn(3, 4, requires_grad=True)

    def fn(x):
        y = (x * w).t()  # (4, 3), strides of a transpose
        z = make(y)
        assert z.stride() == y.stride()
        return (y * z).sum()

    step = ta.capture(fn)
    for _ in range(4):
        x = ta.randn(3, 4)
        w.grad = None
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loss = step(x)
        want = make(ta.ones(4, 3)).numpy().T
        np.testing.assert_allclose(w.grad.numpy(), x.numpy() * want, rtol=1e-6)
        np.testing.assert_allclose(loss.item(), (x.numpy() * w.numpy() * want).sum(), rtol=1e-5)
    assert step.state == "replaying"
