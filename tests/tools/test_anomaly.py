"""detect_anomaly: the first op that makes a NaN or an Inf raises, forward or backward, naming
the op, the pass, its input statistics and the line that created it; known traps warn. Also
TINYATTN_DEBUG=1, and that detection stays inside its block and its thread."""

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

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's own divide-by-zero


@contextlib.contextmanager
def no_anomaly_warnings():
    """A block in which an AnomalyWarning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ta.AnomalyWarning)
        yield


# ---- forward ----------------------------------------------------------------------------------


def test_forward_nan_raises_at_the_op_that_made_it():
    x = ta.tensor(np.array([0.0, 1.0, 2.0]), requires_grad=True)
    with ta.detect_anomaly():
        y = x * 2  # op 1: fine
        with pytest.raises(ta.AnomalyError) as info:
            z = y / x  # op 2: 0 / 0
            z.exp()  # never reached
    message = str(info.value)
    assert message.startswith("forward pass: div#2 made a non-finite output: it produced NaN")
    assert "z = y / x  # op 2: 0 / 0" in message and "test_anomaly.py:" in message
    assert "output (3,) float64: min 2, max 2, mean 2; 1 NaN, 0 Inf; first at [0]" in message
    assert "input 1: (3,) float64: min 0, max 2, mean 1; 0 NaN, 0 Inf" in message
    assert isinstance(info.value, FloatingPointError) and isinstance(info.value, ta.TinyattnError)


def test_an_overflow_to_inf_is_an_anomaly_with_a_float16_hint():
    x = ta.tensor(np.array([1.0, 12.0], dtype=np.float16), requires_grad=True)
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        x.exp()
    assert "exp#1 made a non-finite output: it produced Inf from finite inputs" in str(info.value)
    assert "float16 overflows above 65504" in str(info.value)


def test_nan_coming_in_from_the_data_is_reported_at_the_first_op_that_sees_it():
    x = ta.tensor([1.0, float("nan")], requires_grad=True)
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError, match="input 0 already holds NaN"):
        x.sum()


def test_infinities_put_in_on_purpose_are_allowed():
    ta.manual_seed(0)
    scores = ta.randn(2, 4, 4, requires_grad=True)
    causal = F.causal_mask(4)
    additive = ta.tensor(np.where(np.tril(np.ones((4, 4))), 0.0, -np.inf).astype(np.float32))
    with ta.detect_anomaly(), no_anomaly_warnings():
        p1 = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        p2 = (scores + additive).softmax(-1)
        p3 = (scores + additive).log_softmax(-1).exp()
        ((p1 + p2 + p3) * scores).sum().backward()
    assert np.isfinite(scores.grad.numpy()).all()


def test_outside_the_block_nothing_is_checked():
    x = ta.tensor([0.0], requires_grad=True)
    with ta.detect_anomaly():
        pass
    assert np.isnan((x / x).item())


# ---- backward ---------------------------------------------------------------------------------


def test_backward_inf_raises_at_the_vjp_that_made_it():
    x = ta.tensor(np.array([0.0, 1.0, 4.0]), requires_grad=True)
    with ta.detect_anomaly():
        y = x.sqrt()  # fine forward; its VJP g / (2 sqrt x) is inf at 0
        loss = (y * 3).sum()
        with pytest.raises(ta.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert message.startswith("backward pass: sqrt#1: its VJP made a non-finite gradient for "
                              "input 0 from a finite output gradient")
    assert "created at" in message and "y = x.sqrt()" in message
    assert "gradient for input 0: (3,) float64" in message and "1 Inf" in message
    assert "forward input 0: (3,) float64: min 0, max 4" in message
    assert "formula: gx = g / (2 * out)" in message


def test_a_non_finite_gradient_given_to_backward_is_called_that():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with ta.detect_anomaly():
        y = x * 2
        with pytest.raises(ta.AnomalyError, match="already non-finite"):
            y.backward(gradient=ta.tensor([1.0, float("nan")]))


def test_a_sum_of_finite_gradients_that_overflows_names_both_ops():
    x = ta.tensor(np.array([1e-300]), requires_grad=True)
    with ta.detect_anomaly():
        h = x * 1.0  # used twice below
        loss = (h * 1.5e308).sum() + (h * 1.5e308).sum()  # finite; d loss / d h = 3e308
        with pytest.raises(ta.AnomalyError) as info:
            loss.backward()
    message = str(info.value)
    assert "adding up the gradients that reach mul#1" in message
    assert "each was finite, their sum overflowed" in message
    assert "h = x * 1.0" in message


def test_backward_of_a_graph_built_outside_the_block_still_names_the_op():
    x = ta.tensor(np.array([0.0, 1.0]), requires_grad=True)
    loss = x.sqrt().sum()
    with ta.detect_anomaly(), pytest.raises(ta.AnomalyError) as info:
        loss.backward()
    assert "backward pass: sqrt" in str(info.value)
    assert "the forward ran outside detect_anomaly()" in str(info.value)


def test_as_a_decorator():
    @ta.detect_anomaly()
    def step(x):
        return (x.log() * 2).sum()

    assert step.__name__ == "step"
    with pytest.raises(ta.AnomalyError, match="log#1"):
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


# ---- scope: threads and the environment switch ---------------------------------------------------


def test_detection_in_one_thread_leaves_another_alone():
    ready, done = threading.Barrier(2), []

    def other():
        ready.wait()  # while the main thread is inside detect_anomaly
        z = ta.tensor([0.0])
        done.append(np.isnan((z / z).item()))
        ready.wait()

    t = threading.Thread(target=other)
    t.start()
    with ta.detect_anomaly():
        ready.wait()
        ready.wait()
        with pytest.raises(ta.AnomalyError):
            ta.tensor([0.0]) / 0.0 * 0.0
    t.join()
    assert done == [True]


def test_tinyattn_debug_turns_detection_on_everywhere():
    code = (
        "import threading, tinyattn as ta\n"
        "def bad():\n"
        "    try:\n"
        "        ta.tensor([0.0]).log()\n"
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
    assert all(line.startswith("forward pass: log#") for line in lines)
    env["TINYATTN_DEBUG"] = "0"
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", code], env=env, text=True,
                         capture_output=True, timeout=120)
    assert run.stdout.splitlines() == ["no error", "no error"]
