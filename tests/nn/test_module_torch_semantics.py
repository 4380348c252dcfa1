"""Module semantics a user found different from torch 2.13's, each compared with torch: train()
and state_dict()/load_state_dict() going through each child's own method (so overrides work),
reset_parameters()/reset_running_stats(), to()/type() with torch dtypes and tensors, the tree
methods' signatures (get_buffer, set_submodule, modules(remove_duplicate)), reprs (losses,
Unflatten, MultiheadAttention, ModuleList's grouping), the losses' legacy size_average/reduce
and argument order, a deep-copied Parameter's .grad, and ParameterDict's | and |=."""

import copy
import inspect
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")


def both(build):
    """build(lib) in tinyattn and in torch."""
    return build(nn), build(torch.nn)


# ---- 1. train() and the state dict through each child's own method ---------------------------


def _frozen_bn(lib):
    class FrozenBN(lib.Module):
        """Keeps its BatchNorm in eval whatever train() is asked."""

        def __init__(self):
            super().__init__()
            self.bn = lib.BatchNorm1d(2)
            self.fc = lib.Linear(2, 2)

        def train(self, mode=True):
            super().train(mode)
            self.bn.eval()
            return self

    return lib.Sequential(FrozenBN(), lib.ReLU())


def test_train_calls_each_childs_train_so_an_override_holds_as_in_torch():
    for model in both(_frozen_bn):
        model.train()
        assert model.training and model[0].training and model[0].fc.training
        assert not model[0].bn.training  # the override kept it in eval
        model.eval()
        assert not model[0].fc.training and not model[0].bn.training
        model.train(True)
        assert not model[0].bn.training and model[1].training


def test_eval_goes_through_train():
    calls = []

    class Watch(nn.Module):
        def train(self, mode=True):
            calls.append(mode)
            return super().train(mode)

    m = nn.Sequential(Watch())
    m.eval()
    assert calls == [False]


def test_train_of_a_module_inside_itself_ends():
    outer = nn.Sequential(nn.Linear(2, 2))
    outer[0].back = outer
    outer.eval()
    assert not outer.training and not outer[0].training


def _renaming(lib):
    class Renaming(lib.Module):
        """Saves its weight under 'w' and loads it back from 'w' (torch's hooks for that)."""

        def __init__(self):
            super().__init__()
            self.weight = lib.Parameter(ta.ones(2) if lib is nn else torch.ones(2))

        def _save_to_state_dict(self, destination, prefix, keep_vars):
            destination[prefix + "w"] = self.weight if keep_vars else self.weight.detach()

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing,
                                  unexpected, errors):
            if prefix + "w" in state_dict:
                state_dict[prefix + "weight"] = state_dict.pop(prefix + "w")
            super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing,
                                          unexpected, errors)

    return lib.Sequential(lib.Linear(2, 2), Renaming())


def test_state_dict_and_load_state_dict_go_through_each_modules_hooks_as_in_torch():
    ours, theirs = both(_renaming)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["0.weight", "0.bias", "1.w"]
    state = {k: np.full(tuple(v.shape), 3.0, np.float32) for k, v in theirs.state_dict().items()}
    got = ours.load_state_dict(state)
    want = theirs.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    assert (got.missing_keys, got.unexpected_keys) == (want.missing_keys,
                                                       want.unexpected_keys) == ([], [])
    np.testing.assert_array_equal(ours[1].weight.detach().numpy(), [3.0, 3.0])


def test_state_dict_calls_a_childs_state_dict_override():
    class Extra(nn.Linear):
        def state_dict(self, *, destination=None, prefix="", keep_vars=False):
            out = super().state_dict(destination=destination, prefix=prefix,
                                     keep_vars=keep_vars)
            out[prefix + "note"] = ta.tensor(1.0)
            return out

    m = nn.Sequential(Extra(2, 2))
    assert list(m.state_dict()) == ["0.weight", "0.bias", "0.note"]
    assert list(m.state_dict(prefix="m.")) == ["m.0.weight", "m.0.bias", "m.0.note"]


def test_state_dict_takes_torchs_signature():
    ours = inspect.signature(nn.Module.state_dict)
    assert str(ours) == str(inspect.signature(torch.nn.Module.state_dict))


def test_load_state_dict_stays_all_or_nothing_with_the_per_module_hooks():
    m = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 3))
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    state = {k: np.zeros(v.shape, np.float32) for k, v in before.items()}
    state["1.weight"] = np.zeros((4, 4), np.float32)  # a later module's shape is wrong
    with pytest.raises(ta.CheckpointError, match="nothing was loaded; 1.weight: the checkpoint "
                                                  "has shape"):
        m.load_state_dict(state)
    for k, v in m.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])  # the first was not loaded either
    state.pop("1.weight")
    state["2.weight"] = np.ones(1)
    got = m.load_state_dict(state_dict=state, strict=False, assign=False)
    assert got.missing_keys == ["1.weight"] and got.unexpected_keys == ["2.weight"]
    with pytest.raises(ta.CheckpointError, match="missing keys: 1.weight; unexpected keys: "
                                                  "2.weight"):
        m.load_state_dict(state)


def test_load_state_dict_keyword_is_state_dict_as_torchs():
    ours = inspect.signature(nn.Module.load_state_dict)
    theirs = inspect.signature(torch.nn.Module.load_state_dict)
    assert list(ours.parameters) == list(theirs.parameters)
    m = nn.Linear(2, 2)
    new = {"weight": ta.ones(2, 2), "bias": ta.zeros(2)}
    m.load_state_dict(state_dict=new, assign=True)
    assert m.weight.numpy().tolist() == [[1, 1], [1, 1]] and isinstance(m.weight, nn.Parameter)


# ---- 2. reset_parameters and reset_running_stats ------------------------------------------------


def _resets(module):
    """reset_parameters() on module: the same Parameter objects, each written in place."""
    params = dict(module.named_parameters())
    versions = {k: p._version for k, p in params.items()}
    for p in params.values():
        p.data[...] = 7.0
    module.reset_parameters()
    assert dict(module.named_parameters()) == params  # the same objects
    assert all(p._version > versions[k] for k, p in params.items())
    return {k: p.detach().numpy() for k, p in params.items()}


def test_reset_parameters_refill_in_place_with_torchs_distributions():
    ta.manual_seed(0)
    got = _resets(nn.Linear(400, 300))
    bound = 1 / np.sqrt(400)
    for v in got.values():
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound
        assert abs(v.std() - bound / np.sqrt(3)) < 0.05 * bound
    got = _resets(nn.Embedding(300, 200, padding_idx=2))["weight"]
    assert (got[2] == 0).all() and abs(got.std() - 1) < 0.02 and abs(got.mean()) < 0.02
    for m in (nn.LayerNorm(3), nn.RMSNorm(3), nn.GroupNorm(1, 3), nn.BatchNorm1d(3),
              nn.BatchNorm2d(3)):
        got = _resets(m)
        assert (got["weight"] == 1).all() and ("bias" not in got or (got["bias"] == 0).all())


def test_reset_parameters_works_without_affine_parts():
    for m in (nn.LayerNorm(3, elementwise_affine=False), nn.RMSNorm(3, elementwise_affine=False),
              nn.GroupNorm(1, 3, affine=False), nn.BatchNorm1d(3, affine=False),
              nn.BatchNorm1d(3, track_running_stats=False), nn.Linear(2, 2, bias=False)):
        m.reset_parameters()


def test_reset_parameters_runs_under_no_grad_with_a_graph_around():
    m = nn.Linear(3, 2)
    m(ta.ones(1, 3)).sum().backward()
    m.reset_parameters()  # a leaf that requires grad, written in place: fine under no_grad
    assert m.weight.requires_grad and m.weight.grad is not None


def test_batch_norm_reset_running_stats_as_torchs():
    ours, theirs = both(lambda lib: lib.BatchNorm1d(3))
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    ours(ta.tensor(x))
    theirs(torch.from_numpy(x))
    ours.weight.data[...] = 5.0
    version = ours.running_mean._version
    ours.reset_running_stats()
    theirs.reset_running_stats()
    for k, v in theirs.named_buffers():
        np.testing.assert_array_equal(ours.get_buffer(k).numpy(), v.numpy())
    assert ours.running_mean._version > version
    assert (ours.weight.numpy() == 5).all()  # the affine parameters are left alone


def test_multihead_attention_reset_parameters_as_torchs_initialisation():
    m = nn.MultiheadAttention(8, 2, add_bias_kv=True)
    params = dict(m.named_parameters())
    for p in params.values():
        p.data[...] = 3.0
    m.reset_parameters()
    assert dict(m.named_parameters()) == params
    assert (m.in_proj_bias.numpy() == 0).all() and (m.out_proj.bias.numpy() == 0).all()
    bound = np.sqrt(6 / (8 + 24))
    assert np.abs(m.in_proj_weight.numpy()).max() <= bound
    assert (m.bias_k.numpy() != 3).all()


# ---- 3. to() and type() with torch dtypes and tensors ----------------------------------------


@pytest.mark.parametrize("how", [
    lambda m: m.to(torch.float64), lambda m: m.to(dtype=torch.float64),
    lambda m: m.to(torch.zeros(1, dtype=torch.float64)), lambda m: m.to(ta.zeros(1).double()),
    lambda m: m.to("cpu", torch.float64), lambda m: m.to(torch.device("cpu"), torch.float64),
    lambda m: m.type(torch.float64), lambda m: m.type("torch.DoubleTensor"),
    lambda m: m.double(), lambda m: m.half().double(),
])
def test_to_and_type_take_torch_dtypes_and_tensors(how):
    m = nn.BatchNorm1d(2)
    m.weight.grad = ta.ones(2)
    assert how(m) is m
    assert m.weight.dtype == np.float64 and m.running_mean.dtype == np.float64
    assert m.weight.grad.dtype == np.float64


def test_to_keeps_integer_buffers_and_type_casts_them_as_torch():
    ours, theirs = both(lambda lib: lib.BatchNorm1d(2))
    ours.to(torch.float64)
    theirs.to(torch.float64)
    assert str(ours.num_batches_tracked.dtype) == "int64"
    assert theirs.num_batches_tracked.dtype == torch.int64
    ours.type(torch.float64)
    theirs.type(torch.float64)
    assert str(ours.num_batches_tracked.dtype) == "float64"
    assert theirs.num_batches_tracked.dtype == torch.float64
    ours.half()
    theirs.half()  # (a floating buffer now: cast with the rest)
    assert str(ours.num_batches_tracked.dtype) == "float16"
    assert theirs.num_batches_tracked.dtype == torch.float16


def test_to_an_integer_dtype_is_refused_as_torch():
    with pytest.raises(TypeError, match="float"):
        nn.Linear(2, 2).to(torch.int64)
    with pytest.raises(TypeError):
        torch.nn.Linear(2, 2).to(torch.int64)
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="requires grad"):
        m.type(torch.int64)
    assert m.weight.dtype == np.float32  # nothing changed


# ---- 4. the tree's methods, with torch's signatures --------------------------------------------


@pytest.mark.parametrize("name", ["named_modules", "modules", "named_parameters",
                                  "named_buffers", "get_buffer", "set_submodule",
                                  "load_state_dict", "state_dict", "train", "get_submodule",
                                  "get_parameter", "_save_to_state_dict",
                                  "_load_from_state_dict"])
def test_tree_methods_take_torchs_arguments(name):
    ours = inspect.signature(getattr(nn.Module, name))
    theirs = inspect.signature(getattr(torch.nn.Module, name))
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == \
        [(p.name, p.kind, p.default) for p in theirs.parameters.values()]


def test_modules_remove_duplicate_and_named_modules_memo_as_torch():
    def tied(lib):
        shared = lib.Linear(2, 2)
        return lib.Sequential(shared, shared)

    ours, theirs = both(tied)
    assert len(list(ours.modules(remove_duplicate=False))) == \
        len(list(theirs.modules(remove_duplicate=False))) == 3
    assert len(list(ours.modules())) == len(list(theirs.modules())) == 2
    assert [k for k, _ in ours.named_modules(memo={ours[0]}, prefix="m")] == \
        [k for k, _ in theirs.named_modules(memo={theirs[0]}, prefix="m")] == ["m"]
    assert [k for k, _ in ours.named_buffers(prefix="x", remove_duplicate=False)] == []


def test_get_buffer_as_torch():
    for lib in (nn, torch.nn):
        m = lib.Sequential(lib.BatchNorm1d(2))
        assert m.get_buffer("0.running_mean") is m[0].running_mean
        with pytest.raises(AttributeError, match="not a buffer"):
            m.get_buffer("0.weight")
        with pytest.raises(AttributeError):
            m.get_buffer("0.nothing")
        with pytest.raises(AttributeError):
            m.get_buffer("1.running_mean")


def test_set_submodule_as_torch():
    for lib in (nn, torch.nn):
        m = lib.Sequential(lib.Sequential(lib.Linear(2, 2)))
        new = lib.ReLU()
        m.set_submodule("0.0", new)
        assert m[0][0] is new
        m.set_submodule("0.act", lib.Tanh())  # a new child of an existing parent
        assert type(m[0].act).__name__ == "Tanh"
        with pytest.raises(AttributeError):
            m.set_submodule("0.other", lib.ReLU(), strict=True)
        with pytest.raises(ValueError):
            m.set_submodule("", lib.ReLU())
        with pytest.raises(ValueError):
            m.set_submodule("0.0", "not a module")
        with pytest.raises(AttributeError):
            m.set_submodule("1.x", lib.ReLU())  # no parent
        m[0].plain = 3
        with pytest.raises(AttributeError, match="not an nn.Module"):
            m.set_submodule("0.plain", lib.ReLU())


# ---- 5. reprs -----------------------------------------------------------------------------------


LOSSES = ["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss", "CrossEntropyLoss",
          "BCELoss", "BCEWithLogitsLoss", "KLDivLoss"]


@pytest.mark.parametrize("name", LOSSES)
def test_loss_reprs_as_torchs(name):
    assert repr(getattr(nn, name)()) == repr(getattr(torch.nn, name)())
    assert repr(getattr(nn, name)(reduction="sum")) == \
        repr(getattr(torch.nn, name)(reduction="sum"))


def test_unflatten_and_multihead_attention_reprs_as_torchs():
    for size in ([2, 2], (2, 2)):
        assert repr(nn.Unflatten(1, size)) == repr(torch.nn.Unflatten(1, size))
    assert nn.Unflatten(1, [2, -1])(ta.zeros(3, 4)).shape == (3, 2, 2)
    for kwargs in ({}, {"batch_first": True, "kdim": 3, "vdim": 5, "bias": False}):
        assert repr(nn.MultiheadAttention(4, 2, **kwargs)) == \
            repr(torch.nn.MultiheadAttention(4, 2, **kwargs))
    assert isinstance(nn.MultiheadAttention(4, 2).out_proj, nn.Linear)


def _stack(lib):
    """A TinyTransformer-like stack written with the classes both libraries have."""
    def block():
        return lib.Sequential(lib.LayerNorm(8), lib.Linear(8, 32), lib.GELU(),
                              lib.Linear(32, 8), lib.Dropout(0.1))

    return lib.Sequential(OrderedDict([
        ("wte", lib.Embedding(10, 8)), ("drop", lib.Dropout(0.0)),
        ("blocks", lib.ModuleList([block() for _ in range(3)] + [lib.Identity()])),
        ("heads", lib.ModuleList([lib.Linear(8, 2), lib.Linear(8, 2), lib.ReLU(),
                                  lib.Linear(8, 2)])),
        ("empty", lib.ModuleList()), ("ln_f", lib.LayerNorm(8)),
        ("lm_head", lib.Linear(8, 10, bias=False)), ("loss", lib.CrossEntropyLoss()),
    ]))


def test_printed_stacks_match_torchs():
    ours, theirs = both(_stack)
    assert str(ours) == str(theirs)
    assert "(0-2): 3 x Sequential(" in str(ours)
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=3,
              dim_feedforward=16, batch_first=True)
    assert str(nn.Transformer(**kw)) == str(torch.nn.Transformer(**kw))
    ours, theirs = both(lambda lib: lib.ModuleList([lib.ReLU(), None, None, lib.ReLU()]))
    assert repr(ours) == repr(theirs)


def test_repr_leaves_blank_lines_of_a_child_unindented_as_torch():
    def build(lib):
        class Blank(lib.Module):
            def extra_repr(self):
                return "a\n\nb"

        return lib.Sequential(Blank(), lib.Sequential(Blank()))

    ours, theirs = both(build)
    assert repr(ours) == repr(theirs)


# ---- 6. the losses' legacy arguments and argument order ------------------------------------------


@pytest.mark.parametrize("name", LOSSES)
def test_loss_constructors_take_torchs_arguments_in_torchs_order(name):
    ours = inspect.signature(getattr(nn, name))
    theirs = inspect.signature(getattr(torch.nn, name))
    assert [(p.name, p.default) for p in ours.parameters.values()] == \
        [(p.name, p.default) for p in theirs.parameters.values()]


@pytest.mark.parametrize("size_average, reduce, want", [
    (None, None, "sum"), (True, None, "mean"), (False, None, "sum"), (None, False, "none"),
    (False, False, "none"), (True, True, "mean"), (False, True, "sum"), (None, True, "mean"),
])
@pytest.mark.parametrize("name", [n for n in LOSSES if n != "HuberLoss"])
def test_legacy_size_average_and_reduce_map_to_reduction_as_torch(name, size_average, reduce,
                                                                 want):
    results = []
    for lib in (nn, torch.nn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss = getattr(lib, name)(size_average=size_average, reduce=reduce,
                                      reduction="sum")
        legacy = size_average is not None or reduce is not None
        assert [issubclass(w.category, UserWarning) for w in caught] == [True] * legacy
        results.append(loss.reduction)
    assert results == [want, want]


def test_weighted_losses_take_positional_arguments_in_torchs_order():
    w = ta.ones(3)
    loss = nn.NLLLoss(w, None, 1, None, "sum")
    assert loss.ignore_index == 1 and loss.reduction == "sum" and loss.weight is w
    loss = nn.CrossEntropyLoss(None, None, 2, None, "none", 0.1)
    assert (loss.ignore_index, loss.reduction, loss.label_smoothing) == (2, "none", 0.1)
    assert nn.SmoothL1Loss(None, None, "sum", 0.5).beta == 0.5
    assert nn.KLDivLoss(None, None, "batchmean", True).log_target
    assert nn.HuberLoss("sum", 2.0).delta == 2.0


# ---- 7. a deep-copied Parameter, ParameterDict's | ----------------------------------------------


def test_deepcopy_drops_a_parameters_grad_but_keeps_a_tensors_as_torch():
    for lib, make in ((nn, ta.ones), (torch.nn, torch.ones)):
        p = lib.Parameter(make(2))
        p.grad = make(2)
        t = make(2, requires_grad=True)
        t.grad = make(2)
        new_p, new_t = copy.deepcopy(p), copy.deepcopy(t)
        assert new_p.grad is None and type(new_p) is type(p) and new_p.requires_grad
        assert new_t.grad is not None
        frozen = copy.deepcopy(lib.Parameter(make(2), requires_grad=False))
        assert not frozen.requires_grad
    m = nn.Linear(2, 2)
    m(ta.ones(1, 2)).sum().backward()
    twin = copy.deepcopy(m)
    assert twin.weight.grad is None and twin.weight is not m.weight
    shared = {"a": nn.Parameter(ta.ones(1))}
    pair = copy.deepcopy([shared["a"], shared["a"]])
    assert pair[0] is pair[1]  # the memo holds


def test_parameter_dict_or_and_ior_as_torch():
    for lib, make in ((nn, ta.ones), (torch.nn, torch.ones)):
        a = lib.ParameterDict({"x": lib.Parameter(make(1)), "y": lib.Parameter(make(2))})
        b = lib.ParameterDict({"y": lib.Parameter(make(3)), "z": lib.Parameter(make(4))})
        c = a | b
        assert isinstance(c, lib.ParameterDict) and list(c) == ["x", "y", "z"]
        assert c["y"] is b["y"] and a["y"].shape[0] == 2
        e = OrderedDict([("w", lib.Parameter(make(5))), ("x", lib.Parameter(make(6)))]) | a
        assert type(e) is OrderedDict and list(e) == ["w", "x", "y"] and e["x"] is a["x"]
        f = a.__ror__(b)  # b | a, through a
        assert isinstance(f, lib.ParameterDict) and list(f) == ["y", "z", "x"]
        assert f["y"] is a["y"]
        same = a
        a |= b
        assert a is same and list(a) == ["x", "y", "z"] and a["y"] is b["y"]
