"""A NumPy number given as a setting (np.float64(0.2), np.finfo(float).eps, a value taken from
np.logspace) is the Python number it stands for, as in torch: weak in type promotion, so a
float32 input stays float32 and the values are those the Python number gives. (NumPy 2 would
compute with an np.float64 setting in float64.)"""

import numpy as np
import pytest
import tinyattn.nn.functional as F

import tinyattn as ta

torch = pytest.importorskip("torch")
TF = torch.nn.functional

EPS = np.finfo(float).eps  # an np.float64
P = np.float64(0.2)

# (name, fn(lib, F, nn, x) with x in (0, 1)): each op with its number settings as NumPy numbers
CASES = {
    "clamp": lambda lib, f, nn, x: x.clamp(EPS, 1 - EPS),
    "clamp (NumPy float32)": lambda lib, f, nn, x: x.clamp(np.float32(0.3), np.float32(0.6)),
    "clamp_min": lambda lib, f, nn, x: x.clamp_min(P),
    "clamp_max": lambda lib, f, nn, x: x.clamp_max(P),
    "clip": lambda lib, f, nn, x: lib.clip(x, P, 1 - P),
    "lib.clamp_min": lambda lib, f, nn, x: lib.clamp_min(x, P),
    "clamp_": lambda lib, f, nn, x: x.clone().clamp_(P, np.float64(0.7)),
    "logit": lambda lib, f, nn, x: lib.logit(x, P),
    "Tensor.logit": lambda lib, f, nn, x: x.logit(np.float64(1e-3)),
    "leaky_relu": lambda lib, f, nn, x: f.leaky_relu(x - 0.5, P),
    "leaky_relu_": lambda lib, f, nn, x: f.leaky_relu_(x - 0.5, P),
    "hardtanh": lambda lib, f, nn, x: f.hardtanh(x, -P, P),
    "celu": lambda lib, f, nn, x: f.celu(x - 0.5, np.float64(1.5)),
    "elu": lambda lib, f, nn, x: f.elu(x - 0.5, np.float64(1.5)),
    "rrelu (eval)": lambda lib, f, nn, x: f.rrelu(x - 0.5, np.float64(0.1), np.float64(0.3)),
    "softplus": lambda lib, f, nn, x: f.softplus(x * 9, np.float64(2.0), np.float64(10.0)),
    "threshold": lambda lib, f, nn, x: f.threshold(x, P, np.float64(0.5)),
    "softshrink": lambda lib, f, nn, x: f.softshrink(x, P),
    "hardshrink": lambda lib, f, nn, x: f.hardshrink(x, P),
    "normalize": lambda lib, f, nn, x: f.normalize(x, eps=EPS),
    "normalize p": lambda lib, f, nn, x: f.normalize(x, p=np.float64(3.0)),
    "cosine_similarity": lambda lib, f, nn, x: f.cosine_similarity(x, x + 1, eps=EPS),
    "pairwise_distance": lambda lib, f, nn, x: f.pairwise_distance(x, x + 1, eps=EPS),
    "nn.LeakyReLU": lambda lib, f, nn, x: nn.LeakyReLU(P)(x - 0.5),
    "nn.Hardtanh": lambda lib, f, nn, x: nn.Hardtanh(-P, P)(x),
    "nn.CELU": lambda lib, f, nn, x: nn.CELU(np.float64(1.5))(x - 0.5),
    "nn.Softplus": lambda lib, f, nn, x: nn.Softplus(np.float64(2.0))(x),
    "nn.CosineSimilarity": lambda lib, f, nn, x: nn.CosineSimilarity(eps=EPS)(x, x + 1),
    "nn.LayerNorm": lambda lib, f, nn, x: nn.LayerNorm(3, eps=np.float64(1e-5))(x),
    "lerp": lambda lib, f, nn, x: lib.lerp(x, x + 1, P),
    "addcmul": lambda lib, f, nn, x: lib.addcmul(x, x, x, value=P),
    "masked_fill": lambda lib, f, nn, x: x.masked_fill(x > 0.5, P),
    "full_like": lambda lib, f, nn, x: lib.full_like(x, P),
    "full (a float64 fill)": lambda lib, f, nn, x: lib.full((2,), P),
    "pow": lambda lib, f, nn, x: x.pow(np.float64(1.5)),
    "mul": lambda lib, f, nn, x: x * np.float64(2.0),
    "radd": lambda lib, f, nn, x: np.float64(0.1) + x,
    "add alpha": lambda lib, f, nn, x: lib.add(x, x, alpha=P),
    "where": lambda lib, f, nn, x: lib.where(x > 0.5, x, P),
    "integer clamp": lambda lib, f, nn, x: (x * 10).long().clamp(np.float64(2.5)),
    "integer clamp_max": lambda lib, f, nn, x: (x * 10).long().clamp_max(np.float64(2.5)),
    "integer * NumPy float": lambda lib, f, nn, x: (x * 10).long() * np.float64(0.5),
}


def _libs():
    return (ta, F, ta.nn), (torch, TF, torch.nn)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_numpy_numbers_are_python_numbers_as_in_torch(name, dtype):
    values = np.random.default_rng(0).uniform(0.05, 0.95, (4, 3)).astype(dtype)
    (lib, f, nn), (tlib, tf, tnn) = _libs()
    ta.manual_seed(0)
    got = CASES[name](lib, f, nn, ta.tensor(values))
    want = CASES[name](tlib, tf, tnn, torch.tensor(values))
    assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
    ta.testing.assert_close(got.detach(), ta.tensor(want.detach().numpy()), equal_nan=True)


@pytest.mark.parametrize("name", ["leaky_relu", "hardtanh", "celu", "softplus", "clamp",
                                  "normalize", "logit", "threshold", "softshrink"])
def test_gradients_keep_the_input_dtype(name):
    x = ta.tensor(np.random.default_rng(1).uniform(0.05, 0.95, (4, 3)).astype("float32"),
                  requires_grad=True)
    out = CASES[name](ta, F, ta.nn, x)
    out.sum().backward()
    assert out.dtype == x.grad.dtype == np.float32


def test_numpy_numbers_give_the_python_numbers_values_bit_for_bit():
    x = ta.tensor(np.random.default_rng(2).uniform(-3, 3, (5, 4)).astype("float32"))
    pairs = [
        (lambda v: F.softplus(x, v, 10.0), 2.0), (lambda v: F.celu(x, v), 1.5),
        (lambda v: F.elu(x, v), 1.5), (lambda v: x.clamp(-v, v), 0.7),
        (lambda v: F.normalize(x, eps=v), 1e-3), (lambda v: F.leaky_relu(x, v), 0.2),
    ]
    for fn, v in pairs:
        np.testing.assert_array_equal(fn(np.float64(v)).numpy(), fn(v).numpy())


def test_attention_weights_scale_from_numpy():
    q = ta.randn(2, 3, 4)
    assert F.attention_weights(q, q, scale=np.float64(0.5)).dtype == np.float32
    assert F.scaled_dot_product_attention(q, q, q, scale=np.float64(0.5)).dtype == np.float32


@pytest.mark.parametrize("name, settings", [
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("Adam", dict(lr=0.1, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.01)),
    ("AdamW", dict(lr=0.1, betas=(0.8, 0.9), eps=1e-6, weight_decay=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, momentum=0.5)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1)),
])
def test_optimizer_settings_from_numpy_keep_the_parameters_dtype(name, settings):
    def run(lib, conv):
        values = np.random.default_rng(3).standard_normal((3, 2)).astype("float32")
        p = lib.tensor(values, requires_grad=True)
        given = {k: v if isinstance(v, bool) else tuple(map(conv, v)) if isinstance(v, tuple)
                 else conv(v) for k, v in settings.items()}
        opt = getattr(lib.optim, name)([p], **given)
        for _ in range(3):
            opt.zero_grad()
            (p * p * p).sum().backward()
            opt.step()
        return p, opt.state[p]

    p, state = run(ta, np.float64)
    p_plain, _ = run(ta, float)
    tp, tstate = run(torch, np.float64)
    assert {k: str(v.dtype) for k, v in state.items()} == \
        {k: str(v.dtype).removeprefix("torch.") for k, v in tstate.items()}
    assert p.dtype == np.float32
    np.testing.assert_array_equal(p.detach().numpy(), p_plain.detach().numpy())
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
