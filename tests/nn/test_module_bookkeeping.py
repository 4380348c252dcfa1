"""How a Module keeps its parts, against torch's rules: what may be assigned over a parameter or a
child, a None slot keeping its place, names that are refused (a '.', empty, or already an
attribute such as 'train'), a module used twice in the state dict and in named_children, and the
containers' list and dict methods (+=, * n, insert's range, None children, ModuleDict.pop/clear,
ParameterDict.clear/setdefault/popitem/copy/fromkeys)."""

from collections import OrderedDict

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn

torch = pytest.importorskip("torch")


def raises(cls, *fragments):
    return pytest.raises(cls, match=".*".join(fragments))


def both(build):
    """build(lib) in tinyattn and in torch."""
    return build(nn), build(torch.nn)


# ---- assigning over a parameter or a child ----------------------------------------------------


def test_a_plain_tensor_over_a_parameter_is_refused_as_in_torch():
    for lib, make in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        m = lib.Linear(2, 3)
        with pytest.raises(TypeError, match="as parameter 'weight'.*Parameter or None"):
            m.weight = make(3, 2)
        assert isinstance(m.weight, lib.Parameter)
    m = nn.Linear(2, 3)
    with raises(TypeError, "Linear", "cannot assign 'Tensor' as parameter 'weight'",
                r"nn.Parameter\(value\)"):
        m.weight = ta.zeros(3, 2)
    with raises(TypeError, "cannot assign 'int' as parameter 'bias'"):
        m.bias = 3
    assert [k for k, _ in m.named_parameters()] == ["weight", "bias"]


def test_a_value_that_is_not_a_module_over_a_child_is_refused_as_in_torch():
    for lib in (nn, torch.nn):
        s = lib.Sequential(lib.Linear(2, 2))
        with pytest.raises(TypeError, match="as child module '0'.*Module or None"):
            setattr(s, "0", 3)
        with pytest.raises(TypeError, match="as child module '0'"):
            setattr(s, "0", ta.zeros(1) if lib is nn else torch.zeros(1))
        assert isinstance(s[0], lib.Linear)


def test_none_over_a_parameter_keeps_its_slot_and_its_place_as_in_torch():
    def build(lib, zeros):
        m = lib.Linear(2, 3)
        m.bias = None
        seen = [list(m._parameters), [k for k, _ in m.named_parameters()], list(m.state_dict())]
        m.bias = lib.Parameter(zeros(3))
        m.weight = None
        seen.append(list(m._parameters))
        m.weight = lib.Parameter(zeros(3, 2))
        seen.append(list(m._parameters))
        seen.append(list(m.state_dict()))
        return seen

    ours, theirs = build(nn, ta.zeros), build(torch.nn, torch.zeros)
    assert ours == theirs
    assert ours[0] == ["weight", "bias"] and ours[1] == ours[2] == ["weight"]
    assert ours[-1] == ["weight", "bias"]  # the original order, not ["bias", "weight"]


def test_none_over_a_child_keeps_its_slot_and_the_walks_skip_it_as_in_torch():
    def build(lib):
        s = lib.Sequential(lib.Linear(2, 2), lib.ReLU())
        s[0] = None  # (ModuleList/Sequential __setitem__)
        setattr(s, "1", None)
        return s

    ours, theirs = both(build)
    assert list(ours._modules.items()) == list(theirs._modules.items()) == [("0", None),
                                                                            ("1", None)]
    assert len(ours) == len(theirs) == 2
    for walk in ("named_children", "named_modules", "named_parameters"):
        assert [k for k, _ in getattr(ours, walk)()] == [k for k, _ in getattr(theirs, walk)()]
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    assert repr(ours) == "Sequential(\n  (0): None\n  (1): None\n)"


# ---- names refused --------------------------------------------------------------------------


@pytest.mark.parametrize("register", ["register_parameter", "register_buffer", "add_module"])
def test_registering_over_an_attribute_of_another_sort_is_refused_as_in_torch(register):
    for lib in (nn, torch.nn):
        m = lib.Module()
        m.foo = 3
        m.register_parameter("p", None)
        m.register_buffer("b", None)
        m.add_module("c", None)
        taken = {"register_parameter": ["foo", "b", "c", "train", "forward", "training"],
                 "register_buffer": ["foo", "p", "c", "eval"],
                 "add_module": ["foo", "p", "b", "train", "state_dict"]}[register]
        for name in taken:
            with pytest.raises(KeyError, match=f"attribute '{name}' already exists"):
                getattr(m, register)(name, None)
        assert m.foo == 3 and callable(m.train)
    m = nn.Module()
    m.foo = 3
    with raises(KeyError, f"{register}: attribute 'foo' already exists", "Module"):
        getattr(m, register)("foo", None)


@pytest.mark.parametrize("register", ["register_parameter", "register_buffer", "add_module"])
def test_registering_again_under_the_same_sort_replaces_as_in_torch(register):
    value = {"register_parameter": lambda lib, zeros: lib.Parameter(zeros(1)),
             "register_buffer": lambda lib, zeros: zeros(1),
             "add_module": lambda lib, zeros: lib.ReLU()}[register]
    for lib, zeros in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        m = lib.Module()
        getattr(m, register)("x", None)
        new = value(lib, zeros)
        getattr(m, register)("x", new)
        assert m.x is new


@pytest.mark.parametrize("name", ["a.b", ""])
def test_a_name_with_a_dot_or_empty_is_refused_everywhere(name):
    for lib in (nn, torch.nn):
        m = lib.Module()
        for register in ("register_parameter", "register_buffer", "add_module"):
            with pytest.raises(KeyError):
                getattr(m, register)(name, None)
        with pytest.raises(KeyError):
            lib.ModuleDict({name: lib.ReLU()})
        with pytest.raises(KeyError):
            lib.Sequential(OrderedDict([(name, lib.ReLU())]))
    with raises(KeyError, "ModuleDict", "without '.'", repr(name)):
        nn.ModuleDict({name: nn.ReLU()})
    with raises(KeyError, "Sequential", "without '.'", repr(name)):
        nn.Sequential(OrderedDict([(name, nn.ReLU())]))


@pytest.mark.parametrize("key", ["train", "eval", "forward", "keys", "training"])
def test_a_module_dict_key_that_would_hide_an_attribute_is_refused_as_in_torch(key):
    for lib in (nn, torch.nn):
        with pytest.raises(KeyError, match=f"attribute '{key}' already exists"):
            lib.ModuleDict({key: lib.ReLU()})
        d = lib.ModuleDict()
        with pytest.raises(KeyError, match=f"attribute '{key}' already exists"):
            d[key] = lib.ReLU()
        if key != "keys":  # (a Sequential has no keys method)
            with pytest.raises(KeyError, match=f"attribute '{key}' already exists"):
                lib.Sequential(OrderedDict([(key, lib.ReLU())]))
        assert callable(d.train) and d.training is True and len(d) == 0
    with raises(KeyError, "ModuleDict", f"attribute '{key}' already exists", "ModuleDict"):
        nn.ModuleDict({key: nn.ReLU()})


def test_a_parameter_dict_key_that_would_hide_a_method_is_refused():
    with raises(KeyError, "ParameterDict", "attribute 'update' already exists"):
        nn.ParameterDict({"update": ta.ones(1)})
    d = nn.ParameterDict({"w": ta.ones(1)})
    d["w"] = ta.zeros(2)  # a key already held is replaced
    assert d["w"].shape == (2,)


# ---- a module used twice ------------------------------------------------------------------------


def _twice(lib):
    shared = lib.Linear(3, 3)
    return lib.Sequential(shared, lib.ReLU(), shared)


def test_a_module_used_twice_is_in_the_state_dict_under_each_path_as_in_torch():
    ours, theirs = both(_twice)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "0.weight", "0.bias", "2.weight", "2.bias"]
    assert ours.state_dict()["2.weight"].shape == (3, 3)
    model = nn.Sequential(ours, nn.Linear(3, 1))
    assert list(model.state_dict()) == ["0.0.weight", "0.0.bias", "0.2.weight", "0.2.bias",
                                        "1.weight", "1.bias"]


def test_torchs_state_dict_of_a_model_using_a_module_twice_loads():
    ours, theirs = both(_twice)
    state = {k: v.numpy() for k, v in theirs.state_dict().items()}
    assert ours.load_state_dict(state) == ([], [])  # strict: every key expected
    np.testing.assert_array_equal(ours[0].weight.numpy(), state["0.weight"])
    assert ours[2] is ours[0]
    missing, unexpected = ours.load_state_dict({"0.weight": state["0.weight"]}, strict=False)
    their_missing, their_unexpected = theirs.load_state_dict(
        {"0.weight": torch.tensor(state["0.weight"])}, strict=False)
    assert (missing, unexpected) == (their_missing, their_unexpected)
    out = ours(ta.tensor(np.ones((1, 3), np.float32))).numpy()
    want = theirs(torch.ones(1, 3)).detach().numpy()
    np.testing.assert_allclose(out, want, rtol=1e-6)


def test_named_children_lists_a_module_used_twice_once_as_in_torch():
    ours, theirs = both(_twice)
    assert [k for k, _ in ours.named_children()] == [k for k, _ in theirs.named_children()] == [
        "0", "1"]
    assert len(list(ours.children())) == len(list(theirs.children())) == 2
    assert [k for k, _ in ours.named_parameters()] == ["0.weight", "0.bias"]  # tied: once
    calls = []
    ours.apply(lambda m: calls.append(type(m).__name__))
    assert calls == ["Linear", "ReLU", "Sequential"]


def test_a_module_inside_itself_is_walked_once_not_forever():
    outer = nn.Sequential(nn.Linear(2, 2))
    outer[0].back = outer  # a cycle: the state dict holds each parameter once
    assert list(outer.state_dict()) == ["0.weight", "0.bias"]


# ---- the containers ----------------------------------------------------------------------------


def test_plus_equals_extends_a_module_list_and_a_parameter_list_in_place_as_in_torch():
    for lib, zeros in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        layers = lib.ModuleList([lib.ReLU()])
        same = layers
        layers += [lib.Tanh(), lib.GELU()]
        assert layers is same and [type(m).__name__ for m in layers] == ["ReLU", "Tanh", "GELU"]
        seq = lib.Sequential(lib.ReLU())
        before = seq
        seq += lib.Sequential(lib.Tanh())
        assert seq is before and len(seq) == 2
        params = lib.ParameterList([zeros(1)])
        kept = params
        params += [zeros(2)]
        assert params is kept and [tuple(p.shape) for p in params] == [(1,), (2,)]
        assert [k for k, _ in params.named_parameters()] == ["0", "1"]


def test_a_sequential_times_n_repeats_the_same_modules_as_in_torch():
    ours, theirs = both(lambda lib: lib.Sequential(lib.Linear(2, 2), lib.ReLU()))
    for make in (lambda s: s * 3, lambda s: 3 * s):
        got, want = make(ours), make(theirs)
        assert type(got) is nn.Sequential and got is not ours
        assert [k for k, _ in got.named_children()] == [k for k, _ in want.named_children()]
        assert list(got._modules) == list(want._modules) == [str(i) for i in range(6)]
        assert got[2] is ours[0] and got[5] is ours[1] and len(ours) == 2
    for s in (ours, theirs):
        with pytest.raises(ValueError, match="0"):
            s * 0
        with pytest.raises(TypeError):
            s * 1.5
    same = ours
    ours *= 2
    assert ours is same and len(ours) == 4 and ours[2] is ours[0]


@pytest.mark.parametrize("index", [3, -4, 10])
def test_insert_out_of_range_is_an_index_error(index):
    for cls in (nn.ModuleList, nn.Sequential):
        layers = cls([nn.ReLU(), nn.Tanh(), nn.GELU()]) if cls is nn.ModuleList else \
            cls(nn.ReLU(), nn.Tanh(), nn.GELU())
        if index == 3:  # the end is in range: appended
            layers.insert(index, nn.Identity())
            assert type(layers[3]) is nn.Identity
            continue
        with raises(IndexError, f"{cls.__name__}.insert", f"index {index}", "3 modules"):
            layers.insert(index, nn.Identity())
        assert len(layers) == 3
    layers = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    layers.insert(-1, nn.GELU())  # before the last, as a list's insert
    assert [type(m).__name__ for m in layers] == ["ReLU", "GELU", "Tanh"]


def test_a_module_list_takes_none_as_torchs():
    ours, theirs = both(lambda lib: lib.ModuleList([lib.ReLU()]).append(None))
    assert list(ours) == [ours[0], None] and len(ours) == len(theirs) == 2
    assert list(ours._modules) == list(theirs._modules) == ["0", "1"]
    assert [k for k, _ in ours.named_modules()] == [k for k, _ in theirs.named_modules()]
    ours.insert(0, None)
    assert list(ours) == [None, ours[1], None] and type(ours[1]) is nn.ReLU
    assert repr(nn.ModuleList([None])) == repr(torch.nn.ModuleList([None]))
    with raises(TypeError, "ModuleList: int is not a Module subclass", "None"):
        ours.append(3)


def test_module_dict_pop_and_clear_as_in_torch():
    def build(lib):
        d = lib.ModuleDict({"a": lib.Linear(2, 2), "b": lib.ReLU()})
        popped = d.pop("a")
        seen = [type(popped).__name__, list(d.keys()), [k for k, _ in d.named_parameters()]]
        with pytest.raises(KeyError):
            d.pop("a")
        d.clear()
        seen += [list(d.keys()), len(d), list(d.state_dict())]
        d["a"] = lib.Tanh()  # the name is free again
        seen.append(list(d.keys()))
        return seen

    ours, theirs = both(build)
    assert ours == theirs == ["Linear", ["b"], [], [], 0, [], ["a"]]
    d = nn.ModuleDict({"a": nn.Linear(2, 2)})
    d.clear()
    assert not hasattr(d, "a") and list(d.parameters()) == []


def test_parameter_dict_clear_setdefault_popitem_copy_fromkeys_as_in_torch():
    def build(lib, ones):
        d = lib.ParameterDict(OrderedDict([("w", ones(2)), ("b", ones(1))]))
        seen = []
        got = d.setdefault("w", ones(5))
        seen.append((tuple(got.shape), got is d["w"]))
        got = d.setdefault("s", ones(3))
        seen.append((tuple(got.shape), isinstance(got, lib.Parameter), list(d.keys())))
        key, value = d.popitem()  # the last one added
        seen.append((key, tuple(value.shape), list(d.keys())))
        copy = d.copy()
        seen.append((type(copy).__name__, list(copy.keys()), copy["w"] is d["w"]))
        d.clear()
        seen.append((list(d.keys()), len(d), list(d.parameters()), list(copy.keys())))
        made = d.fromkeys(["x", "y"], lib.Parameter(ones(2)))
        seen.append((type(made).__name__, list(made.keys()), made["x"] is made["y"]))
        with pytest.raises(KeyError):
            d.popitem()
        return seen

    ours, theirs = build(nn, ta.ones), build(torch.nn, torch.ones)
    assert ours == theirs
    d = nn.ParameterDict({"w": ta.ones(1)})
    d.clear()
    assert not hasattr(d, "w")


# ---- what torch's __setattr__ refuses, and allows before super().__init__() ---------------------


def test_a_module_over_a_parameter_is_refused_as_in_torch():
    for lib in (nn, torch.nn):
        m = lib.Linear(2, 2)
        with pytest.raises(TypeError, match=r"cannot assign '.*Identity' as parameter 'bias' "
                                            r"\(.*Parameter or None expected\)"):
            m.bias = lib.Identity()
        assert isinstance(m.bias, lib.Parameter) and list(m.state_dict()) == ["weight", "bias"]
        assert not list(m.children())


def test_what_may_go_over_a_child_or_a_buffer_follows_torchs_order():
    def build(lib, zeros):
        m = lib.Module()
        m.child = lib.Linear(1, 1)
        m.register_buffer("buf", zeros(1))
        m.register_buffer("kept", zeros(1), persistent=False)
        m.child = lib.Parameter(zeros(2))  # a parameter over a child replaces it
        m.buf = lib.ReLU()  # a module over a buffer replaces it
        seen = [list(m._parameters), list(m._modules), list(m._buffers), list(m.state_dict())]
        with pytest.raises(TypeError, match="as buffer 'kept'.*Tensor or None expected"):
            m.kept = 3
        m.kept = lib.Parameter(zeros(3))  # a parameter over a buffer: a parameter, saved
        m.sub = lib.Tanh()
        with pytest.raises(TypeError, match="as child module 'sub'.*Module or None expected"):
            m.sub = zeros(1)
        seen += [list(m._parameters), list(m._buffers), list(m.state_dict()), type(m.sub)]
        return seen

    ours, theirs = build(nn, ta.zeros), build(torch.nn, torch.zeros)
    assert ours[:-1] == theirs[:-1] and ours[-1] is nn.Tanh


def test_plain_attributes_may_be_set_before_super_init_as_in_torch():
    def build(lib, zeros):
        class M(lib.Module):
            def __init__(self):
                self.hidden = 4  # settings first, as torch code often does
                self.table = zeros(2)  # a plain tensor too: an attribute, not a buffer
                super().__init__()
                self.lin = lib.Linear(self.hidden, 2)

        m = M()
        return [k for k, _ in m.named_parameters()], m.hidden, list(m.state_dict()), \
            m.table.tolist()

    assert build(nn, ta.zeros) == build(torch.nn, torch.zeros)
    for lib, zeros in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        for value, what in ((lib.Parameter(zeros(1)), "parameters"), (lib.ReLU(), "module")):
            class Early(lib.Module):
                def __init__(self, value=value):
                    self.x = value
                    super().__init__()

            with pytest.raises(AttributeError,
                               match=rf"cannot assign {what} before Module.__init__\(\) call"):
                Early()


# ---- editing _parameters, _buffers and _modules directly (pruning, weight norm) -----------------


def lib_no_grad(lib):
    return (ta if lib is nn else torch).no_grad()


def test_editing_the_parameter_dict_directly_takes_effect_as_in_torch():
    def build(lib, zeros, ones):
        m = lib.Linear(2, 1)
        with lib_no_grad(lib):
            m.weight.fill_(1.0)
            m.bias.fill_(0.5)
        m.zero_grad()  # the list of parameters is made (and kept, in tinyattn)
        new = lib.Parameter(zeros(1, 2))
        m._parameters["weight"] = new
        seen = [m.weight is new, m(ones(2)).tolist(), [tuple(p.shape) for p in m.parameters()],
                m.state_dict()["weight"].tolist()]
        # as torch.nn.utils.prune: the parameter moves to weight_orig, weight becomes a plain
        # tensor computed from it
        m._parameters["weight_orig"] = m._parameters.pop("weight")
        m.weight = m.weight_orig + 2
        seen += [[k for k, _ in m.named_parameters()], list(m.state_dict()), m(ones(2)).tolist()]
        del m._parameters["bias"]
        seen += [hasattr(m, "bias"), [k for k, _ in m.named_parameters()], list(m.state_dict())]
        m._parameters.clear()
        seen += [hasattr(m, "weight_orig"), list(m.parameters())]
        return seen

    ours, theirs = build(nn, ta.zeros, ta.ones), build(torch.nn, torch.zeros, torch.ones)
    assert ours == theirs
    assert theirs[:2] == [True, [0.5]]


def test_editing_the_buffer_and_module_dicts_directly_takes_effect_as_in_torch():
    def build(lib, ones):
        bn = lib.BatchNorm1d(2).eval()
        bn._buffers["running_mean"] = ones(2)
        seen = [bn.running_mean.tolist(), bn(ones(1, 2) * 0).tolist()]
        del bn._buffers["num_batches_tracked"]
        seen += [hasattr(bn, "num_batches_tracked"), list(bn.state_dict())]
        seq = lib.Sequential(lib.ReLU(), lib.Tanh())
        seq(ones(1))  # (tinyattn names the tree at a call)
        seq._modules["1"] = lib.Sigmoid()
        seq._modules["2"] = lib.Linear(1, 1)
        seen += [type(seq[1]).__name__, type(seq._modules["2"]).__name__,
                 [k for k, _ in seq.named_parameters()], len(seq)]
        del seq._modules["2"]
        seen += [hasattr(seq, "2"), list(seq.state_dict()), seq(ones(1) * 0).tolist()]
        return seen

    assert build(nn, ta.ones) == build(torch.nn, torch.ones)


def test_a_copied_module_keeps_its_dicts_and_attributes_together():
    import copy
    import pickle

    m = nn.Linear(2, 1)
    for twin in (copy.deepcopy(m), pickle.loads(pickle.dumps(m))):  # its own dicts
        twin._parameters["bias"] = nn.Parameter(ta.zeros(1))
        assert twin.bias is twin._parameters["bias"] and m.bias is not twin.bias
        del twin._parameters["weight"]
        assert not hasattr(twin, "weight") and hasattr(m, "weight")
    for lib, zeros in ((nn, ta.zeros), (torch.nn, torch.zeros)):
        m = lib.Linear(2, 1)
        shallow = copy.copy(m)  # the same dicts, as torch's: a change shows in both
        shallow.bias = lib.Parameter(zeros(1))
        assert m.bias is shallow.bias
        shallow._parameters["weight"] = lib.Parameter(zeros(1, 2))
        assert m.weight is shallow.weight


# ---- ParameterList and ParameterDict hold other values as they are ------------------------------


def test_parameter_containers_keep_values_that_are_not_tensors_as_they_are_as_in_torch():
    def build(lib, ones, zeros):
        d = lib.ParameterDict({"a": ones(1), "b": 1.5, "c": "text", "n": None})
        seen = [[k for k, _ in d.named_parameters()], list(d.keys()), len(d),
                [v for k, v in d.items() if k != "a"], list(d.state_dict()), d["b"],
                isinstance(d["a"], lib.Parameter), list(d._parameters)]
        d["b"] = zeros(2)  # a tensor over a plain value: a parameter now
        with pytest.raises(TypeError, match="as parameter 'a'"):
            d["a"] = 3  # a plain value over a parameter: refused
        seen += [[k for k, _ in d.named_parameters()], d.pop("c"), list(d.keys()), d.get("n", 7)]
        plist = lib.ParameterList([ones(2), 2, "x", None])
        seen += [len(plist), [k for k, _ in plist.named_parameters()], list(plist)[1:],
                 plist[-3], list(plist.state_dict())]
        plist.append(zeros(3))
        seen += [[k for k, _ in plist.named_parameters()], len(plist)]
        return seen

    assert build(nn, ta.ones, ta.zeros) == build(torch.nn, torch.ones, torch.zeros)


# ---- None, slices and pop(slice) ---------------------------------------------------------------


def test_none_containers_slices_and_pop_of_a_slice_as_in_torch():
    def build(lib, ones):
        seen = [len(lib.ModuleList(None)), len(lib.ParameterList(None))]
        plist = lib.ParameterList([ones(2), ones(3), ones(4)])
        part = plist[1:]
        seen.append((type(part).__name__, [tuple(p.shape) for p in part],
                     [k for k, _ in part.named_parameters()], part[0] is plist[1],
                     [tuple(p.shape) for p in plist[::-2]]))
        seq = lib.Sequential(lib.ReLU(), lib.Tanh(), lib.GELU(), lib.Sigmoid())
        got = seq.pop(slice(1, 3))
        seen.append((type(got).__name__, list(got._modules), [type(m).__name__ for m in got],
                     list(seq._modules), [type(m).__name__ for m in seq]))
        layers = lib.ModuleList([lib.ReLU(), lib.Tanh(), lib.GELU()])
        got = layers.pop(slice(0, 2))
        seen.append((type(got).__name__, list(got._modules), list(layers._modules),
                     type(layers.pop(0)).__name__, len(layers)))
        return seen

    assert build(nn, ta.ones) == build(torch.nn, torch.ones)
