"""What a user found comparing tinyattn with torch 2.13, each checked against torch itself:
1. Tensor(...) is torch's legacy constructor (Tensor([1, 2]) float32, Tensor(2, 3) a shape,
   Tensor() empty, Tensor(t) an alias), its refusals included;
2. torch's keyword names: every function and method both have, called with the keywords of
   torch's own schemas (zeros(size=), x.view(size=), where(c, input=, other=), ...) and with
   NumPy's axis=/keepdims= where torch takes them;
3. norm(p=None) (torch: 2, or 'fro');
4. the result dtype and precision of composed ops (xlogy, logaddexp2, addcmul, addcdiv, cumsum
   and cumprod of 0-d tensors): promoted first as torch, then computed;
5. sign(nan) and sgn;
6. refusals where torch refuses: keepdim without a dim, softmax to an integer dtype,
   transpose() without dims, Python lists as operands, bool tensors where torch has no kernel.
"""

import inspect
import math
import warnings

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

NAN, INF = math.nan, math.inf


def dtype_name(dtype):
    """'float32' for torch.float32 and np.float32 alike ('bool' for np.bool_)."""
    return str(dtype).replace("torch.", "").replace("bool_", "bool")


def same(got, want, exact_dtype=True, values=True, tol=1e-6):
    """got (tinyattn's) is want (torch's): shape, dtype and values (NaN where torch's is)."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w, exact_dtype, values, tol)
        return
    if isinstance(want, torch.dtype):
        assert dtype_name(want) == dtype_name(got)
        return
    if not isinstance(want, torch.Tensor):
        if values:
            assert np.allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float))
        return
    g = got.numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    assert tuple(want.shape) == g.shape
    if exact_dtype:
        assert dtype_name(want.dtype) == dtype_name(g.dtype)
    if values:
        w = want.detach().double().numpy()
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=tol, atol=tol, equal_nan=True)


def to_ta(v):
    """A torch argument as tinyattn's (tensors copied, dtypes named alike)."""
    if isinstance(v, torch.Tensor):
        return ta.tensor(v.detach().numpy())
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
        return [to_ta(t) for t in v]
    if isinstance(v, torch.dtype):
        return getattr(ta, dtype_name(v))
    return v


# ---- 1. the legacy constructor ------------------------------------------------------------------


CONSTRUCTED = {
    "a list of ints": lambda m: m.Tensor([1, 2]),
    "nested ints": lambda m: m.Tensor([[1, 2], [3, 4]]),
    "bools": lambda m: m.Tensor([True, False]),
    "a tuple": lambda m: m.Tensor((1.5, 2)),
    "a range": lambda m: m.Tensor(range(3)),
    "an empty list": lambda m: m.Tensor([]),
    "sizes": lambda m: m.Tensor(2, 3),
    "one size": lambda m: m.Tensor(3),
    "size 0": lambda m: m.Tensor(0),
    "a NumPy int as a size": lambda m: m.Tensor(np.int64(3)),
    "a 0-d integer array as a size": lambda m: m.Tensor(np.array(3)),
    "a bool size": lambda m: m.Tensor(2, True),
    "nothing": lambda m: m.Tensor(),
    "an int64 array": lambda m: m.Tensor(np.array([1, 2])),
    "a float64 array": lambda m: m.Tensor(np.array([1.5, 2.0])),
    "a float16 array": lambda m: m.Tensor(np.array([1.5, 2.0], dtype=np.float16)),
    "a bool array": lambda m: m.Tensor(np.array([True])),
    "a 0-d float array": lambda m: m.Tensor(np.array(3.0)),
    "device=": lambda m: m.Tensor([1.0, 2.0], device="cpu"),
    "sizes, device=": lambda m: m.Tensor(2, 3, device="cpu"),
}


@pytest.mark.parametrize("case", list(CONSTRUCTED))
def test_the_legacy_constructor_makes_what_torchs_makes(case):
    """Data in the default dtype (float32, whatever the data's own), sizes as a shape (torch's
    memory is uninitialised: only the shape and dtype are compared there)."""
    want = CONSTRUCTED[case](torch)
    got = CONSTRUCTED[case](ta)
    assert type(got) is ta.Tensor
    same(got, want, values=not case.startswith(("size", "one size", "a NumPy int", "a 0-d int",
                                                "a bool size")))


def test_the_legacy_constructor_follows_the_default_dtype():
    for m in (torch, ta):
        m.set_default_dtype(m.float64)
    try:
        assert ta.Tensor([1]).dtype == ta.float64 and ta.Tensor(2).dtype == ta.float64
        assert torch.Tensor([1]).dtype == torch.float64
    finally:
        for m in (torch, ta):
            m.set_default_dtype(m.float32)


def test_a_tensor_given_is_aliased_as_torch_aliases_it():
    """Tensor(t): t's memory, dtype and version counter (an int tensor stays int), and on the
    graph where t requires grad."""
    for m in (torch, ta):
        z = m.tensor([1, 2])
        w = m.Tensor(z)
        w.add_(1)
        assert z.tolist() == [2, 3] and z._version == w._version == 1
        assert dtype_name(w.dtype) == "int64"
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = m.Tensor(x)
        assert y.requires_grad and y.grad_fn is not None
        (y * 3).sum().backward()
        assert x.grad.tolist() == [3.0, 3.0]


def test_a_float32_array_is_shared_as_torch_shares_it():
    a = np.array([1.0, 2.0], dtype=np.float32)
    t, u = torch.Tensor(a), ta.Tensor(a)
    a[0] = 9
    assert t.tolist() == u.tolist() == [9.0, 2.0]


REFUSED = {
    "a float": lambda m: m.Tensor(np.float64(3.0)),
    "a bool": lambda m: m.Tensor(True),
    "None": lambda m: m.Tensor(None),
    "a str": lambda m: m.Tensor("ab"),
    "a generator": lambda m: m.Tensor(x for x in [1, 2]),
    "data and a size": lambda m: m.Tensor([1], 2),
    "a size and a float": lambda m: m.Tensor(2, 3.0),
    "a size and None": lambda m: m.Tensor(2, None),
    "two lists": lambda m: m.Tensor([1], [2]),
    "dtype=": lambda m: m.Tensor([1, 2], dtype=m.float64),
    "requires_grad=": lambda m: m.Tensor([1.0, 2.0], requires_grad=True),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_legacy_constructor_refuses_what_torch_refuses(case):
    with pytest.raises(TypeError):
        REFUSED[case](torch)
    with pytest.raises(TypeError, match="Tensor"):
        REFUSED[case](ta)


def test_a_negative_size_is_refused():
    with pytest.raises(RuntimeError):
        torch.Tensor(-1)
    with pytest.raises(ValueError, match="Tensor"):
        ta.Tensor(-1)


def test_the_library_still_makes_tensors_of_arrays_in_their_own_dtype():
    """What the library made with the older constructor keeps working (tinyattn.tensor and
    friends, and the older Tensor(array, backend=) and Tensor(0.5), which torch has not)."""
    assert ta.tensor([1, 2]).dtype == ta.int64
    assert ta.as_tensor(np.array([1.0])).dtype == ta.float64
    assert ta.exp(ta.tensor([0.0], dtype=ta.float64)).dtype == ta.float64
    assert ta.Tensor(np.array([True, False]), backend="numpy").dtype == ta.bool
    assert ta.Tensor(0.5).shape == () and ta.Tensor(0.5).item() == 0.5
    assert ta.nn.utils.get_total_norm([]).item() == 0.0
    assert ta.tril_indices(3, 3).dtype == ta.int64
    cos, _ = ta.functional.rotary_tables(4, 8, dtype=np.float64)
    assert cos.dtype == ta.float64


# ---- 2. torch's keyword names --------------------------------------------------------------------


RANDOM = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
          "normal", "bernoulli", "multinomial", "empty", "empty_like", "new_empty", "poisson",
          "uniform_", "normal_", "random_", "exponential_", "bernoulli_", "geometric_",
          "cauchy_", "log_normal_", "empty_strided", "new_empty_strided", "dropout",
          "alpha_dropout", "feature_dropout", "rrelu", "rrelu_", "manual_seed", "seed",
          "initial_seed", "binomial"}
# the singular vectors' signs are LAPACK's choice (torch's build and NumPy's differ): compared
# as magnitudes
UP_TO_SIGN = {"svd"}
SIZES = {"view": (3, 2), "reshape": (3, 2), "expand": (2, 3), "repeat": (1, 2), "tile": (2, 1),
         "permute": (1, 0), "flip": (0,), "roll": (1,)}
NOT_HERE = {"unique[py]": "unique(dim=) is not supported (a documented gap, not a keyword)",
            "polar[]": "complex numbers are not supported (refused by name: test_llama_porting)",
            "complex[]": "complex numbers are not supported (refused by name: test_llama_porting)"}
# the arguments of torch's functions written in Python (no schema): name -> schema type
PY_TYPES = {"tensor": "Tensor", "input": "Tensor", "other": "Tensor", "dim": "int",
            "split_size_or_sections": "int", "split_size": "int", "p": "number", "keepdim": "bool",
            "tensors": "List[Tensor]", "x1": "Tensor", "x2": "Tensor", "a": "Tensor",
            "b": "Tensor", "dims": "int"}


def base():
    return torch.linspace(0.5, 1.5, 6).reshape(2, 3)


def _tensor_value(op, name):
    x = base()
    if name in ("sorted_sequence", "boundaries"):
        return torch.tensor([0.0, 1.0, 2.0])
    if name in ("index", "indices"):
        return torch.tensor([0, 1])
    if name in ("mask", "condition"):
        return x > 1
    if name in ("mat2", "vec2") or name == "other" and op in ("matmul", "mm"):
        return x.T.contiguous() if name != "vec2" else torch.tensor([1.0, 2.0])
    if name == "vec":
        return torch.tensor([1.0, 2.0, 3.0])
    if name == "prob":  # (in [0, 1]: tinyattn refuses others, torch returns what it may)
        return x / 2
    return x * 2 + 0.25 if name == "other" else x


def _list_value(op, name):
    if name == "indices":
        return [1]
    if name in ("split_size", "split_sizes"):
        return [1, 1]
    if name in ("dim", "dims") and op not in SIZES:
        return (1,) if op != "rot90" else (0, 1)
    return SIZES.get(op, (2, 3))


INTS = {"dim0": 0, "dim1": 1, "k": 1, "chunks": 2, "sections": 2, "split_size": 1, "high": 5,
        "low": 0, "n": 3, "end": 5, "start": 1, "steps": 3, "diagonal": 0, "length": 1,
        "index": 1, "source": 0, "destination": 1, "shifts": 1}
NUMBERS = {"end": 5, "start": 1, "step": 2, "fill_value": 1.5, "p": 2, "exponent": 2,
           "min": 0.7, "max": 1.2}


def value(op, name, typ):
    """A torch value for argument `name` (of schema type `typ`) of op; KeyError if none."""
    if typ.startswith("Optional["):
        typ = typ[len("Optional["):-1]
    if name == "dtype":
        return torch.float64
    if typ in ("List[Tensor]", "List[Optional[Tensor]]"):
        return [base(), base() + 1]
    if typ == "Tensor":
        return _tensor_value(op, name)
    if typ == "List[int]":
        return _list_value(op, name)
    if typ == "int":
        return INTS.get(name, 1)
    if typ in ("number", "float"):
        return NUMBERS.get(name, 0.5)
    if typ == "bool":
        return True
    raise KeyError(typ)


def _schema_args(schema, method):
    """[(name, type, required)] of one schema (None for an out= form); `self` is `input` in
    the function form and the tensor itself in the method form; dim and keepdim are passed
    wherever they are plain ints and bools."""
    args = []
    for a in schema.arguments:
        if a.alias_info is not None and a.alias_info.is_write and a.name != "self":
            return None
        if a.name == "self" and method:
            continue
        typ = str(a.type)
        required = not a.has_default_value() and not typ.startswith("Optional") or (
            a.name in ("dim", "keepdim") and typ in ("int", "bool"))
        args.append(("input" if a.name == "self" else a.name, typ, required))
    return args


def _python_args(fn, method):
    """[(name, type, required)] of a torch function written in Python, or None."""
    args = []
    for i, (name, p) in enumerate(inspect.signature(fn).parameters.items()):
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name == "self" or method and i == 0:
            continue
        if name not in PY_TYPES:
            if p.default is p.empty:
                return None
            continue
        args.append((name, PY_TYPES[name], p.default is p.empty or name in ("dim", "keepdim")))
    return args


def overloads(op, method):
    """[(overload, [(name, type, required)])]: torch's own argument names for op."""
    fn = getattr(torch.Tensor if method else torch, op)
    if inspect.isfunction(fn):
        args = _python_args(fn, method)
        return [] if args is None else [("py", args)]
    found = []
    for s in torch._C._jit_get_schemas_for_operator("aten::" + op):
        if s.overload_name.endswith("out") or "out" in s.overload_name.split("_"):
            continue
        args = _schema_args(s, method)
        if args is not None:
            found.append((s.overload_name, args))
    return found


def keyword_cases():
    """(label, method?, op, keywords) for every function and method tinyattn and torch both
    have, one per overload of torch's: its required arguments as keywords (and dim, keepdim),
    then the same with NumPy's axis=/keepdims= for dim/keepdim."""
    cases = []
    for method, owner, m in ((False, ta, torch), (True, ta.Tensor, torch.Tensor)):
        for op in sorted(dir(owner)):
            fn = getattr(owner, op, None)
            if op.startswith("_") or not hasattr(m, op) or isinstance(fn, type) or \
                    not callable(fn):
                continue
            for ov, args in overloads(op, method):
                args = [(n, t) for n, t, req in args if req]
                try:
                    [value(op, n, t) for n, t in args]
                except KeyError:
                    continue
                if not args:
                    continue
                label = f"{'Tensor.' if method else 'ta.'}{op}[{ov}]"
                cases.append((label, method, op, args))
                if any(n in ("dim", "keepdim") for n, _ in args):
                    alias = {"dim": "axis", "keepdim": "keepdims"}
                    cases.append((label + "~axis", method, op,
                                  [(alias.get(n, n), t) for n, t in args]))
    return cases


KEYWORD_CASES = keyword_cases()


def test_the_keyword_cases_cover_what_the_user_named():
    labels = {c[0].split("[")[0] for c in KEYWORD_CASES}
    for name in ("ta.zeros", "ta.full", "ta.randint", "ta.arange", "ta.where", "ta.matmul",
                 "ta.zeros_like", "ta.max", "ta.searchsorted", "ta.cat", "ta.split",
                 "Tensor.view", "Tensor.reshape", "Tensor.permute", "Tensor.repeat",
                 "Tensor.expand", "Tensor.tile", "Tensor.new_zeros", "Tensor.tensor_split",
                 "Tensor.split"):
        assert name in labels, name
    assert len(KEYWORD_CASES) > 300


@pytest.mark.parametrize("case", KEYWORD_CASES, ids=[c[0] for c in KEYWORD_CASES])
def test_torchs_keyword_names_are_taken(case):
    """The call torch takes with these keywords, tinyattn takes, with torch's result (values
    too, but for random draws)."""
    label, method, op, args = case
    if label.split("~")[0].split(".", 1)[1] in NOT_HERE:
        pytest.skip(NOT_HERE[label.split("~")[0].split(".", 1)[1]])
    own = {"axis": "dim", "keepdims": "keepdim"}
    kw = {n: value(op, own.get(n, n), t) for n, t in args}  # (made anew: in-place ops)
    x = base()
    tx, tkw = to_ta(x), {k: to_ta(v) for k, v in kw.items()}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(x, op)(**kw) if method else getattr(torch, op)(**kw)
    except Exception:  # noqa: BLE001 - a call torch refuses tests no keyword name
        pytest.skip("torch refuses these arguments")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = getattr(tx, op)(**tkw) if method else getattr(ta, op)(**tkw)
    if op in UP_TO_SIGN:
        got, want = [t.abs() for t in got], [t.abs() for t in want]
    same(got, want, values=op not in RANDOM, tol=1e-5)


NAMED = {  # the calls of the report, and torch's Python-level ones
    "zeros(size=)": lambda m, x: m.zeros(size=(2,)),
    "ones(size=)": lambda m, x: m.ones(size=(2, 3), dtype=m.float64),
    "empty(size=)": lambda m, x: m.empty(size=(2,)).shape,
    "full(size=, fill_value=)": lambda m, x: m.full(size=(2,), fill_value=3.0),
    "randint(high=, size=)": lambda m, x: m.randint(high=5, size=(3,)).shape,
    "randint(low=, high=, size=)": lambda m, x: m.randint(low=1, high=5, size=(3,)).shape,
    "arange(end=)": lambda m, x: m.arange(end=3),
    "arange(start=, end=, step=)": lambda m, x: m.arange(start=1, end=7, step=2),
    "x.view(size=)": lambda m, x: x.view(size=(3, 2)),
    "x.reshape(shape=)": lambda m, x: x.reshape(shape=(3, 2)),
    "x.permute(dims=)": lambda m, x: x.permute(dims=(1, 0)),
    "x.repeat(repeats=)": lambda m, x: x.repeat(repeats=(2, 1)),
    "x.expand(size=)": lambda m, x: x[:1].expand(size=(3, 3)),
    "x.tile(dims=)": lambda m, x: x.tile(dims=(2,)),
    "x.new_zeros(size=)": lambda m, x: x.new_zeros(size=(2,)),
    "x.new_ones(size=)": lambda m, x: x.new_ones(size=(2,)),
    "x.tensor_split(sections=)": lambda m, x: x.tensor_split(sections=2, dim=1),
    "x.tensor_split(indices=)": lambda m, x: x.tensor_split(indices=[1], dim=1),
    "x.split(split_size=)": lambda m, x: x.split(split_size=1),
    "split(x, split_size_or_sections=)": lambda m, x: m.split(x, split_size_or_sections=1),
    "split(tensor=)": lambda m, x: m.split(tensor=x, split_size_or_sections=[1, 1]),
    "where(c, input=, other=)": lambda m, x: m.where(x > 1, input=x, other=-x),
    "matmul(input=, other=)": lambda m, x: m.matmul(input=x, other=x.T),
    "zeros_like(input=)": lambda m, x: m.zeros_like(input=x),
    "full_like(input=, fill_value=)": lambda m, x: m.full_like(input=x, fill_value=2.0),
    "max(a, other=b)": lambda m, x: m.max(x, other=x.flip(0)),
    "x.min(other=)": lambda m, x: x.min(other=x.flip(0)),
    "searchsorted(sorted_sequence=, input=)": lambda m, x: m.searchsorted(
        sorted_sequence=m.tensor([0.0, 1.0, 2.0]), input=x),
    "cat(axis=)": lambda m, x: m.cat([x, x], axis=1),
    "stack(axis=)": lambda m, x: m.stack([x, x], axis=1),
    "sum(axis=, keepdims=)": lambda m, x: m.sum(x, axis=0, keepdims=True),
    "x.cumsum(axis=)": lambda m, x: x.cumsum(axis=1),
    "x.unsqueeze(axis=)": lambda m, x: x.unsqueeze(axis=0),
    "norm(input=, p=, dim=)": lambda m, x: m.norm(input=x, p=1, dim=1),
    "softmax(input=, dim=)": lambda m, x: m.softmax(input=x, dim=1),
    "swapdims(dim0=, dim1=)": lambda m, x: m.swapdims(x, dim0=0, dim1=1),
    "x.copy_(other=)": lambda m, x: x.clone().copy_(other=x * 2),
}


@pytest.mark.parametrize("case", list(NAMED))
def test_the_calls_of_the_report_take_torchs_keywords(case):
    want = NAMED[case](torch, base())
    got = NAMED[case](ta, to_ta(base()))
    same(got, want)


def test_a_keyword_and_its_positional_twin_are_not_both_taken():
    x = ta.ones(2, 3)
    with pytest.raises(TypeError):
        x.view((3, 2), size=(3, 2))
    with pytest.raises(TypeError):
        ta.zeros(2, size=(2,))
    with pytest.raises(TypeError):
        x.cumsum(0, axis=0)


# ---- 3. norm(p=None) -----------------------------------------------------------------------------


@pytest.mark.parametrize("p", [None, "fro", 2, 1, 0, 3, 0.5, -1, INF, -INF])
@pytest.mark.parametrize("dim", [None, 1, 0, (0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_norm_takes_torchs_p_none_and_the_rest(p, dim, keepdim):
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 0.0, -6.0]])
    want = torch.norm(x, p=p, dim=dim, keepdim=keepdim)
    same(ta.norm(to_ta(x), p=p, dim=dim, keepdim=keepdim), want, tol=1e-5)
    same(to_ta(x).norm(p=p, dim=dim, keepdim=keepdim), x.norm(p=p, dim=dim, keepdim=keepdim),
         tol=1e-5)


def test_norm_positional_none_and_the_nuclear_norm():
    x = torch.tensor([[1.0, -2.0, 3.0], [4.0, 0.0, -6.0]])
    same(to_ta(x).norm(None), x.norm(None), tol=1e-5)
    same(to_ta(x).norm(None, 1), x.norm(None, 1), tol=1e-5)
    same(to_ta(x).norm(p="nuc"), x.norm(p="nuc"), tol=1e-5)  # (torch's: matrix_norm's)
    same(ta.linalg.matrix_norm(to_ta(x), "nuc"), torch.linalg.matrix_norm(x, "nuc"), tol=1e-5)


# ---- 4. composed ops: promoted first, then computed ----------------------------------------------


def T(m, values, dtype="float32"):  # noqa: N802
    return m.tensor(values, dtype=getattr(m, dtype))


COMPOSED = {
    "xlogy float16, 0-d float64": lambda m: m.xlogy(T(m, [1.0, 2.0], "float16"),
                                                    T(m, 3.0, "float64")),
    "xlogy 0-d float64, float16": lambda m: m.xlogy(T(m, 3.0, "float64"),
                                                    T(m, [1.0, 2.0], "float16")),
    "xlogy float16, 0-d float32": lambda m: m.xlogy(T(m, [1.0, 2.0], "float16"), T(m, 3.0)),
    "xlogy float64, int64": lambda m: m.xlogy(T(m, [1.0, 2.0], "float64"),
                                              T(m, [3, 16777217], "int64")),
    "xlogy float32, int64": lambda m: m.xlogy(T(m, [1.0, 2.0]), T(m, [3, 16777217], "int64")),
    "xlogy int64, int64": lambda m: m.xlogy(T(m, [1, 2], "int64"), T(m, [3, 4], "int64")),
    "xlogy int32, 0-d float64": lambda m: m.xlogy(T(m, [1, 2], "int32"), T(m, 3.0, "float64")),
    "xlogy float64, Python int": lambda m: m.xlogy(T(m, [1.0, 2.0], "float64"), 16777217),
    "xlogy bool, bool": lambda m: m.xlogy(T(m, [True, False], "bool"),
                                          T(m, [True, True], "bool")),
    "logaddexp2 float16, float64": lambda m: m.logaddexp2(T(m, [1.0, 2.0], "float16"),
                                                          T(m, [1.0, 2.0], "float64")),
    "logaddexp2 float16, 0-d float64": lambda m: m.logaddexp2(T(m, [1.0, 2.0], "float16"),
                                                              T(m, 2.0, "float64")),
    "addcmul int32, bool, bool": lambda m: m.addcmul(T(m, [1, 2], "int32"),
                                                     T(m, [True, False], "bool"),
                                                     T(m, [True, True], "bool")),
    "addcmul int32, bool, bool, value=2": lambda m: m.addcmul(
        T(m, [1, 2], "int32"), T(m, [True, False], "bool"), T(m, [True, True], "bool"),
        value=2),
    "addcmul int32s, value=1.5": lambda m: m.addcmul(T(m, [1, 2], "int32"), T(m, [1, 2], "int32"),
                                                     T(m, [3, 3], "int32"), value=1.5),
    "addcmul int32s, value=-1.5": lambda m: m.addcmul(
        T(m, [1, 2], "int32"), T(m, [1, 2], "int32"), T(m, [3, 3], "int32"), value=-1.5),
    "addcmul int8 wraps": lambda m: m.addcmul(T(m, [100, 100], "int8"), T(m, [100, 100], "int8"),
                                              T(m, [3, 4], "int8")),
    "addcmul bool, int32, int32": lambda m: m.addcmul(T(m, [True, False], "bool"),
                                                      T(m, [1, 2], "int32"),
                                                      T(m, [3, 3], "int32")),
    "addcmul int8, 0-d float64, int8": lambda m: m.addcmul(T(m, [1, 2], "int8"),
                                                           T(m, 2.0, "float64"),
                                                           T(m, [3, 4], "int8")),
    "addcmul float16, 0-d float64s": lambda m: m.addcmul(T(m, [1.0, 2.0], "float16"),
                                                         T(m, 1.1, "float64"),
                                                         T(m, 3.0, "float64"), value=0.1),
    "addcmul float32, int64s": lambda m: m.addcmul(T(m, [1.0, 2.0]), T(m, [1, 2], "int64"),
                                                   T(m, [3, 4], "int64")),
    "addcdiv int32, float32s, value=2.5": lambda m: m.addcdiv(
        T(m, [1, 2], "int32"), T(m, [1.0, 2.0]), T(m, [3.0, 4.0]), value=2.5),
    "addcdiv float16, 0-d float64s": lambda m: m.addcdiv(T(m, [1.0, 2.0], "float16"),
                                                         T(m, 1.0, "float64"),
                                                         T(m, 3.0, "float64"), value=0.1),
    "addcdiv bool, float32s": lambda m: m.addcdiv(T(m, [True, False], "bool"), T(m, [1.0, 2.0]),
                                                  T(m, [3.0, 3.0])),
    "Tensor.addcmul_ int32, bool, bool": lambda m: T(m, [1, 2], "int32").addcmul_(
        T(m, [True, False], "bool"), T(m, [True, True], "bool")),
}
for _op in ("cumsum", "cumprod"):
    for _dt in ("int32", "bool", "int64", "int8", "float16"):
        COMPOSED[f"{_op} 0-d {_dt}"] = lambda m, op=_op, dt=_dt: getattr(m, op)(T(m, 1, dt), 0)
        COMPOSED[f"{_op} 1-d {_dt}"] = lambda m, op=_op, dt=_dt: getattr(m, op)(T(m, [1, 1], dt),
                                                                               0)
        COMPOSED[f"Tensor.{_op} 0-d {_dt}"] = lambda m, op=_op, dt=_dt: getattr(
            T(m, 1, dt), op)(-1)
for _dt in ("int32", "bool", "float16"):
    COMPOSED[f"cummax 0-d {_dt}"] = lambda m, dt=_dt: m.cummax(T(m, 1, dt), 0)
    COMPOSED[f"cummin 0-d {_dt}"] = lambda m, dt=_dt: m.cummin(T(m, 1, dt), 0)


@pytest.mark.parametrize("case", list(COMPOSED))
def test_composed_ops_promote_first_as_torch(case):
    same(COMPOSED[case](ta), COMPOSED[case](torch), tol=1e-3)


def test_composed_ops_refuse_the_bools_torch_refuses():
    for m in (torch, ta):
        with pytest.raises((RuntimeError, TypeError)):
            m.addcmul(T(m, [True], "bool"), T(m, [True], "bool"), T(m, [True], "bool"))


def test_logaddexp2_keeps_a_float16_gradient_on_the_graph():
    a = ta.tensor([1.0, 2.0], dtype=ta.float16, requires_grad=True)
    b = ta.tensor([1.0, 2.0], dtype=ta.float64, requires_grad=True)
    ta.logaddexp2(a, b).sum().backward()
    assert a.grad.dtype == ta.float16 and b.grad.dtype == ta.float64
    np.testing.assert_allclose(a.grad.numpy(), [0.5, 0.5], rtol=1e-3)


# ---- 5. sign -------------------------------------------------------------------------------------


SIGNED = [-0.0, 0.0, NAN, -NAN, -1.0, 2.0, INF, -INF]


@pytest.mark.parametrize("name", ["sign", "sgn", "signbit"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_sign_sgn_and_signbit_of_nan_and_zeros(name, dtype):
    x = torch.tensor(SIGNED, dtype=getattr(torch, dtype))
    want = getattr(torch, name)(x)
    got = getattr(ta, name)(to_ta(x))
    same(got, want)
    same(getattr(to_ta(x), name)(), want)
    if name != "signbit":  # +0 where torch's is +0 (not -0)
        assert np.array_equal(np.signbit(got.numpy()), torch.signbit(want).numpy())


def test_sign_of_integers_and_bools_and_its_in_place_forms():
    for values, dtype in (([1, -2, 0], "int64"), ([1, 2, 0], "uint8"), ([True, False], "bool")):
        x = torch.tensor(values, dtype=getattr(torch, dtype))
        same(ta.sgn(to_ta(x)), torch.sgn(x))
        same(ta.sign(to_ta(x)), torch.sign(x))
    x = ta.tensor([NAN, -3.0])
    assert x.sgn_() is x and x.tolist() == [0.0, -1.0]
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    x.sgn().sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_copysign_with_negative_zero_and_nan_signs():
    a = torch.tensor([1.0, 1.0, 1.0, 1.0])
    b = torch.tensor([-0.0, 0.0, -NAN, NAN])
    same(ta.copysign(to_ta(a), to_ta(b)), torch.copysign(a, b))
    same(ta.copysign(to_ta(a), -0.0), torch.copysign(a, -0.0))


# ---- 6. refused as torch refuses -----------------------------------------------------------------


X = [[1.0, 5.0, 3.0], [4.0, 0.0, 6.0]]

REFUSALS = {
    "x.max(dim=None, keepdim=True)": lambda m: T(m, X).max(dim=None, keepdim=True),
    "x.min(keepdim=True)": lambda m: T(m, X).min(keepdim=True),
    "x.median(dim=None, keepdim=True)": lambda m: T(m, X).median(dim=None, keepdim=True),
    "max(x, dim=None, keepdim=True)": lambda m: m.max(T(m, X), dim=None, keepdim=True),
    "median(x, keepdim=True)": lambda m: m.median(T(m, X), keepdim=True),
    "x.softmax(0, dtype=int64)": lambda m: T(m, [1.0, 2.0]).softmax(0, dtype=m.int64),
    "x.log_softmax(0, dtype=int32)": lambda m: T(m, [1.0, 2.0]).log_softmax(0, dtype=m.int32),
    "x.softmax(0, dtype=bool)": lambda m: T(m, [1.0, 2.0]).softmax(0, dtype=m.bool),
    "int x.softmax(0)": lambda m: T(m, [1, 2], "int64").softmax(0),
    "softmax(int x, 0)": lambda m: m.softmax(T(m, [1, 2], "int64"), 0),
    "x.transpose()": lambda m: T(m, X).transpose(),
    "x.transpose(0)": lambda m: T(m, X).transpose(0),
    "transpose(x)": lambda m: m.transpose(T(m, X)),
    "x + list": lambda m: T(m, [1.0, 2.0]) + [1.0, 2.0],
    "list + x": lambda m: [1.0, 2.0] + T(m, [1.0, 2.0]),
    "x - list": lambda m: T(m, [1.0, 2.0]) - [1.0, 2.0],
    "x * tuple": lambda m: T(m, [1.0, 2.0]) * (1.0, 2.0),
    "x / list": lambda m: T(m, [1.0, 2.0]) / [1.0, 2.0],
    "x ** list": lambda m: T(m, [1.0, 2.0]) ** [1.0, 2.0],
    "x // list": lambda m: T(m, [1.0, 2.0]) // [1.0, 2.0],
    "x % list": lambda m: T(m, [1.0, 2.0]) % [1.0, 2.0],
    "x @ list": lambda m: T(m, [1.0, 2.0]) @ [1.0, 2.0],
    "x & list": lambda m: T(m, [True, False], "bool") & [True, True],
    "x < list": lambda m: T(m, [1, 2], "int64") < [1, 2],
    "x >= tuple": lambda m: T(m, [1, 2], "int64") >= (1, 2),
    "x += list": lambda m: T(m, [1.0, 2.0]).__iadd__([1.0, 2.0]) + 0,
    "x.add(list)": lambda m: T(m, [1.0, 2.0]).add([1.0, 2.0]),
    "add(x, list)": lambda m: m.add(T(m, [1.0, 2.0]), [1.0, 2.0]),
    "x.maximum(list)": lambda m: T(m, [1.0, 2.0]).maximum([1.0, 2.0]),
    "x.eq(list)": lambda m: T(m, [1.0, 2.0]).eq([1.0, 2.0]),
    "x.atan2(list)": lambda m: T(m, [1.0, 2.0]).atan2([1.0, 2.0]),
    "where(c, x, list)": lambda m: m.where(T(m, [True, False], "bool"), T(m, [1.0, 2.0]),
                                           [3.0, 4.0]),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_what_torch_refuses_is_refused(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
            REFUSALS[case](torch)
    with pytest.raises(TypeError):
        REFUSALS[case](ta)


def test_a_tensor_equals_no_list_as_torchs_does():
    """== and != with a list or tuple are Python's identity comparisons in torch (False and
    True), not elementwise; arrays still compare elementwise."""
    for m in (torch, ta):
        x = T(m, [1, 2], "int64")
        assert (x == [1, 2]) is False and (x != [1, 2]) is True and (x == (1, 2)) is False
        with warnings.catch_warnings():  # (torch's __array_wrap__ deprecation)
            warnings.simplefilter("ignore", DeprecationWarning)
            assert (x == np.array([1, 2])).tolist() == [True, True]
            assert (x + np.array([1, 2])).tolist() == [2, 4]


BOOL_OPS = {  # torch's bool tensors: no kernel for these
    "argmax": lambda x: x.argmax(), "argmin": lambda x: x.argmin(dim=0),
    "median": lambda x: x.median(), "median(dim)": lambda x: x.median(0),
    "abs": lambda x: x.abs(), "abs()": abs, "floor": lambda x: x.floor(),
    "ceil": lambda x: x.ceil(), "round": lambda x: x.round(), "trunc": lambda x: x.trunc(),
    "trace": lambda x: x.trace(), "neg": lambda x: x.neg(), "-x": lambda x: -x,
    "positive": lambda x: x.positive(), "+x": lambda x: +x,
    "floor_divide": lambda x: x.floor_divide(x), "//": lambda x: x // x,
    "remainder": lambda x: x.remainder(x), "%": lambda x: x % x, "fmod": lambda x: x.fmod(x),
    "topk": lambda x: x.topk(1), "kthvalue": lambda x: x.kthvalue(1),
    "frac": lambda x: x.frac(), "hypot": lambda x: x.hypot(x),
    "logaddexp": lambda x: x.logaddexp(x), "logcumsumexp": lambda x: x.logcumsumexp(0),
    "<<": lambda x: x << x,
}


@pytest.mark.parametrize("case", list(BOOL_OPS))
def test_bool_tensors_are_refused_where_torch_refuses_them(case):
    with pytest.raises((RuntimeError, NotImplementedError)):
        BOOL_OPS[case](torch.tensor([[True, False], [True, True]]))
    name = case.split("(")[0]
    with pytest.raises(TypeError, match="bool") as e:
        BOOL_OPS[case](ta.tensor([[True, False], [True, True]]))
    assert not name.isidentifier() or name in str(e.value)  # (the op is named)


BOOL_KEPT = {  # and what torch does with them
    "sign": lambda m, x: x.sign(), "sum": lambda m, x: x.sum(), "cumsum": lambda m, x: x.cumsum(0),
    "max": lambda m, x: x.max(), "amax": lambda m, x: x.amax(0), "sort": lambda m, x: x.sort(0),
    "argsort": lambda m, x: x.argsort(0), "flip": lambda m, x: x.flip(0),
    "floor_divide by an int tensor": lambda m, x: x // m.tensor([2, 3]),
    "remainder by an int": lambda m, x: x.long() % 2, "~x": lambda m, x: ~x,
    "x ^ x": lambda m, x: x ^ x, "x + x": lambda m, x: x + x, "x * x": lambda m, x: x * x,
}


@pytest.mark.parametrize("case", list(BOOL_KEPT))
def test_bool_tensors_still_work_where_torch_takes_them(case):
    x = [[True, False], [True, True]]
    same(BOOL_KEPT[case](ta, ta.tensor(x)), BOOL_KEPT[case](torch, torch.tensor(x)))
