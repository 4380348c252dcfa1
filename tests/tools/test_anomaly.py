"""detect_anomaly, as torch's anomaly mode: backward raises where a VJP (a built-in op's, a
custom Function's, or one whose output gradient a hook changed) returns NaN, naming the node as
torch does ("Function 'SqrtBackward0' returned nan values in its 0th output.") with the forward
traceback of the op that made it; Inf anywhere and NaN in the forward are no errors (an additive
-inf mask, an overflow). Known traps warn. The flag is global, as torch's: every thread sees it;
TINYATTN_DEBUG=1 sets it from the environment."""

import contextlib
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name

pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # NumPy's own divide-by-zero
    pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled"),  # torch's
    pytest.mark.filterwarnings("ignore:Converting a tensor with requires_grad"),  # torch's
]


@contextlib.contextmanager
def no_anomaly_warnings():
    """A block in which an AnomalyWarning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ta.AnomalyWarning)
        yield


# ---- forward: non-finite values are no errors (torch's anomaly mode checks backward only) ------


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_forward_inf_and_nan_are_no_anomaly_as_torchs(lib_name):
    lib = ta if lib_name == "tinyattn" else pytest.importorskip("torch")
    x = lib.tensor([0.0, 1.0, 2.0], requires_grad=True)
    with lib.autograd.detect_anomaly():
        mask = lib.tensor([1.0, 1.0, 0.0]).log()  # the common additive -inf mask
        big = lib.tensor(1e30) * 1e30  # an overflow to inf
        nan = (x * 2) / x  # 0 / 0 in the forward
        (x + mask).softmax(-1).sum().backward()  # a masked softmax trains
    assert float(mask[2]) == -np.inf and float(big) == np.inf
    assert np.isnan(float(nan[0])) and np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_an_inf_gradient_is_no_anomaly_as_torchs(lib_name):
    lib = ta if lib_name == "tinyattn" else pytest.importorskip("torch")
    x = lib.tensor([0.0, 1.0, 4.0], requires_grad=True)
    with lib.autograd.detect_anomaly():
        (x.sqrt() * 3).sum().backward()  # d sqrt(x) / dx = inf at 0
    assert x.grad.numpy()[0] == np.inf


def test_outside_the_block_nothing_is_checked():
    x = ta.tensor([0.0, 1.0], requires_grad=True)
    with ta.detect_anomaly():
        pass
    (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


# ---- backward: a NaN returned by a node ---------------------------------------------------------


def _torch_message(make):
    """The message of the error torch's anomaly mode raises for `make(torch)`'s backward."""
    torch = pytest.importorskip("torch")
    with torch.autograd.detect_anomaly(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch warns the forward trace too)
        with pytest.raises(RuntimeError) as info:
            make(torch)
    return str(info.value)


def _sqrt_at_zero(lib):
    x = lib.tensor([0.0, 1.0, 4.0], requires_grad=True)
    (x.sqrt() * 0).sum().backward()  # sqrt's VJP: 0 / (2 * 0) = NaN


def test_backward_nan_raises_naming_the_node_as_torch():
    with ta.detect_anomaly(), pytest.raises(RuntimeError) as info:
        _sqrt_at_zero(ta)
    first = str(info.value).splitlines()[0]
    assert first == "Function 'SqrtBackward0' returned nan values in its 0th output."
    assert first == _torch_message(_sqrt_at_zero)
    assert isinstance(info.value, ta.AnomalyError) and isinstance(info.value, ta.TinyattnError)


def test_the_message_has_the_forward_traceback_and_the_statistics():
    x = ta.tensor(np.array([0.0, 1.0, 4.0]), requires_grad=True)
    with ta.detect_anomaly():
        y = x.sqrt()  # fine forward; its VJP g / (2 sqrt x) is 0 / 0 at 0 below
        loss = (y * 0).sum()
        with pytest.raises(ta.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert "backward pass: sqrt#1: its VJP made NaN for input 0 from an output gradient " \
           "without NaN" in message
    assert "gradient for input 0: (3,) float64" in message and "1 NaN" in message
    assert "forward input 0: (3,) float64: min 0, max 4" in message
    assert "formula: gx = g / (2 * out)" in message
    trace = message[message.index("Traceback of forward call that caused the error:"):]
    assert "test_anomaly.py" in trace and "y = x.sqrt()" in trace
    assert "in test_the_message_has_the_forward_traceback_and_the_statistics" in trace


def test_a_nan_made_in_the_forward_is_shown_when_its_vjp_returns_nan():
    x = ta.tensor(np.array([0.0, 1.0, 2.0]), requires_grad=True)
    with ta.detect_anomaly():
        z = (x * 2) / x  # NaN at 0, no error here
        with pytest.raises(ta.AnomalyError) as info:
            z.sum().backward()
    message = str(info.value)
    assert message.startswith("Function 'DivBackward0' returned nan values in its ")
    assert "its forward output was not finite: it produced NaN from inputs without NaN" in message
    assert "z = (x * 2) / x  # NaN at 0, no error here" in message


def _custom_function_nan(lib):
    class F(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    F.apply(lib.tensor([1.0, 2.0], requires_grad=True)).sum().backward()


def _hook_nan(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * float("nan"))
    y.sum().backward()


def _node_hook_nan(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    y.grad_fn.register_hook(lambda grad_inputs, _: (grad_inputs[0] * float("nan"), None))
    y.sum().backward()


def _seed_nan(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward(lib.tensor([1.0, float("nan")]))


@pytest.mark.parametrize("make", [_custom_function_nan, _hook_nan, _node_hook_nan,
                                  _seed_nan])
def test_a_nan_from_a_custom_backward_a_hook_or_the_seed_is_named_as_torch(make):
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        make(ta)
    assert str(info.value).splitlines()[0] == _torch_message(make)


def test_a_leafs_hook_returning_nan_is_no_anomaly_as_torchs():
    x = ta.tensor([1.0], requires_grad=True)
    x.register_hook(lambda g: g * float("nan"))  # AccumulateGrad returns nothing to check
    with ta.detect_anomaly():
        (x * 2).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_a_sum_of_gradients_that_makes_nan_is_explained_at_the_next_node():
    x = ta.tensor(np.array([1e-300]), requires_grad=True)
    with ta.detect_anomaly():
        h = x * 1.0  # used twice below: its gradient is inf + (-inf)
        loss = (h * 1e300).sum() * 1e10 + (h * -1e300).sum() * 1e10
        with pytest.raises(ta.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert message.startswith("Function 'MulBackward0' returned nan values in its 0th output.")
    assert "adding up the gradients that reach mul#1" in message and "h = x * 1.0" in message


def test_backward_of_a_graph_built_outside_the_block_still_names_the_node():
    x = ta.tensor(np.array([0.0, 1.0]), requires_grad=True)
    loss = (x.sqrt() * 0).sum()
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        loss.backward()
    assert "Function 'SqrtBackward0' returned nan" in str(info.value)
    assert "No forward pass information available" in str(info.value)


def test_check_nan_false_lets_nan_by():
    x = ta.tensor([0.0, 1.0], requires_grad=True)
    with ta.detect_anomaly(check_nan=False):
        (x.sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_as_a_decorator():
    @ta.detect_anomaly()
    def step(x):
        (x.sqrt() * 0).sum().backward()

    assert step.__name__ == "step"
    with pytest.raises(ta.AnomalyError, match="SqrtBackward0"):
        step(ta.tensor([0.0, 1.0], requires_grad=True))


# ---- traps ---------------------------------------------------------------------------------------


def test_a_fully_masked_attention_row_warns_at_the_users_line():
    ta.manual_seed(0)
    q = ta.randn(2, 4, 8)
    keep = np.ones((4, 4), dtype=bool)
    keep[2] = False  # query 2 may attend nothing
    for impl in ("composite", "flash"):
        with ta.detect_anomaly(), pytest.warns(ta.AnomalyWarning) as caught:
            out = F.scaled_dot_product_attention(q, q, q, attn_mask=keep, impl=impl)
        (w,) = caught
        assert "2 of 8 rows are fully masked" in str(w.message)
        assert os.path.basename(w.filename) == "test_anomaly.py"
        assert not out.numpy()[:, 2].any()  # and the row is zeros, not NaN


def test_a_softmax_row_of_all_minus_inf_warns():
    x = ta.tensor([[0.0, 1.0], [float("-inf"), float("-inf")]], requires_grad=True)
    with ta.detect_anomaly(), pytest.warns(ta.AnomalyWarning, match="1 of 2 rows are fully"):
        x.softmax(-1)


def test_large_float16_logits_warn():
    logits = ta.tensor(np.array([[0.0, 20.0, -3.0]], dtype=np.float16))
    with ta.detect_anomaly(), pytest.warns(ta.AnomalyWarning, match="float16 logits reach 20"):
        F.softmax(logits, dim=-1)
    small = ta.tensor(np.array([[0.0, 5.0, -3.0]], dtype=np.float16))
    with ta.detect_anomaly(), no_anomaly_warnings():
        F.softmax(small, dim=-1)


def test_a_float_01_mask_where_a_bool_was_meant_warns():
    ta.manual_seed(0)
    q = ta.randn(1, 4, 8)
    mask01 = np.tril(np.ones((4, 4), dtype=np.float32))  # 1 = attend, as a bool mask would say
    with ta.detect_anomaly(), pytest.warns(ta.AnomalyWarning, match="float tensor of 0s and 1s"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask01)
    with ta.detect_anomaly(), no_anomaly_warnings():
        F.scaled_dot_product_attention(q, q, q, attn_mask=mask01.astype(bool))


def test_warn_false_turns_the_trap_warnings_off():
    x = ta.tensor([[float("-inf"), float("-inf")]])
    with ta.detect_anomaly(warn=False), no_anomaly_warnings():
        y = x.softmax(-1)
    np.testing.assert_array_equal(y.numpy(), [[0.0, 0.0]])  # a fully masked row: zeros, no NaN


def test_a_normal_training_step_raises_and_warns_nothing():
    ta.manual_seed(0)
    model = ta.nn.TinyTransformer(vocab_size=11, d_model=16, n_heads=2, n_layers=1, max_len=6,
                                  dropout=0.1)
    ids = ta.tensor(np.arange(12).reshape(2, 6) % 11)
    with ta.detect_anomaly(), no_anomaly_warnings():
        logits = model(ids)  # (2, 6, 11)
        loss = F.cross_entropy(logits.reshape(-1, 11), ids.reshape(-1))
        loss.backward()
    assert all(np.isfinite(p.grad.numpy()).all() for p in model.parameters())
    ta.gradcheck_graph(loss)  # detect_anomaly records, as record() does


# ---- scope: global as torch's flag, and the environment switch ----------------------------------


@pytest.mark.parametrize("lib_name", ["tinyattn", "torch"])
def test_the_flag_is_global_a_new_thread_sees_it_as_torchs(lib_name):
    lib = ta if lib_name == "tinyattn" else pytest.importorskip("torch")
    seen = []

    def look():
        seen.append((lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()))

    def in_thread():
        t = threading.Thread(target=look)
        t.start()
        t.join()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (torch warns that anomaly mode is on)
        lib.autograd.set_detect_anomaly(True, check_nan=False)
        try:
            in_thread()
        finally:
            lib.autograd.set_detect_anomaly(False)
        in_thread()
        with lib.autograd.detect_anomaly():
            in_thread()
        in_thread()
    assert seen == [(True, False), (False, True), (True, True), (False, True)]


def test_a_thread_started_inside_the_block_raises_there_too():
    errors = []

    def other():
        try:
            _sqrt_at_zero(ta)
        except ta.AnomalyError as e:
            errors.append(str(e).splitlines()[0])

    with ta.detect_anomaly():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert errors == ["Function 'SqrtBackward0' returned nan values in its 0th output."]


def test_tinyattn_debug_turns_detection_on_everywhere():
    code = (
        "import threading, tinyattn as ta\n"
        "def bad():\n"
        "    x = ta.tensor([0.0, 1.0], requires_grad=True)\n"
        "    try:\n"
        "        (x.sqrt() * 0).sum().backward()\n"
        "        print('no error')\n"
        "    except ta.AnomalyError as e:\n"
        "        print(str(e).splitlines()[0])\n"
        "bad()\n"
        "t = threading.Thread(target=bad); t.start(); t.join()\n"
    )
    env = dict(os.environ, TINYATTN_DEBUG="1")
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, text=True,
                         capture_output=True, timeout=120)
    lines = run.stdout.splitlines()
    assert len(lines) == 2, run.stdout + run.stderr
    assert all(line.startswith("Function 'SqrtBackward0' returned nan") for line in lines)
    env["TINYATTN_DEBUG"] = "0"
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, text=True,
                         capture_output=True, timeout=120)
    assert run.stdout.splitlines() == ["no error", "no error"]
