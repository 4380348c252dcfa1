"""Switches of Tensor methods torch takes only as bools (keepdim of the reductions, sort's and
argsort's descending and stable, topk's largest and sorted, unique's sorted, var's unbiased):
"no", None or 1 is refused naming the method, where its truth was taken ("no" kept the dim).
And a dtype that holds no numbers (bytes, strings, objects, dates) is refused wherever a dtype
is given: x.to(dtype="a") made a tensor of bytes."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError

X = np.arange(6, dtype=np.float32).reshape(2, 3)

# (the method, what the message names, the call with the switch b)
SWITCHES = [
    ("sum", "keepdim", lambda x, b: x.sum(1, keepdim=b)),
    ("sum", "keepdim", lambda x, b: x.sum(1, keepdim=b, dtype=x.dtype)),
    ("mean", "keepdim", lambda x, b: x.mean(1, keepdim=b)),
    ("max", "keepdim", lambda x, b: x.max(1, keepdim=b)),
    ("min", "keepdim", lambda x, b: x.min(1, keepdim=b)),
    ("amax", "keepdim", lambda x, b: x.amax(1, keepdim=b)),
    ("amin", "keepdim", lambda x, b: x.amin(1, keepdim=b)),
    ("var", "keepdim", lambda x, b: x.var(1, keepdim=b)),
    ("var", "keepdim", lambda x, b: x.std(1, keepdim=b)),
    ("logsumexp", "keepdim", lambda x, b: x.logsumexp(1, keepdim=b)),
    ("argmax", "keepdim", lambda x, b: x.argmax(1, keepdim=b)),
    ("argmin", "keepdim", lambda x, b: x.argmin(keepdim=b)),
    ("any", "keepdim", lambda x, b: x.any(1, keepdim=b)),
    ("all", "keepdim", lambda x, b: x.all(1, keepdim=b)),
    ("norm", "keepdim", lambda x, b: x.norm(dim=1, keepdim=b)),
    ("median", "keepdim", lambda x, b: x.median(1, keepdim=b)),
    ("sort", "descending", lambda x, b: x.sort(descending=b)),
    ("sort", "stable", lambda x, b: x.sort(stable=b)),
    ("argsort", "descending", lambda x, b: x.argsort(descending=b)),
    ("topk", "largest", lambda x, b: x.topk(1, largest=b)),
    ("topk", "sorted", lambda x, b: x.topk(1, sorted=b)),
    ("unique", "sorted", lambda x, b: x.unique(sorted=b)),
    ("var", "unbiased", lambda x, b: x.var(1, b)),
    ("std", "unbiased", lambda x, b: x.std(1, unbiased=b)),
]


@pytest.mark.parametrize("bad", ["no", 1, 0.0, [True]], ids=repr)
@pytest.mark.parametrize(("name", "what", "call"), SWITCHES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(SWITCHES)])
def test_a_switch_must_be_a_bool(name, what, call, bad):
    with pytest.raises(TypeError, match=f"^{name}: {what} must be a bool"):
        call(ta.tensor(X), bad)
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError):
        call(torch.tensor(X), bad)


@pytest.mark.parametrize(("name", "what", "call"), SWITCHES,
                         ids=[f"{c[0]}-{c[1]}-{i}" for i, c in enumerate(SWITCHES)])
def test_bools_give_torchs_values(name, what, call):
    torch = pytest.importorskip("torch")
    for flag in (False, True):
        got, want = call(ta.tensor(X), flag), call(torch.tensor(X), flag)
        got = got[0] if isinstance(got, tuple) else got
        want = want[0] if isinstance(want, tuple) else want
        np.testing.assert_allclose(np.asarray(got.numpy(), np.float64),
                                   np.asarray(want.numpy(), np.float64), rtol=1e-6)
    call(ta.tensor(X), np.bool_(True))  # (NumPy's bool counts as one)


NOT_NUMBERS = ["S", "U", "O", "datetime64", "timedelta64", np.str_, object]


@pytest.mark.parametrize("dtype", NOT_NUMBERS, ids=str)
@pytest.mark.parametrize("make", [
    lambda d: ta.ones(2).to(dtype=d), lambda d: ta.ones(2).to(d), lambda d: ta.ones(2, dtype=d),
    lambda d: ta.tensor([1.0], dtype=d), lambda d: ta.ones(2).new_zeros(2, dtype=d),
    lambda d: ta.zeros(2).sum(dtype=d),
], ids=["to(dtype=)", "to()", "ones", "tensor", "new_zeros", "sum(dtype=)"])
def test_a_dtype_of_no_numbers_is_refused(make, dtype):
    with pytest.raises(DTypeError, match="is not supported: tinyattn holds bools, integers"):
        make(dtype)


def test_data_of_no_numbers_is_refused_naming_tensor():
    for data in (np.array(["a"]), ["a", "b"], np.array([1, None], dtype=object),
                 np.array(["2026-11-29"], dtype="datetime64[D]")):
        with pytest.raises(DTypeError, match="^tensor: cannot hold data of dtype"):
            ta.tensor(data)
