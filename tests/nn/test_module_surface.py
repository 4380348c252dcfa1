"""What a user sees of the nn modules: every loss module with its defaults and its settings
against torch's (values and state-dict keys), Flatten's (and Tensor.flatten's) and Unflatten's
dims and refusals against torch, the printed module tree, deleting attributes, the Kaiming
initialisers' defaults and errors, slices of Sequential and ModuleList,
load_state_dict(strict=False)'s named pair, get_submodule and get_parameter."""

import math

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import nn
from tinyattn.nn import init

torch = pytest.importorskip("torch")

rng = np.random.default_rng(3)
X = rng.standard_normal((4, 5)) * 2  # differences on both sides of 1 (Huber, smooth L1)
Y = rng.standard_normal((4, 5))
LOGP = X - np.log(np.exp(X).sum(1, keepdims=True))
PROBS = rng.uniform(0.05, 0.95, (4, 5))
BITS = (rng.random((4, 5)) > 0.5).astype(np.float64)
IDS = np.array([0, -100, 4, 2])  # -100: the default ignore_index
W5 = rng.uniform(0.5, 2.0, 5)


def raises(cls, *fragments):
    return pytest.raises(cls, match=".*".join(fragments))


# ---- loss modules ------------------------------------------------------------------------------

LOSSES = [
    ("MSELoss", {}, (X, Y)),
    ("L1Loss", {}, (X, Y)),
    ("L1Loss", {"reduction": "sum"}, (X, Y)),
    ("SmoothL1Loss", {}, (X, Y)),
    ("SmoothL1Loss", {"beta": 0.5, "reduction": "sum"}, (X, Y)),
    ("HuberLoss", {}, (X, Y)),
    ("HuberLoss", {"delta": 0.5, "reduction": "none"}, (X, Y)),
    ("NLLLoss", {}, (LOGP, IDS)),
    ("NLLLoss", {"weight": W5, "ignore_index": 2, "reduction": "sum"},
     (LOGP, np.array([0, 3, 2, 1]))),
    ("CrossEntropyLoss", {}, (X, IDS)),
    ("CrossEntropyLoss", {"weight": W5, "label_smoothing": 0.1, "reduction": "none"}, (X, IDS)),
    ("BCELoss", {}, (PROBS, BITS)),
    ("BCELoss", {"weight": W5, "reduction": "sum"}, (PROBS, BITS)),
    ("BCEWithLogitsLoss", {}, (X, BITS)),
    ("BCEWithLogitsLoss", {"weight": W5, "pos_weight": W5[::-1].copy(), "reduction": "sum"},
     (X, BITS)),
    ("KLDivLoss", {}, (LOGP, PROBS)),
    ("KLDivLoss", {"log_target": True, "reduction": "batchmean"}, (LOGP, LOGP[::-1].copy())),
]


@pytest.mark.filterwarnings("ignore:reduction. 'mean' divides the total loss")
@pytest.mark.parametrize("name,kwargs,args", LOSSES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(LOSSES)])
def test_loss_module_defaults_and_settings_match_torch(name, kwargs, args):
    def wrap(lib, a):
        return ta.tensor(a) if lib is ta else torch.tensor(a)

    ours = getattr(nn, name)(**{k: wrap(ta, v) if isinstance(v, np.ndarray) else v
                                for k, v in kwargs.items()})
    theirs = getattr(torch.nn, name)(**{k: wrap(torch, v) if isinstance(v, np.ndarray) else v
                                        for k, v in kwargs.items()})
    got = ours(*(wrap(ta, a) for a in args))
    want = theirs(*(wrap(torch, a) for a in args))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-14)
    assert list(ours.state_dict()) == list(theirs.state_dict())  # class weights are buffers
    assert ours.reduction == theirs.reduction


# ---- Flatten and Unflatten ---------------------------------------------------------------------


@pytest.mark.parametrize("start,end", [(2, 1), (-1, 0), (1, -3), (-1, -2)])
def test_flatten_refuses_start_dim_after_end_dim_as_torch(start, end):
    x = rng.standard_normal((2, 3, 4))
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        torch.tensor(x).flatten(start, end)
    with raises(ta.DimError, "flatten", f"start_dim {start} cannot come after end_dim {end}",
                r"\(2, 3, 4\)"):
        ta.tensor(x).flatten(start, end)
    with raises(ta.DimError, "flatten", "start_dim", "cannot come after end_dim"):
        nn.Flatten(start, end)(ta.tensor(x))


@pytest.mark.parametrize("start,end", [(0, -1), (1, 1), (-2, -1), (0, 0), (2, -1)])
def test_flatten_joins_the_dims_between_as_torch(start, end):
    x = rng.standard_normal((2, 3, 4))
    assert ta.tensor(x).flatten(start, end).shape == tuple(torch.tensor(x).flatten(start,
                                                                                   end).shape)
    assert nn.Flatten(start, end)(ta.tensor(x)).shape == \
        tuple(torch.nn.Flatten(start, end)(torch.tensor(x)).shape)


def test_flatten_of_a_0d_tensor_as_torch():
    for args in [(), (0,), (-1,), (0, -1), (-1, 0)]:  # its one implicit dim: (1,)
        assert ta.tensor(3.0).flatten(*args).shape == tuple(torch.tensor(3.0).flatten(*args).shape)
    with pytest.raises(IndexError, match="range of \\[-1, 0\\], but got 1"):
        torch.nn.Flatten()(torch.tensor(3.0))  # start_dim=1: no such dim
    with raises(ta.DimError, "flatten", "dim 1", "0 dims", "-1..0"):
        nn.Flatten()(ta.tensor(3.0))
    for args in [(1,), (0, 1), (-2, -1)]:
        with pytest.raises(IndexError):
            torch.tensor(3.0).flatten(*args)
        with pytest.raises(IndexError):
            ta.tensor(3.0).flatten(*args)



@pytest.mark.parametrize("dim,sizes", [(0, (1, 2)), (0, (2, -1)), (1, (3, 1)), (1, (-1, 3)),
                                       (2, (2, 2)), (-3, (2, 1)), (-2, (1, -1)), (-1, (4, 1))])
def test_unflatten_splits_like_torch(dim, sizes):
    x = rng.standard_normal((2, 3, 4))
    got = nn.Unflatten(dim, sizes)(ta.tensor(x))
    want = torch.nn.Unflatten(dim, sizes)(torch.tensor(x))
    assert got.shape == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("dim,sizes,error", [
    (3, (1, 4), ta.DimError), (-4, (1, 2), ta.DimError),
    (2, (-1, -1), ta.ShapeError), (2, (2, 1, -1, -1), ta.ShapeError),
    (2, (0, -1), ta.ShapeError), (2, (3, -1), ta.ShapeError), (2, (2, 3), ta.ShapeError),
    (2, (1, 2), ta.ShapeError),
    (1, (2, 2, -1), ta.ShapeError)])
def test_unflatten_refuses_what_does_not_split(dim, sizes, error):
    with raises(error, "Unflatten", f"dim {dim}", r"\(2, 3, 4\)"):
        nn.Unflatten(dim, sizes)(ta.zeros(2, 3, 4))


# ---- the printed tree and attributes -----------------------------------------------------------


def test_module_repr_prints_the_tree_indented():
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(),
                      nn.Sequential(nn.Linear(4, 2, bias=False), nn.GELU()),
                      nn.Embedding(5, 2, padding_idx=0), nn.Embedding(5, 2))
    assert repr(m) == "\n".join([
        "Sequential(",
        "  (0): Linear(in_features=3, out_features=4, bias=True)",
        "  (1): Tanh()",
        "  (2): Sequential(",
        "    (0): Linear(in_features=4, out_features=2, bias=False)",
        "    (1): GELU(approximate='none')",  # as torch prints it
        "  )",
        "  (3): Embedding(5, 2, padding_idx=0)",
        "  (4): Embedding(5, 2)",
        ")"])
    assert repr(nn.Module()) == "Module()"
    assert [name for name, _ in m.named_children()] == ["0", "1", "2", "3", "4"]
    assert repr(nn.Parameter(ta.ones(2))) == ("Parameter containing:\n"
                                              "tensor([1., 1.], requires_grad=True)")


def test_layer_reprs_are_torchs():
    torch = pytest.importorskip("torch")
    for make in [lambda lib: lib.nn.Linear(3, 2), lambda lib: lib.nn.Linear(3, 2, bias=False),
                 lambda lib: lib.nn.LayerNorm(4), lambda lib: lib.nn.LayerNorm(4, bias=False),
                 lambda lib: lib.nn.LayerNorm((2, 4), elementwise_affine=False),
                 lambda lib: lib.nn.RMSNorm(4), lambda lib: lib.nn.RMSNorm(4, 1e-6, False),
                 lambda lib: lib.nn.Embedding(5, 2, padding_idx=0),
                 lambda lib: lib.nn.Dropout(0.25), lambda lib: lib.nn.BatchNorm1d(3),
                 lambda lib: lib.nn.BatchNorm2d(3, affine=False),
                 lambda lib: lib.nn.BatchNorm1d(3, bias=False), lambda lib: lib.nn.GroupNorm(2, 4),
                 lambda lib: lib.nn.GroupNorm(2, 4, bias=False)]:
        assert repr(make(ta)) == repr(make(torch))
    assert ta.nn.LayerNorm(4, elementwise_affine=False).elementwise_affine is False


def test_transformer_repr_starts_with_its_config():
    model = nn.TinyTransformer(11, d_model=8, n_heads=2, n_layers=1, max_len=6)
    assert repr(model).splitlines()[:2] == ["TinyTransformer(", (  # (torch's layout)
        "  vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=6, "
        "dropout=0.0, rotary=False, norm=layer, tie=True, bias=True, qk_norm=False")]


@pytest.mark.parametrize("approximate", [None, "none", "tanh"])
def test_gelu_and_tanh_modules_match_torch(approximate):
    x = np.random.default_rng(5).standard_normal((3, 4)) * 3  # its own draw: any test order
    kw = {} if approximate is None else {"approximate": approximate}
    # atol: far in the left tail GELU is a difference of nearly equal numbers (x/2 (1 + tanh))
    np.testing.assert_allclose(nn.GELU(**kw)(ta.tensor(x)).numpy(),
                               torch.nn.GELU(**kw)(torch.tensor(x)).numpy(), rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(nn.Tanh()(ta.tensor(x)).numpy(), np.tanh(x), rtol=1e-12)


def test_deleting_attributes_unregisters_them():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
            self.w = nn.Parameter(ta.ones(2))
            self.register_buffer("seen", ta.zeros(1))
            self.register_buffer("scratch", ta.zeros(1), persistent=False)

    net = Net()
    del net.w, net.seen, net.fc
    assert list(net.state_dict()) == []
    assert list(net.parameters()) == [] and list(net.named_children()) == []
    del net.scratch
    net.register_buffer("scratch", ta.ones(1))  # persistent this time
    assert list(net.state_dict()) == ["scratch"]


def test_parameter_list_extend_and_module_dict_from_pairs():
    mine = nn.Parameter(ta.zeros(3))
    plist = nn.ParameterList().extend([ta.ones(2), mine])
    assert [p.shape for p in plist] == [(2,), (3,)]
    assert isinstance(plist[0], nn.Parameter)
    assert plist[1] is mine  # a Parameter is registered as it is, not copied
    mdict = nn.ModuleDict([("a", nn.Tanh()), ("b", nn.Identity())])
    assert list(mdict.keys()) == ["a", "b"]


# ---- Kaiming initialisers ----------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["kaiming_normal_", "kaiming_uniform_"])
@pytest.mark.parametrize("kwargs,gain", [({}, math.sqrt(2)),
                                         ({"a": 0.5}, math.sqrt(2 / 1.25)),
                                         ({"mode": "fan_out", "nonlinearity": "tanh"}, 5 / 3)])
def test_kaiming_defaults_spread_and_mean(fn, kwargs, gain):
    ta.manual_seed(0)
    w = getattr(init, fn)(ta.zeros(200, 300, dtype=np.float64), **kwargs).numpy()
    fan = 200 if kwargs.get("mode") == "fan_out" else 300
    assert w.std() == pytest.approx(gain / math.sqrt(fan), rel=0.02)
    assert abs(w.mean()) < 0.05 * w.std()


@pytest.mark.parametrize("fn", ["kaiming_normal_", "kaiming_uniform_"])
def test_kaiming_errors_name_the_function(fn):
    with raises(ValueError, f"^{fn}: mode", "'fan'"):
        getattr(init, fn)(ta.zeros(2, 2), mode="fan")
    with raises(ta.ShapeError, f"^{fn}", "at least 2 dims", r"\(5,\)"):
        getattr(init, fn)(ta.zeros(5))


@pytest.mark.parametrize("slope", ["0.2", True, None])
def test_leaky_relu_gain_refuses_a_slope_that_is_not_a_number(slope):
    if slope is None:
        assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 1e-4)))
        return
    with raises(ValueError, "calculate_gain", "negative_slope"):
        init.calculate_gain("leaky_relu", slope)


def test_xavier_uniform_default_gain_is_one():
    ta.manual_seed(0)
    w = init.xavier_uniform_(ta.zeros(200, 300, dtype=np.float64)).numpy()
    bound = math.sqrt(6 / 500)
    assert w.max() <= bound and w.max() > 0.99 * bound


# ---- MultiheadAttention's settings -------------------------------------------------------------


@pytest.mark.parametrize("embed_dim,num_heads", [(0, 2), (4, 0), (-4, 2), (6, 4)])
def test_multihead_attention_refuses_bad_sizes(embed_dim, num_heads):
    with raises(ta.ShapeError, "MultiheadAttention", f"embed_dim {embed_dim}",
                f"num_heads {num_heads}"):
        nn.MultiheadAttention(embed_dim, num_heads)


def test_multihead_attention_dtype_and_mask_dtype():
    mha = nn.MultiheadAttention(4, 2, dtype=np.float64)
    assert {p.dtype for p in mha.parameters()} == {np.dtype(np.float64)}
    x = ta.zeros(3, 1, 4, dtype=np.float64)
    with raises(ta.DTypeError, "MultiheadAttention: attn_mask must be bool", "int64"):
        mha(x, x, x, attn_mask=ta.tensor(np.zeros((3, 3), np.int64)))


def _pair_of_stacks():
    """The same three-layer Sequential in tinyattn and torch."""
    return (nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)),
            torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2)))


def test_slices_of_sequential_and_module_list_are_modules_as_in_torch():
    ours, theirs = _pair_of_stacks()
    for index in (slice(1, None), slice(0, 2), slice(None, None, 2), slice(-1, None)):
        part, their_part = ours[index], theirs[index]
        assert type(part) is nn.Sequential  # callable, not a list
        assert list(part.state_dict()) == list(their_part.state_dict())  # names kept
    assert ours[0:2](ta.randn(5, 3)).shape == (5, 4)
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(4)])
    their_layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(4)])
    assert type(layers[::2]) is nn.ModuleList and len(layers[::2]) == 2
    assert [n for n, _ in layers[1::2].named_parameters()] == \
        [n for n, _ in their_layers[1::2].named_parameters()]  # counted from 0 again
    assert layers[::2][1] is layers[2]  # the same modules, not copies


def test_load_state_dict_not_strict_unpacks_into_missing_and_unexpected_as_in_torch():
    ours, theirs = _pair_of_stacks()
    partial = {"0.weight": np.zeros((4, 3)), "extra": np.zeros(1)}
    missing, unexpected = ours.load_state_dict(partial, strict=False)
    their_missing, their_unexpected = theirs.load_state_dict(
        {k: torch.tensor(v) for k, v in partial.items()}, strict=False)
    assert (missing, unexpected) == (their_missing, their_unexpected)
    result = ours.load_state_dict(partial, strict=False)
    assert result.missing_keys == missing and result["unexpected_keys"] == ["extra"]
    assert not ours[0].weight.numpy().any()  # what matched was loaded


def test_get_submodule_and_get_parameter_as_in_torch():
    ours, theirs = _pair_of_stacks()
    assert ours.get_submodule("") is ours and type(ours.get_submodule("2")) is nn.Linear
    assert ours.get_parameter("2.bias") is ours[2].bias
    assert ours.get_parameter("0.weight").shape == tuple(theirs.get_parameter("0.weight").shape)
    model = ta.nn.TinyTransformer(11, 8, 2, 2, max_len=4)
    assert model.get_submodule("blocks.1.attn") is model.blocks[1].attn
    for call, target, message in ((ours.get_submodule, "5", "no submodule '5'"),
                                  (ours.get_submodule, "0.x", "Linear has no submodule 'x'"),
                                  (ours.get_parameter, "0.nope", "no parameter 'nope'"),
                                  (ours.get_parameter, "1.weight", "ReLU has no parameter")):
        with pytest.raises(AttributeError, match=message):
            call(target)
        with pytest.raises(AttributeError):
            getattr(theirs, call.__name__)(target)


# ---- forward's argument names are torch's --------------------------------------------------------


def _forward_names(cls):
    import inspect
    return list(inspect.signature(cls.forward).parameters)


CONTAINERS = {"Module", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"}
BASES = {"RNNBase", "RNNCellBase"}  # (torch's leave forward to their subclasses: Module's)


@pytest.mark.parametrize("name", [n for n in nn.__all__ if isinstance(getattr(nn, n), type)
                                  and issubclass(getattr(nn, n), nn.Module)
                                  and hasattr(torch.nn, n) and n not in CONTAINERS | BASES])
def test_forward_takes_torchs_argument_names(name):
    assert _forward_names(getattr(nn, name)) == _forward_names(getattr(torch.nn, name))


def test_a_module_called_with_its_input_by_keyword_as_in_torch():
    x = ta.tensor(rng.standard_normal((2, 4)))
    for module in (nn.Linear(4, 3, dtype=ta.float64), nn.ReLU(), nn.Softmax(-1), nn.GELU(),
                   nn.LayerNorm(4, dtype=ta.float64), nn.Dropout(0.0), nn.Identity(),
                   nn.Sequential(nn.Tanh(), nn.Flatten()), nn.GroupNorm(2, 4, dtype=ta.float64),
                   nn.BatchNorm1d(4, dtype=ta.float64)):
        np.testing.assert_array_equal(module(input=x).numpy(), module(x).numpy())
    ids = ta.tensor([[1, 2]])
    embedding = nn.Embedding(3, 2)
    assert embedding(input=ids).tolist() == embedding(ids).tolist()
    assert tuple(torch.nn.Linear(4, 3)(input=torch.ones(4)).shape) == (3,)


# ---- repr: extra_repr's lines first, the parameter containers' entries -------------------------


def test_repr_puts_extra_repr_on_its_own_lines_before_the_children_as_torchs():
    def build(lib, extra, child):
        class M(lib.Module):
            def __init__(self):
                super().__init__()
                if child:
                    self.a = lib.ReLU()

            def extra_repr(self):
                return extra

        return repr(lib.Sequential(M()))

    for extra in ("hello=1", "a=1\nb=2", ""):
        for child in (True, False):
            assert build(nn, extra, child) == build(torch.nn, extra, child)


def test_parameter_list_and_dict_reprs_show_their_entries_as_torchs():
    def build(lib, ones):
        float64 = ta.float64 if lib is nn else torch.float64
        return [repr(lib.ParameterList([ones(2, 3)])),
                repr(lib.ParameterList([ones(2, 3), ones(4, dtype=float64), 1.5])),
                repr(lib.ParameterDict({"a": ones(2), "b": "text"})),
                repr(lib.ParameterDict({"a": ones(1)})),
                repr(lib.Sequential(lib.ParameterList([ones(1)]), lib.ParameterList())),
                repr(lib.ParameterList([ones(())]))]

    ours = build(nn, ta.ones)
    theirs = [s.replace("torch.float", "float").replace("torch.FloatTensor", "tinyattn.FloatTensor")
              for s in build(torch.nn, torch.ones)]
    assert ours == theirs
    assert ours[0] == "ParameterList(  (0): Parameter containing: [float32 of size 2x3])"
