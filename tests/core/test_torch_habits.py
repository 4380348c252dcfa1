"""PyTorch habits that used to run and do something else: each written as a user writes it and
compared with torch (values, dtypes and gradients).

max/min/sort/topk with a dim return (values, indices); PyTorch's rule for where advanced-index dims
go; 0-d softmax, log_softmax and squeeze; var/std with no degrees of freedom; dim=() reduces every
dim; the gradient of a power at base 0; label smoothing on huge logits; float16 attention on
large scores.
"""

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

torch = pytest.importorskip("torch")


def both(values, dtype=np.float64):
    """The same leaf in tinyattn and torch."""
    values = np.asarray(values, dtype=dtype)
    return (ta.tensor(values.copy(), requires_grad=True),
            torch.tensor(values.copy(), requires_grad=True))


def assert_same(a, t, rtol=1e-12):
    assert a.shape == tuple(t.shape), (a.shape, tuple(t.shape))
    assert str(a.dtype) == str(t.dtype).replace("torch.", ""), (a.dtype, t.dtype)
    np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=rtol, equal_nan=True)


# ---- (values, indices) ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(1, False), (0, True), (-1, True)])
def test_max_min_with_a_dim_unpack_into_values_and_indices(name, dim, keepdim):
    values = np.random.default_rng(0).standard_normal((3, 4))
    x, tx = both(values)
    m, i = getattr(x, name)(dim=dim, keepdim=keepdim)
    tm, ti = getattr(tx, name)(dim=dim, keepdim=keepdim)
    assert_same(m, tm)
    assert_same(i, ti)
    result = getattr(x, name)(dim, keepdim)
    assert result.values is not None and result.indices.dtype == np.int64
    assert repr(result).startswith(f"{name}(values=tensor(")
    g = np.random.default_rng(1).standard_normal(m.shape)
    m.backward(g)
    tm.backward(torch.from_numpy(g))
    assert_same(x.grad, tx.grad)
    assert_same(getattr(x, name)(), getattr(tx, name)())  # no dim: the value itself


def test_max_with_a_tensor_is_the_elementwise_maximum():
    x, tx = both([1.0, 5.0, 3.0])
    y, ty = both([2.0, 2.0, 2.0])
    assert_same(x.max(y), torch.max(tx, ty))
    assert_same(x.min(y), torch.min(tx, ty))


@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort_match_torch_with_ties_and_nan(descending):
    values = np.array([[3.0, 1.0, 3.0, np.nan, -2.0, 1.0], [0.5, 0.5, 0.5, 2.0, -1.0, 7.0]])
    x, tx = both(values)
    v, i = x.sort(dim=1, descending=descending)
    tv, ti = tx.sort(dim=1, descending=descending, stable=True)
    assert_same(v, tv)
    assert_same(i, ti)
    assert_same(x.argsort(1, descending), torch.argsort(tx, dim=1, descending=descending,
                                                         stable=True))
    g = np.arange(12.0).reshape(2, 6)
    finite = np.isfinite(v.numpy())
    (v.where(ta.tensor(finite), 0.0) * ta.tensor(g)).sum().backward()
    (tv.where(torch.from_numpy(finite), 0.0) * torch.from_numpy(g)).sum().backward()
    assert_same(x.grad, tx.grad)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch(largest):
    values = np.random.default_rng(2).standard_normal((3, 7))
    x, tx = both(values)
    v, i = x.topk(3, dim=-1, largest=largest)
    tv, ti = tx.topk(3, dim=-1, largest=largest)
    assert_same(v, tv)
    assert_same(i, ti)
    (v * v).sum().backward()
    (tv * tv).sum().backward()
    assert_same(x.grad, tx.grad)
    with pytest.raises(ta.DimError, match="topk: k must be an int in 0..7"):
        x.topk(8)


# ---- indexing ------------------------------------------------------------------------------------


INDEXES = [
    lambda x: x[0, :, [1, 2]],  # torch: (4, 2); NumPy would say (2, 4)
    lambda x: x[:, 1, [0, 3, 3]],
    lambda x: x[[0, 2], :, 1],
    lambda x: x[1, [0, 2], [1, 4]],
    lambda x: x[..., 0, [1, 2]],
    lambda x: x[None, 0, :, [4, 0]],
    lambda x: x[[0, 1], 2],
]


@pytest.mark.parametrize("index", range(len(INDEXES)))
def test_integers_and_arrays_index_as_in_torch(index):
    values = np.random.default_rng(3).standard_normal((3, 4, 5))
    x, tx = both(values)
    got, want = INDEXES[index](x), INDEXES[index](tx)
    assert_same(got, want)
    g = np.random.default_rng(4).standard_normal(got.shape)
    got.backward(g)
    want.backward(torch.from_numpy(g))
    assert_same(x.grad, tx.grad)


def test_assigning_with_integers_and_arrays_as_in_torch():
    x, tx = ta.zeros(3, 4, 5), torch.zeros(3, 4, 5)
    v = np.arange(8.0).reshape(4, 2)
    x[0, :, [1, 2]] = ta.tensor(v)
    tx[0, :, [1, 2]] = torch.from_numpy(v).float()
    assert_same(x, tx)


# ---- 0-d tensors ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, -1])
def test_softmax_log_softmax_squeeze_of_a_0d_tensor(dim):
    x, tx = both(2.0)
    for fn in (lambda a: a.softmax(dim), lambda a: a.log_softmax(dim), lambda a: a.squeeze(dim),
               lambda a: a.softmax(dim) * 3.0 + a.squeeze(dim)):
        got, want = fn(x), fn(tx)
        assert_same(got, want)
        x.grad, tx.grad = None, None
        got.backward()
        want.backward()
        assert_same(x.grad, tx.grad)
    values, index = x.max(dim)
    assert values.item() == 2.0 and index.item() == 0 and x.argmax(dim).item() == 0


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_methods_need_one_int_dim_as_torch(name):
    """torch's Tensor.softmax(dim, dtype=None) has no default dim and takes one int (or an
    int-like: a NumPy int, a 0-d integer tensor): x.softmax() ran over the last dim, and a
    tuple (1,) was taken; no dim, None, a float, a bool or a tuple are TypeErrors."""
    values = np.arange(6.0).reshape(2, 3)
    x, tx = ta.tensor(values), torch.tensor(values)
    for args in ((), (None,), (1.0,), (True,), ((1,),)):
        with pytest.raises(TypeError):
            getattr(tx, name)(*args)
        with pytest.raises(TypeError, match=rf"^{name}: .*dim"):
            getattr(x, name)(*args)
    with pytest.raises(TypeError, match=rf"^{name}: .*dim"):
        getattr(x, name)(dim=None)
    for dim, tdim in ((0, 0), (-1, -1), (np.int64(1), np.int64(1)),
                      (ta.tensor(0), torch.tensor(0))):
        assert_same(getattr(x, name)(dim), getattr(tx, name)(tdim))
    assert_same(getattr(x, name)(1, ta.float32), getattr(tx, name)(1, torch.float32), 1e-6)
    assert_same(getattr(x, name)(axis=0), getattr(tx, name)(0))  # (NumPy's keyword, kept)


# ---- degenerate variance, powers at 0 ------------------------------------------------------------


@pytest.mark.parametrize("name", ["sum", "mean", "amax", "amin", "var", "std", "norm"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [(), []])
def test_an_empty_dim_reduces_every_dim_as_in_torch(name, keepdim, dim):
    """x.sum(dim=()) is the sum of everything in torch, not x itself; the gradient is that of
    dim=None (torch's own var/std backward gives inf for dim=())."""
    x, tx = both(np.random.default_rng(1).standard_normal((2, 3)))
    kwargs = {"p": 2} if name == "norm" else {}
    got = getattr(x, name)(dim=dim, keepdim=keepdim, **kwargs)
    assert_same(got, getattr(tx, name)(dim=dim, keepdim=keepdim, **kwargs))
    got.sum().backward()
    getattr(tx, name)(dim=None, keepdim=keepdim, **kwargs).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("name", ["all", "any"])
def test_all_any_with_an_empty_dim_reduce_nothing_as_in_torch(name):
    values = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, -1.0]])
    for keepdim in (False, True):
        got = getattr(ta.tensor(values), name)(dim=(), keepdim=keepdim)
        assert_same(got, getattr(torch.tensor(values), name)(dim=(), keepdim=keepdim))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), ()])
def test_argmax_argmin_without_a_dim_keep_dims_as_in_torch(name, shape):
    values = np.random.default_rng(2).standard_normal(shape)
    for keepdim in (False, True):
        got = getattr(ta.tensor(values), name)(dim=None, keepdim=keepdim)
        want = getattr(torch.tensor(values), name)(dim=None, keepdim=keepdim)
        assert got.shape == tuple(want.shape) and got.dtype == np.int64
        np.testing.assert_array_equal(got.numpy(), want.numpy())


@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sum_and_mean_take_a_dtype_as_in_torch(name):
    mask = np.array([[True, False, True], [True, True, False]])
    got = getattr(ta.tensor(mask), name)(dim=1, dtype=ta.float64)
    assert_same(got, getattr(torch.tensor(mask), name)(dim=1, dtype=torch.float64))
    x, tx = both(np.random.default_rng(3).standard_normal((2, 3)), np.float32)
    got, want = getattr(x, name)(dtype=ta.float64), getattr(tx, name)(dtype=torch.float64)
    assert_same(got, want, rtol=1e-6)
    got.backward()
    want.backward()
    assert x.grad.dtype == np.float32  # the gradient comes back through the cast
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


@pytest.mark.parametrize("x,y", [(1, 0.5), (1, 2), (True, False), (1, True), (2.5, 1.5),
                                 (np.float64(1.0), 2)])
def test_where_with_two_numbers_takes_torchs_dtype(x, y):
    """1 and 0.5 give the default float dtype (float32), not NumPy's float64."""
    got = ta.where(ta.tensor([True, False]), x, y)
    want = torch.where(torch.tensor([True, False]), x, y)
    assert str(got.dtype) == str(want.dtype).replace("torch.", "")
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_dot_of_two_vectors_as_in_torch():
    a, ta_ = both([1.0, 2.0, 3.0])
    b, tb = both([4.0, -1.0, 0.5])
    got, want = a.dot(b), ta_.dot(tb)
    assert_same(got, want)
    assert_same(ta.dot(a, b), torch.dot(ta_, tb))
    got.backward()
    want.backward()
    np.testing.assert_allclose(a.grad.numpy(), ta_.grad.numpy())
    for bad in (ta.ones(2, 3), ta.ones(4)):
        with pytest.raises(ta.ShapeError, match="dot: needs two 1-D tensors of the same length"):
            bad.dot(a) if bad.ndim == 2 else a.dot(bad)


def test_autograd_grad_returns_gradients_without_touching_grad_as_in_torch():
    x, tx = both([1.0, 2.0, -0.5])
    y, ty = x * x * 3, tx * tx * 3
    (gx,) = ta.autograd.grad(y.sum(), x, retain_graph=True)
    (tgx,) = torch.autograd.grad(ty.sum(), tx, retain_graph=True)
    assert_same(gx, tgx)
    assert x.grad is None  # returned, not added into .grad
    # several outputs with their cotangents, an intermediate input, the graph kept
    g_out = np.array([1.0, 10.0, 100.0])
    got = ta.autograd.grad([y, (x * 2).sum()], [y, x], grad_outputs=[ta.tensor(g_out), None],
                           retain_graph=True)
    want = torch.autograd.grad([ty, (tx * 2).sum()], [ty, tx],
                               grad_outputs=[torch.tensor(g_out), None], retain_graph=True)
    for a, t in zip(got, want, strict=True):
        assert_same(a, t)
    z, tz = both([1.0])
    assert ta.autograd.grad(y.sum(), [x, z], allow_unused=True, retain_graph=True)[1] is None
    with pytest.raises(ta.GraphError, match="input 1 .* was not used .* allow_unused=True"):
        ta.autograd.grad(y.sum(), [x, z], retain_graph=True)
    ta.autograd.grad(y.sum(), x)  # retain_graph=False frees the graph, as in torch ...
    with pytest.raises(ta.GraphError, match="already freed"):
        ta.autograd.grad(y.sum(), x)
    (g2,) = ta.autograd.grad((x * x).sum(), x, create_graph=True)  # a gradient with a graph
    assert g2.requires_grad
    with pytest.raises(ta.GraphError, match="input 0 does not require grad"):
        ta.autograd.grad((x * x).sum(), ta.tensor([1.0]))
    # one tensor of cotangents (no list); the gradient is a new array, never the cotangent's own
    go, tgo = np.array([1.0, -2.0, 0.5]), torch.tensor([1.0, -2.0, 0.5])
    (gx,) = ta.autograd.grad(x + 1, x, grad_outputs=ta.tensor(go))  # add passes g on as it is
    assert_same(gx, torch.autograd.grad(tx + 1, tx, grad_outputs=tgo)[0])
    cotangent = ta.tensor(go.copy())
    (gy,) = ta.autograd.grad(x + 1, x, grad_outputs=cotangent)
    assert not np.shares_memory(gy.numpy(), cotangent.numpy())


def test_set_grad_enabled_and_inference_mode_as_in_torch():
    x = ta.tensor([1.0], requires_grad=True)
    try:
        ta.set_grad_enabled(False)  # a call sets the mode from here on
        assert not (x * 2).requires_grad and not ta.is_grad_enabled()
    finally:
        ta.set_grad_enabled(True)
    assert (x * 2).requires_grad
    with ta.set_grad_enabled(False):  # a block: the mode before comes back after it
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    with ta.inference_mode():
        assert not (x * 2).requires_grad
    with ta.no_grad(), ta.inference_mode(False):
        assert (x * 2).requires_grad  # inference_mode(False) turns grad mode on (torch's)
    with ta.inference_mode(False):
        assert (x * 2).requires_grad
    assert ta.set_grad_enabled(False)(lambda: (x * 2).requires_grad)() is False
    ta.set_grad_enabled(True)
    with ta.no_grad():  # a decorated function runs in its mode whatever the caller's
        assert ta.set_grad_enabled(True)(lambda: (x * 2).requires_grad)() is True
        ta.set_grad_enabled(False)
    assert ta.inference_mode()(lambda: (x * 2).requires_grad)() is False
    assert (x * 2).requires_grad


@pytest.mark.parametrize("values,correction", [([1.0], 1), ([1.0, 2.0], 2), ([1.0, 2.0], 3),
                                               ([1.0, 1.0], 2), ([[1.0, 4.0]], 2)])
@pytest.mark.parametrize("fn", ["var", "std"])
def test_var_std_without_degrees_of_freedom_give_torchs_nan_and_inf(values, correction, fn):
    x, tx = both(values)
    with pytest.warns(UserWarning):  # torch warns about the degrees of freedom
        want = getattr(tx, fn)(correction=correction)
    got = getattr(x, fn)(correction=correction)
    assert_same(got, want)
    got.backward()
    want.backward()
    assert_same(x.grad, tx.grad)


@pytest.mark.parametrize("case", ["x ** y", "0 ** y", "x ** 0.5", "x ** -1", "x ** 0", "2 ** y"])
def test_power_gradients_at_base_zero_match_torch(case):
    x, tx = both([0.0, -1.0, 2.0, 0.0])
    y, ty = both([-1.0, 0.5, -1.0, 2.0])
    fn = {"x ** y": lambda a, b: a ** b, "0 ** y": lambda a, b: 0.0 ** b,
          "x ** 0.5": lambda a, b: a ** 0.5, "x ** -1": lambda a, b: a ** -1.0,
          "x ** 0": lambda a, b: a ** 0, "2 ** y": lambda a, b: 2.0 ** b}[case]
    got, want = fn(x, y), fn(tx, ty)
    assert_same(got, want)
    got.sum().backward()
    want.sum().backward()
    for a, t in ((x, tx), (y, ty)):
        if t.grad is None:
            assert a.grad is None or not a.grad.numpy().any()
        else:
            assert_same(a.grad, t.grad)


# ---- numerics: huge logits, float16 scores -------------------------------------------------------


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_on_huge_float32_logits(smoothing):
    values = np.array([[2e38, 2e38, 2e38, 2e38], [1e30, -1.0, 0.0, 1e29]], dtype=np.float32)
    x, tx = both(values, np.float32)
    target = [1, 0]
    got = F.cross_entropy(x, ta.tensor(target), label_smoothing=smoothing)
    want = torch.nn.functional.cross_entropy(tx, torch.tensor(target),
                                             label_smoothing=smoothing)
    assert_same(got, want, rtol=1e-6)
    got.backward()
    want.backward()
    assert_same(x.grad, tx.grad, rtol=1e-5)


@pytest.mark.parametrize("impl", ["composite", "flash"])
def test_float16_attention_on_scores_past_65504(impl):
    q = np.full((1, 4, 4), 150, np.float16)  # q·k = 90000 > 65504, the float16 maximum
    v = np.random.default_rng(5).standard_normal((1, 4, 4)).astype(np.float16)
    got = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(q), ta.tensor(v), impl=impl)
    want = torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(a.astype(np.float32)) for a in (q, q, v)))
    assert got.dtype == np.float16 and not np.isnan(got.numpy()).any()
    np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy(), atol=2e-3)
    qq = ta.tensor(q, requires_grad=True)
    F.scaled_dot_product_attention(qq, qq, ta.tensor(v), impl=impl).sum().backward()
    assert qq.grad.dtype == np.float16 and np.isfinite(qq.grad.numpy()).all()


def test_attn_mask_and_is_causal_together_is_an_error_as_in_torch():
    q = ta.randn(1, 3, 4)
    with pytest.raises(ValueError, match="attn_mask or is_causal=True, not both"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=F.causal_mask(3), is_causal=True)
    with pytest.raises(RuntimeError):
        tq = torch.randn(1, 3, 4)
        torch.nn.functional.scaled_dot_product_attention(
            tq, tq, tq, attn_mask=torch.ones(3, 3, dtype=torch.bool), is_causal=True)


@pytest.mark.parametrize("name", ["relu_", "sigmoid_", "tanh_", "exp_", "log_", "sqrt_", "abs_",
                                  "neg_", "square_", "reciprocal_", "rsqrt_", "floor_", "ceil_",
                                  "trunc_", "sign_", "sin_", "cos_", "log1p_", "expm1_"])
def test_in_place_unary_methods_change_the_tensor_and_backpropagate_as_in_torch(name):
    values = np.array([[0.3, -1.2, 2.5], [1.7, 0.1, -0.4]])
    if name in ("log_", "sqrt_", "rsqrt_", "log1p_"):
        values = np.abs(values) + 0.1
    a, t = both(values)
    h, th = a * 1.0, t * 1.0  # not leaves: in-place is allowed on them
    assert getattr(h, name)() is h
    getattr(th, name)()
    assert_same(h, th)
    (h * ta.tensor(values)).sum().backward()
    (th * torch.tensor(values)).sum().backward()
    assert_same(a.grad, t.grad)


def test_masked_fill_and_clamp_in_place_as_in_torch():
    a, t = both([[0.3, -1.2, 2.5], [1.7, 0.1, -0.4]])
    h, th = a * 2, t * 2
    assert h.masked_fill_(h > 1, -1.0).clamp_min_(-0.5).clamp_max_(0.5) is h
    th.masked_fill_(th > 1, -1.0).clamp_min_(-0.5).clamp_max_(0.5)
    assert_same(h, th)
    h.sum().backward()
    th.sum().backward()
    assert_same(a.grad, t.grad)


def test_to_takes_torchs_forms():
    x = ta.tensor([1.0, 2.0])
    tx = torch.tensor([1.0, 2.0])
    for args, kwargs in [((ta.float64,), {}), (("cpu", ta.float64), {}), ((), {"dtype": "float64"}),
                         (("cpu",), {"dtype": ta.float64}), ((ta.tensor([1]),), {}),
                         ((ta.int32,), {"non_blocking": True})]:
        targs = [torch.tensor([1]) if isinstance(a, ta.Tensor) else
                 getattr(torch, np.dtype(a).name) if a != "cpu" else a for a in args]
        tkw = {k: getattr(torch, np.dtype(v).name) if k == "dtype" else v
               for k, v in kwargs.items()}
        assert_same(x.to(*args, **kwargs), tx.to(*targs, **tkw))
    assert x.to("cpu") is x and x.cpu() is x and x.to(ta.float32) is x
    assert x.to(copy=True) is not x and x.to(ta.float32, copy=True) is not x
    assert not x.is_cuda and x.is_floating_point() and not ta.tensor([1]).is_floating_point()
    with pytest.raises(TypeError, match="to: takes at most a device and a dtype"):
        x.to("cpu", "cpu", "float64")


def test_deepcopy_of_a_model_is_an_independent_model_as_in_torch():
    """copy.deepcopy(model) (EMA weights, a frozen teacher, cloned layers): new parameters on
    the same backend, tied weights still tied, gradients into the copy only."""
    import copy

    model = ta.nn.TinyTransformer(11, 16, 2, 1, max_len=8)
    model.wte.weight.grad = ta.ones(11, 16)
    twin = copy.deepcopy(model)
    ids = ta.tensor([[1, 2, 3]])
    np.testing.assert_array_equal(twin(ids).detach().numpy(), model(ids).detach().numpy())
    assert twin.lm_head.weight is twin.wte.weight and twin.wte.weight is not model.wte.weight
    # (a Parameter's deep copy has no .grad, as torch's Parameter.__deepcopy__)
    assert isinstance(twin.wte.weight, ta.nn.Parameter) and twin.wte.weight.grad is None
    model.zero_grad()
    twin.zero_grad()
    twin(ids).sum().backward()
    assert model.wte.weight.grad is None and twin.wte.weight.grad is not None
    with ta.no_grad():
        twin.wte.weight.mul_(0)
    assert model.wte.weight.abs().sum().item() > 0
    x = ta.ones(2, requires_grad=True)
    with pytest.raises(ta.GraphError, match="deepcopy: only tensors made by the user"):
        copy.deepcopy(x * 2)
    tx = torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="graph leaves"):
        copy.deepcopy(tx * 2)


def test_pickled_tensors_and_models_come_back_as_leaves():
    import pickle

    x = ta.tensor([1.0, 2.0], requires_grad=True)
    back = pickle.loads(pickle.dumps(x * 2))  # as torch: the values, a leaf, requires_grad
    assert back.requires_grad and back.is_leaf and back.numpy().tolist() == [2.0, 4.0]
    (back * 3).sum().backward()
    assert back.grad.numpy().tolist() == [3.0, 3.0]
    model = pickle.loads(pickle.dumps(ta.nn.Linear(3, 2)))
    assert isinstance(model.weight, ta.nn.Parameter) and model(ta.ones(1, 3)).shape == (1, 2)


def test_reshape_refuses_sizes_below_minus_one_as_torch():
    with pytest.raises(ta.ShapeError, match=r"reshape: .*cannot reshape into \(-2,\)"):
        ta.ones(6).reshape(-2)
    with pytest.raises(RuntimeError, match="invalid shape dimension -2"):
        torch.ones(6).reshape(-2)
    assert ta.ones(6).reshape(-1, 2).shape == (3, 2)


TORCH_DTYPE_NAMES = ["half", "float", "double", "int8", "int16", "short", "int", "long", "uint8",
                     "bool"]


@pytest.mark.parametrize("name", TORCH_DTYPE_NAMES)
def test_torchs_dtype_names_make_the_same_dtypes(name):
    a = ta.tensor([1, 0, 2], dtype=getattr(ta, name))
    t = torch.tensor([1, 0, 2], dtype=getattr(torch, name))
    assert str(a.dtype) == str(t.dtype).replace("torch.", "")
    assert a.itemsize == a.element_size() == t.itemsize == t.element_size()
    assert a.tolist() == t.tolist()
    assert str(ta.zeros(2).to(getattr(ta, name)).dtype) == str(a.dtype)  # .to(dtype) too


def test_torchs_dtype_names_leave_pythons_own_in_the_package():
    import tinyattn.tensor

    assert ta.float is not float and ta.int is not int and ta.bool is not bool
    assert not hasattr(tinyattn.tensor, "long")  # bound in tinyattn/__init__.py only
    assert ta.tensor([1.5]).item() == 1.5 and isinstance(ta.tensor([3]).item(), int)


def test_torchs_dtype_and_rounding_mode_keywords_are_taken():
    """x.prod(dim, dtype=), norm(dtype=) and div_(rounding_mode=) raised TypeError; as torch,
    the tensor is cast to dtype first, and div_ rounds the quotient it writes."""
    x = np.array([[1.0, -2.0], [3.0, 4.0]], dtype=np.float32)
    cases = [
        lambda lib, t: t.prod(1, dtype=lib.float64),
        lambda lib, t: t.prod(dtype=lib.float64),
        lambda lib, t: lib.prod(t, 0, keepdim=True, dtype=lib.float64),
        lambda lib, t: lib.tensor([[1, 2], [3, 4]], dtype=lib.int32).prod(0, dtype=lib.int8),
        lambda lib, t: lib.norm(t, dtype=lib.float64),
        lambda lib, t: t.norm(1, 1, True, lib.float64),
        lambda lib, t: t.clone().div_(2, rounding_mode="floor"),
        lambda lib, t: t.clone().div_(-3, rounding_mode="trunc"),
        lambda lib, t: lib.tensor([7, -7]).div_(lib.tensor([2, 2]), rounding_mode="floor"),
        lambda lib, t: lib.tensor([7, -7]).div_(2, rounding_mode="trunc"),
    ]
    for i, make in enumerate(cases):
        got, want = make(ta, ta.tensor(x)), make(torch, torch.tensor(x))
        assert str(got.dtype) == str(want.dtype).replace("torch.", ""), i
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=str(i))
    # the gradient flows through the cast back to the float32 tensor
    t, u = ta.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    t.prod(1, dtype=ta.float64).sum().backward()
    u.prod(1, dtype=torch.float64).sum().backward()
    assert t.grad.dtype == np.float32
    np.testing.assert_allclose(t.grad.numpy(), u.grad.numpy())
    with pytest.raises(ta.DTypeError, match="div_"):  # a true quotient into integers: torch too
        ta.tensor([7, -7]).div_(2)
    with pytest.raises(ValueError, match="rounding_mode"):
        ta.tensor([7.0]).div_(2, rounding_mode="round")
