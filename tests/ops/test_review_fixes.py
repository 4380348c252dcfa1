"""Fixes from a review against torch 2.13: F.pad and diff(n=0) give new memory, as torch's
(never the input or a view of it); state_dict's _metadata with each module's _version, handed
to _load_from_state_dict; the functional losses' legacy size_average and reduce; PReLU's
reset_parameters, Tensor(size=), the in-place special functions, lcm's sign on overflow,
Size's ints and load_state_dict's repr. Each compares with torch."""

import inspect
import pickle
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def pair(values, requires_grad=False, dtype=np.float64):
    a = np.asarray(values, dtype=dtype)
    return (ta.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def same_object_and_memory(lib, src, out):
    """(out is src, out shares memory with src) for either library."""
    if lib is torch:
        return out is src, out.data_ptr() == src.data_ptr()
    return out is src, bool(np.shares_memory(src.numpy(), out.numpy()))


# ---- 1. new memory where torch gives it ----------------------------------------------------------

PADS = [((0, 0), "constant"), ((), "constant"), ((-1, 0), "constant"), ((0, -1), "constant"),
        ((-1, -1, 0, 0), "constant"), ((0, 0, -1, 0), "constant"),
        ((0, 0), "reflect"), ((-1, 0), "reflect"), ((0, 0), "replicate"),
        ((-1, 0), "replicate"), ((0, 0), "circular"), ((-1, 0), "circular"),
        ((0, -2), "circular"), ((-1, 1), "constant")]


@pytest.mark.parametrize("amounts, mode", PADS)
def test_pad_with_nothing_to_add_is_new_memory_as_torch(amounts, mode):
    values = np.arange(24.0).reshape(2, 3, 4)
    a, t = pair(values)
    out_a, out_t = F.pad(a, amounts, mode=mode), TF.pad(t, amounts, mode=mode)
    assert same_object_and_memory(ta, a, out_a) == same_object_and_memory(torch, t, out_t)
    assert same_object_and_memory(ta, a, out_a) == (False, False)
    np.testing.assert_array_equal(out_a.numpy(), out_t.numpy())
    out_a.mul_(2)  # (writes its own memory: the input keeps its values)
    np.testing.assert_array_equal(a.numpy(), values)


@pytest.mark.parametrize("amounts", [(-1, 0), (0, 0), ()])
def test_pad_crop_then_in_place_keeps_the_input_and_its_gradient(amounts):
    a, t = pair(np.arange(1.0, 7.0).reshape(2, 3), requires_grad=True)
    grads = []
    for f, x in ((F, a), (TF, t)):
        b = x * 1
        p = f.pad(b, amounts)
        p.mul_(2)
        (p.sum() + (b * b).sum()).backward()
        grads.append(x.grad.numpy())
        np.testing.assert_array_equal(b.detach().numpy(), np.arange(1.0, 7.0).reshape(2, 3))
    np.testing.assert_allclose(grads[0], grads[1])


def test_the_reported_pad_cases():
    b = ta.tensor([1.0, 2.0, 3.0])
    assert F.pad(b, (0, 0)) is not b
    p = F.pad(b, (-1, 0))
    p.mul_(2)
    np.testing.assert_array_equal(b.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(p.numpy(), [4.0, 6.0])


@pytest.mark.parametrize("form", ["function", "method"])
def test_diff_with_n_0_is_a_copy_as_torch(form):
    a, t = pair([1.0, 2.0, 4.0], requires_grad=True)
    prepend_a, prepend_t = ta.tensor([0.0]), torch.tensor([0.0])
    if form == "function":
        out_a, out_t = ta.diff(a, n=0), torch.diff(t, n=0)
        with_a, with_t = ta.diff(a, n=0, prepend=prepend_a), torch.diff(t, n=0, prepend=prepend_t)
    else:
        out_a, out_t = a.diff(n=0), t.diff(n=0)
        with_a, with_t = a.diff(0, prepend=prepend_a), t.diff(0, prepend=prepend_t)
    assert same_object_and_memory(ta, a, out_a) == same_object_and_memory(torch, t, out_t)
    assert out_a is not a
    # torch's n=0 is the input's copy: prepend and append are not joined
    np.testing.assert_array_equal(with_a.detach().numpy(), with_t.detach().numpy())
    (out_a * ta.tensor([1.0, 2.0, 3.0], dtype=ta.float64)).sum().backward()
    (out_t * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("n, error", [(-1, RuntimeError), (1.5, TypeError), (True, TypeError)])
def test_diff_refuses_the_n_torch_refuses(n, error):
    with pytest.raises(error):
        torch.diff(torch.tensor([1.0, 2.0, 4.0]), n=n)
    with pytest.raises((error, ValueError)):
        ta.diff(ta.tensor([1.0, 2.0, 4.0]), n=n)


IDENTITIES = [
    ("dropout p=0", lambda lib, f, x: f.dropout(x, 0.0, True)),
    ("dropout eval", lambda lib, f, x: f.dropout(x, 0.5, False)),
    ("Dropout(0)", lambda lib, f, x: lib.nn.Dropout(0.0)(x)),
    ("normalize", lambda lib, f, x: f.normalize(x)),
    ("contiguous", lambda lib, f, x: x.contiguous()),
    ("to same dtype", lambda lib, f, x: x.to(lib.float64)),
    ("to copy", lambda lib, f, x: x.to(lib.float64, copy=True)),
    ("flatten (2-D)", lambda lib, f, x: x.flatten()),
    ("flatten one dim", lambda lib, f, x: x.flatten(1, 1)),
    ("reshape same", lambda lib, f, x: x.reshape(2, 3)),
    ("atleast_2d", lambda lib, f, x: lib.atleast_2d(x)),
    ("cat of one", lambda lib, f, x: lib.cat([x])),
    ("positive", lambda lib, f, x: x.positive()),
    ("tril all", lambda lib, f, x: x.tril(5)),
    ("roll 0", lambda lib, f, x: x.roll(0, 0)),
    ("repeat 1", lambda lib, f, x: x.repeat(1, 1)),
    ("clone", lambda lib, f, x: x.clone()),
    ("Identity", lambda lib, f, x: lib.nn.Identity()(x)),
    ("Flatten", lambda lib, f, x: lib.nn.Flatten()(x)),
]


@pytest.mark.parametrize("name, make", IDENTITIES, ids=[n for n, _ in IDENTITIES])
def test_identity_like_results_are_the_input_exactly_where_torch_s_are(name, make):
    a, t = pair(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert (same_object_and_memory(ta, a, make(ta, F, a))
            == same_object_and_memory(torch, t, make(torch, TF, t)))


# ---- 2. state_dict's _metadata -------------------------------------------------------------------


def _migrating(lib):
    """A module at version 2 whose version-1 checkpoints called its parameter "gain": its
    _load_from_state_dict renames the key for those (and counts how often it migrated)."""

    class Scaled(lib.nn.Module):
        _version = 2

        def __init__(self):
            super().__init__()
            self.scale = lib.nn.Parameter(lib.ones(2, dtype=lib.float64))
            self.migrated = 0

        def forward(self, x):
            return x * self.scale

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict,
                                  missing_keys, unexpected_keys, error_msgs):
            if local_metadata.get("version", 0) < 2:
                self.migrated += 1
                if prefix + "gain" in state_dict:
                    state_dict[prefix + "scale"] = state_dict.pop(prefix + "gain")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict,
                                          missing_keys, unexpected_keys, error_msgs)

    return lib.nn.Sequential(lib.nn.Linear(2, 2, dtype=lib.float64), Scaled())


def test_state_dict_metadata_records_each_module_version_as_torch():
    ours, theirs = _migrating(ta), _migrating(torch)
    for kwargs in ({}, {"prefix": "p."}):
        got, want = ours.state_dict(**kwargs), theirs.state_dict(**kwargs)
        assert type(got) is type(want)
        assert dict(got._metadata) == dict(want._metadata)
        assert list(got._metadata) == list(want._metadata)
    assert dict(ours.state_dict()._metadata) == {"": {"version": 1}, "0": {"version": 1},
                                                 "1": {"version": 2}}
    assert nn.Module._version == torch.nn.Module._version == 1
    # a destination given without _metadata gets none, as torch's
    got, want = {}, {}
    ours.state_dict(destination=got), theirs.state_dict(destination=want)
    assert not hasattr(got, "_metadata") and not hasattr(want, "_metadata")


def test_a_current_checkpoint_is_not_migrated_again_an_old_one_is():
    ours, theirs = _migrating(ta), _migrating(torch)
    ours.load_state_dict(ours.state_dict()), theirs.load_state_dict(theirs.state_dict())
    assert ours[1].migrated == theirs[1].migrated == 0
    old = {"0.weight": np.eye(2), "0.bias": np.zeros(2), "1.gain": np.array([3.0, 4.0])}
    got = ours.load_state_dict(old)
    want = theirs.load_state_dict({k: torch.tensor(v) for k, v in old.items()})
    assert ours[1].migrated == theirs[1].migrated == 1
    assert tuple(got) == tuple(want) == ([], [])
    np.testing.assert_array_equal(ours[1].scale.detach().numpy(), [3.0, 4.0])
    # _metadata saying version 1: migrated, by either
    for model in (ours, theirs):
        state = model.state_dict()
        state["1.gain"] = state.pop("1.scale")
        state._metadata["1"] = {"version": 1}
        model.load_state_dict(state)
    assert ours[1].migrated == theirs[1].migrated == 2


def test_save_and_load_keep_the_metadata_as_torch_save_does():
    import io

    ours, theirs = _migrating(ta), _migrating(torch)
    buf, their_buf = io.BytesIO(), io.BytesIO()
    ta.save({"model": ours.state_dict(), "step": 3}, buf)
    torch.save({"model": theirs.state_dict(), "step": 3}, their_buf)
    buf.seek(0), their_buf.seek(0)
    got, want = ta.load(buf), torch.load(their_buf)
    assert dict(got["model"]._metadata) == dict(want["model"]._metadata)
    assert type(got["model"]) is type(want["model"])
    ours.load_state_dict(got["model"]), theirs.load_state_dict(want["model"])
    assert ours[1].migrated == theirs[1].migrated == 0
    buf.seek(0)
    assert dict(ta.load(buf, keys=["model"])["model"]._metadata) == dict(
        want["model"]._metadata)
    plain = io.BytesIO()  # (a dict without _metadata comes back a plain dict, as before)
    ta.save({"a": 1}, plain)
    plain.seek(0)
    assert type(ta.load(plain)) is dict


def test_batch_norm_is_version_2_and_fills_num_batches_tracked_only_below_it():
    ours = nn.Sequential(nn.BatchNorm1d(3, dtype=ta.float64))
    theirs = torch.nn.Sequential(torch.nn.BatchNorm1d(3).double())
    assert dict(ours.state_dict()._metadata) == dict(theirs.state_dict()._metadata)
    for version, filled in ((2, False), (1, True)):
        results = []
        for model in (ours, theirs):
            state = model.state_dict()
            del state["0.num_batches_tracked"]
            state._metadata["0"] = {"version": version}
            results.append(tuple(model.load_state_dict(state, strict=False)))
        assert results[0] == results[1]
        assert results[0] == (([], []) if filled else (["0.num_batches_tracked"], []))


def test_load_state_dict_result_repr_as_torch():
    ours, theirs = nn.Linear(2, 2), torch.nn.Linear(2, 2)
    got, want = ours.load_state_dict(ours.state_dict()), theirs.load_state_dict(
        theirs.state_dict())
    assert repr(got) == repr(want) == str(got) == "<All keys matched successfully>"
    got = ours.load_state_dict({"weight": np.zeros((2, 2)), "extra": np.ones(1)}, strict=False)
    want = theirs.load_state_dict({"weight": torch.zeros(2, 2), "extra": torch.ones(1)},
                                  strict=False)
    assert repr(got) == repr(want) == str(want)
    assert got == (["bias"], ["extra"]) and got.missing_keys == ["bias"] and got._fields == \
        want._fields
    missing, unexpected = got
    assert (missing, unexpected) == (["bias"], ["extra"])


# ---- 3. the functional losses' legacy size_average and reduce -----------------------------------

LOSSES = ["mse_loss", "l1_loss", "smooth_l1_loss", "kl_div", "nll_loss", "cross_entropy",
          "binary_cross_entropy", "binary_cross_entropy_with_logits"]


def _loss_args(name, lib):
    rng = np.random.default_rng(3)
    if name in ("nll_loss", "cross_entropy"):
        x = rng.standard_normal((4, 3))
        x = x - np.log(np.exp(x).sum(1, keepdims=True)) if name == "nll_loss" else x
        return lib.tensor(x), lib.tensor(np.array([0, 2, 1, 2]))
    x, t = rng.uniform(0.1, 0.9, (4, 3)), rng.uniform(0, 1, (4, 3))
    if name == "kl_div":
        x = np.log(x)
    return lib.tensor(x), lib.tensor(t)


def test_the_loss_functions_take_torch_s_positional_order():
    for name in LOSSES + ["huber_loss"]:
        ours = [p for p in inspect.signature(getattr(F, name)).parameters][2:]
        theirs = [p for p in inspect.signature(getattr(TF, name)).parameters][2:]
        assert ours == theirs[:len(ours)], name
        assert "size_average" in ours or name == "huber_loss"


@pytest.mark.parametrize("name", LOSSES)
@pytest.mark.parametrize("size_average, reduce", [(None, None), (False, None), (None, False),
                                                  (True, True), (False, True), (True, False)])
def test_the_loss_functions_map_size_average_and_reduce_as_torch(name, size_average, reduce):
    results = []
    for lib, f in ((ta, F), (torch, TF)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = getattr(f, name)(*_loss_args(name, lib), size_average=size_average,
                                   reduce=reduce)
        legacy = [w for w in caught if "size_average and reduce" in str(w.message)]
        results.append((out.detach().numpy(), [(w.category, str(w.message)) for w in legacy]))
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-12)
    assert results[0][1] == results[1][1]
    assert bool(results[0][1]) == (size_average is not None or reduce is not None)


@pytest.mark.parametrize("name", ["mse_loss", "nll_loss", "binary_cross_entropy"])
def test_size_average_and_reduce_by_position_as_torch(name):
    extra = (None,) if name != "mse_loss" else ()  # (weight comes first there)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "nll_loss":
            got = F.nll_loss(*_loss_args(name, ta), None, False, -100, True)
            want = TF.nll_loss(*_loss_args(name, torch), None, False, -100, True)
        else:
            got = getattr(F, name)(*_loss_args(name, ta), *extra, False, True)
            want = getattr(TF, name)(*_loss_args(name, torch), *extra, False, True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)  # ('sum')


def test_a_reduction_string_in_size_average_s_place_is_refused():
    with pytest.raises(TypeError, match="reduction='sum'"):
        F.mse_loss(*_loss_args("mse_loss", ta), "sum")
    with pytest.raises(TypeError):  # (torch has no legacy arguments there either)
        F.huber_loss(*_loss_args("mse_loss", ta), size_average=False)
    with pytest.raises(TypeError):
        TF.huber_loss(*_loss_args("mse_loss", torch), size_average=False)


def test_the_loss_modules_still_map_them():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        loss = nn.MSELoss(size_average=False)
    assert loss.reduction == "sum"
    ce = nn.CrossEntropyLoss(weight=ta.tensor([1.0, 2.0, 3.0], dtype=ta.float64),
                             ignore_index=1, label_smoothing=0.1)
    their = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
                                      ignore_index=1, label_smoothing=0.1)
    np.testing.assert_allclose(ce(*_loss_args("cross_entropy", ta)).numpy(),
                               their(*_loss_args("cross_entropy", torch)).numpy(), rtol=1e-12)


# ---- 4. smaller gaps ----------------------------------------------------------------------------


def test_prelu_reset_parameters_as_torch():
    ours, theirs = nn.PReLU(3, init=0.1), torch.nn.PReLU(3, init=0.1)
    with ta.no_grad():
        ours.weight.mul_(5)
    with torch.no_grad():
        theirs.weight.mul_(5)
    ours.reset_parameters(), theirs.reset_parameters()
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    assert ours.weight.requires_grad and isinstance(ours.weight, nn.Parameter)
    np.testing.assert_allclose(nn.PReLU().weight.numpy(), [0.25])


@pytest.mark.parametrize("size", [(2,), (2, 3), [2], (), [], (np.int64(2),)])
def test_tensor_size_keyword_as_torch(size):
    got, want = ta.Tensor(size=size), torch.Tensor(size=size)
    assert tuple(got.shape) == tuple(want.shape)
    assert str(got.dtype) == str(want.dtype).removeprefix("torch.")
    assert tuple(ta.Tensor(size=ta.Size([2, 1])).shape) == (2, 1)


@pytest.mark.parametrize("args, kwargs", [((), {"size": 2}), ((), {"size": (2.5,)}),
                                          (((2,),), {"size": (2,)}), ((), {"size": (True,)})])
def test_tensor_size_keyword_refusals_as_torch(args, kwargs):
    with pytest.raises(TypeError):
        torch.Tensor(*args, **kwargs)
    with pytest.raises(TypeError):
        ta.Tensor(*args, **kwargs)


IN_PLACE = {"gcd_": ([4, 9, -6], [6, 6, 4], "int64"), "lcm_": ([4, 9, -6], [6, 6, 4], "int64"),
            "heaviside_": ([-1.0, 0.0, 2.0], [0.5], "float64"),
            "erfinv_": ([0.5, -0.2, 0.0], None, "float64"),
            "lgamma_": ([0.5, 3.0, -1.5], None, "float64"),
            "digamma_": ([0.5, 3.0, -1.5], None, "float64"),
            "erfc_": ([0.5, 3.0, -1.5], None, "float64")}


@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_special_functions_as_torch(name):
    assert hasattr(torch.Tensor, name) and hasattr(ta.Tensor, name)
    values, other, dtype = IN_PLACE[name]
    outs = []
    for lib in (ta, torch):
        x = lib.tensor(np.array(values, dtype=dtype))
        args = () if other is None else (lib.tensor(np.array(other, dtype=dtype)),)
        out = getattr(x, name)(*args)
        assert out is x
        outs.append(x.numpy())
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-12)


def test_in_place_special_functions_refuse_a_float_result_in_an_integer_tensor():
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).erfc_()
    with pytest.raises(TypeError):
        ta.tensor([1, 2]).erfc_()


@pytest.mark.parametrize("a, b, dtype", [
    ([2**31 - 1], [6], "int32"), ([-2**31], [3], "int32"), ([-2**31 + 1], [6], "int32"),
    ([0, 0, -4, 5], [0, 3, 6, -7], "int64"), ([2**62 + 1], [6], "int64"), ([100], [3], "int8"),
    ([200], [3], "uint8")])
def test_lcm_wraps_then_takes_abs_as_torch(a, b, dtype):
    got = ta.lcm(ta.tensor(np.array(a, dtype=dtype)), ta.tensor(np.array(b, dtype=dtype)))
    want = torch.lcm(torch.tensor(np.array(a, dtype=dtype)), torch.tensor(np.array(b, dtype=dtype)))
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert got.numpy().dtype == want.numpy().dtype


def test_lcm_with_a_python_int_keeps_the_tensor_dtype():
    got = ta.lcm(ta.tensor(np.array([2**31 - 1], dtype=np.int32)), 6)
    assert got.dtype == np.int32 and got.tolist() == [6]


@pytest.mark.parametrize("values", [[2.5], [np.float64(2.0)], [None], ["2"]])
def test_size_refuses_what_torch_refuses(values):
    with pytest.raises(TypeError):
        torch.Size(values)
    with pytest.raises(TypeError, match="item 0"):
        ta.Size(values)


def test_size_makes_ints_of_what_reads_as_one():
    for values, torch_values in (([np.int64(2), 3], [np.int64(2), 3]),
                                 ([ta.tensor(3)], [torch.tensor(3)]), ([True], [True]),
                                 ([np.array(4)], [np.array(4)])):
        got, want = ta.Size(values), torch.Size(torch_values)
        assert got == tuple(want) and all(type(d) is int for d in got)
    with pytest.raises(TypeError):
        ta.Size([2]) + (2.5,)
    assert ta.zeros(2, 3).shape == ta.Size([2, 3]) and type(ta.zeros(2).shape) is ta.Size
    assert pickle.loads(pickle.dumps(ta.Size([2, 3]))) == (2, 3)
