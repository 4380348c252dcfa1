"""ta.capture: a step recorded on its first calls and replayed after gives, bit for bit, the
loss and gradients of the eager step; what would make a replay wrong sends it back to eager."""

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

    def fn(x):
        h = (m * w + x).tanh()  # x is float64: promoted
        return (h.T @ h)[1:].sum() + (m[0] * w).exp().mean() + w.sum()

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
    for m in (model, twin):  # a parameter's array replaced by one of another dtype
        m.ln_f.weight.data = m.ln_f.weight.data.astype(np.float64)
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

    class Double(ta.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

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
    eagerly (a forward hook sees it); no_grad then fails as loss.backward() would."""
    model = _model()
    seen = _counting_forward(model)
    step = ta.capture(_loss(model))
    x, y = _batch(np.random.default_rng(7))
    assert _replays_after(step, x, y)
    n = len(seen)
    with ta.autograd.tracing(ta.autograd.Tracer()):
        step(x, y)
    assert len(seen) == n + 1
    with ta.no_grad(), pytest.raises(ta.GraphError, match="does not require grad"):
        step(x, y)


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
    with pytest.warns(UserWarning, match=r"MLP blocks\.1\.mlp has forward hooks"):
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


def test_values_made_outside_the_ops_are_never_frozen():
    """A mask made from the targets by a comparison (no op records it) is refused even when
    the first calls see the same batch, as a benchmark's would: frozen, it would be wrong on
    the next batch. The step stays eager and right."""
    w = ta.ones(4, requires_grad=True)

    def fn(x, y):
        per_row = ((x * w) ** 2).sum(-1)
        return (per_row * (y != 0).float()).sum()

    step = ta.capture(fn)
    x, y = ta.ones(3, 4), ta.tensor([1, 0, 2])
    with pytest.warns(UserWarning, match=r"made a \(3,\) tensor outside the ops"):
        for _ in range(3):
            step(x, y)
    w.grad = None
    assert step(x, ta.tensor([0, 0, 2])).item() == 4.0 and w.grad.numpy().tolist() == [2.0] * 4


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
