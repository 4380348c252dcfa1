"""torch's top-level functions tinyattn lacked, against torch: ta.stft and ta.istft (and the
Tensor methods) in torch's real layout (..., freq, frames, 2) (routines_signal.py), and
binomial, poisson, empty_strided, range, typename, the default device, histogramdd, the
functional RNN cells and embedding_bag (routines_misc.py)."""

import itertools
import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import DTypeError, ShapeError

torch = pytest.importorskip("torch")


def _pair(a, requires_grad=False):
    return (ta.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def _close(got, want, atol=1e-10):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-9, atol=atol)


# ---- stft ---------------------------------------------------------------------------------


_STFT_CASES = [
    dict(n_fft=8),
    dict(n_fft=8, hop_length=3),
    dict(n_fft=7, hop_length=2, win_length=5, window="hann"),
    dict(n_fft=8, win_length=6, window="hann", center=False),
    dict(n_fft=8, pad_mode="constant", normalized=True),
    dict(n_fft=6, hop_length=1, pad_mode="replicate", window="hann"),
    dict(n_fft=8, hop_length=4, pad_mode="circular"),
    dict(n_fft=8, onesided=False, window="hann"),
    dict(n_fft=5, hop_length=2, onesided=False, center=False, normalized=True),
    dict(n_fft=8, onesided=True, window="hann"),
]


def _windows(case):
    """The case's window as (tinyattn's, torch's): hann of win_length (or n_fft), or None."""
    case = dict(case)
    if case.pop("window", None) != "hann":
        return case, None, None
    n = case.get("win_length") or case["n_fft"]
    a = np.hanning(n + 1)[:-1] + 0.1  # (no zeros at the ends: istft must divide by it)
    return case, ta.tensor(a), torch.tensor(a)


@pytest.mark.parametrize("case", _STFT_CASES, ids=str)
@pytest.mark.parametrize("shape", [(23,), (2, 21)])
def test_stft_values_and_gradients_as_torch(case, shape):
    case, w, tw = _windows(case)
    a = np.random.RandomState(0).randn(*shape)
    x, tx = _pair(a, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ta.stft(x, window=w, return_complex=False, **case)
        want = torch.stft(tx, window=tw, return_complex=False, **case)
    _close(got, want)
    assert got.dtype == np.float64
    g = np.random.RandomState(1).randn(*want.shape)
    got.backward(ta.tensor(g))
    want.backward(torch.tensor(g))
    _close(x.grad, tx.grad)


def test_stft_as_a_tensor_method_and_float32():
    a = np.random.RandomState(2).randn(30).astype(np.float32)
    x, tx = _pair(a)
    w, tw = ta.hann_window(10), torch.hann_window(10)
    got = x.stft(10, hop_length=4, window=w, return_complex=False)
    want = torch.view_as_real(tx.stft(10, hop_length=4, window=tw, return_complex=True))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)


def test_stft_gradcheck_and_gradgradcheck_through_input_and_window():
    rs = np.random.RandomState(3)
    x = ta.tensor(rs.randn(13), requires_grad=True)
    w = ta.tensor(rs.rand(6) + 0.5, requires_grad=True)

    def f(x, w):
        return ta.stft(x, 6, hop_length=2, window=w, return_complex=False)

    assert ta.autograd.gradcheck(f, (x, w))
    assert ta.autograd.gradgradcheck(f, (x, w))


def test_stft_window_gradient_as_torch():
    rs = np.random.RandomState(4)
    x, tx = _pair(rs.randn(2, 17))
    w, tw = _pair(rs.rand(5) + 0.5, requires_grad=True)
    got = ta.stft(x, 8, hop_length=3, win_length=5, window=w, return_complex=False)
    want = torch.stft(tx, 8, hop_length=3, win_length=5, window=tw, return_complex=False)
    (got ** 2).sum().backward()
    (want ** 2).sum().backward()
    _close(w.grad, tw.grad, atol=1e-9)


def test_stft_without_return_complex_is_torch_runtime_error():
    x, tx = _pair(np.arange(20.0))
    with pytest.raises(RuntimeError) as want:
        torch.stft(tx, 8)
    with pytest.raises(RuntimeError, match="stft.*return_complex") as got:
        ta.stft(x, 8)
    assert type(want.value) is RuntimeError and isinstance(got.value, RuntimeError)


def test_stft_return_complex_true_is_refused_with_the_real_layout_hint():
    with pytest.raises(DTypeError, match=r"stft.*return_complex=True.*return_complex=False"):
        ta.stft(ta.arange(20.0), 8, return_complex=True)
    with pytest.raises(DTypeError, match=r"istft.*return_complex=True"):
        ta.istft(ta.zeros(5, 3, 2), 8, return_complex=True)


def test_stft_and_istft_warn_as_torch_for_a_missing_window_only():
    """torch's warning for a missing window (spectral leakage, a lossy inversion); not its
    return_complex=False deprecation, as return_complex=False is tinyattn's only form."""
    x = ta.arange(20.0)
    with pytest.warns(UserWarning, match="window was not provided"):
        spec = ta.stft(x, 8, return_complex=False, window=None)
    with pytest.warns(UserWarning, match="window was not provided"):
        ta.istft(spec, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ta.istft(ta.stft(x, 8, return_complex=False, window=ta.ones(8)), 8, window=ta.ones(8))


@pytest.mark.parametrize("kwargs, window_length, words", [
    (dict(n_fft=0), None, "n_fft"),
    (dict(n_fft=21), None, "n_fft"),
    (dict(n_fft=8, hop_length=0), None, "hop_length"),
    (dict(n_fft=8, win_length=9), None, "win_length"),
    (dict(n_fft=8), 5, r"window.*\(5,\)"),
])
def test_stft_bad_sizes_are_runtime_errors_as_torch(kwargs, window_length, words):
    w = tw = None
    if window_length is not None:
        w, tw = _pair(np.ones(window_length))
    x, tx = _pair(np.arange(20.0))
    with pytest.raises(RuntimeError):
        torch.stft(tx, window=tw, center=False, return_complex=True, **kwargs)
    with pytest.raises(ShapeError, match=f"stft.*{words}"):
        ta.stft(x, window=w, center=False, return_complex=False, **kwargs)


def test_stft_bad_input_rank_and_pad_mode_as_torch():
    with pytest.raises(RuntimeError):
        torch.stft(torch.zeros(2, 2, 20), 8, return_complex=True)
    with pytest.raises(ShapeError, match=r"stft.*1-D or 2-D.*\(2, 2, 20\)"):
        ta.stft(ta.zeros(2, 2, 20), 8, return_complex=False)
    with pytest.raises(NotImplementedError):
        torch.stft(torch.zeros(20), 8, pad_mode="bogus", return_complex=True)
    with pytest.raises(NotImplementedError, match="stft.*pad_mode.*bogus"):
        ta.stft(ta.zeros(20), 8, pad_mode="bogus", return_complex=False)
    with pytest.raises(DTypeError, match="stft.*integer"):
        ta.stft(ta.arange(20), 8, return_complex=False)


# ---- istft ----------------------------------------------------------------------------------


def _torch_istft(spec, **kwargs):
    return torch.istft(torch.view_as_complex(spec), **kwargs)


@pytest.mark.parametrize("case", [c for c in _STFT_CASES if c.get("pad_mode") is None],
                         ids=str)
@pytest.mark.parametrize("length", [None, 18, 30])
def test_istft_values_and_gradients_as_torch(case, length):
    case, w, tw = _windows(case)
    rs = np.random.RandomState(5)
    spec = torch.stft(torch.tensor(rs.randn(2, 25)), window=tw, return_complex=False, **case)
    spec = spec + 0.1 * torch.tensor(rs.randn(*spec.shape))  # (not a real signal's spectrum)
    x, tx = _pair(spec.numpy(), requires_grad=True)
    kw = {k: v for k, v in case.items() if k != "pad_mode"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            want = _torch_istft(tx, window=tw, length=length, **kw)
        except RuntimeError as e:  # (a window with zeros at its ends, center=False)
            assert "window overlap add min" in str(e)
            with pytest.raises(ShapeError, match="istft.*window overlap add min"):
                ta.istft(x, window=w, length=length, **kw)
            return
        got = ta.istft(x, window=w, length=length, **kw)
    _close(got, want, atol=1e-9)
    g = rs.randn(*want.shape)
    got.backward(ta.tensor(g))
    want.backward(torch.tensor(g))
    _close(x.grad, tx.grad, atol=1e-9)


def test_istft_inverts_stft():
    a = np.random.RandomState(6).randn(3, 40)
    w = ta.hann_window(16, dtype=np.float64)
    spec = ta.stft(ta.tensor(a), 16, hop_length=4, window=w, return_complex=False)
    back = ta.istft(spec, 16, hop_length=4, window=w, length=40)
    np.testing.assert_allclose(back.numpy(), a, atol=1e-10)
    back = spec.istft(16, hop_length=4, window=w, length=40)
    np.testing.assert_allclose(back.numpy(), a, atol=1e-10)


def test_istft_gradcheck_and_gradgradcheck():
    rs = np.random.RandomState(7)
    spec = ta.tensor(rs.randn(5, 6, 2), requires_grad=True)
    w = ta.tensor(rs.rand(8) + 0.5, requires_grad=True)

    def f(spec, w):
        return ta.istft(spec, 8, hop_length=2, window=w)

    assert ta.autograd.gradcheck(f, (spec, w))
    assert ta.autograd.gradgradcheck(f, (spec, w))


def test_istft_bad_input_is_clear():
    with pytest.raises(ShapeError, match=r"istft.*\(5, 3\)"):
        ta.istft(ta.zeros(5, 3), 8)
    with pytest.raises(ShapeError, match=r"istft.*onesided.*5.*n_fft=16"):
        ta.istft(ta.zeros(5, 3, 2), 16, onesided=True)
    zero_window = ta.zeros(8, dtype=np.float64)
    with pytest.raises(RuntimeError):
        torch.istft(torch.ones(5, 3, dtype=torch.complex128), 8,
                    window=torch.zeros(8, dtype=torch.float64))
    with pytest.raises(ShapeError, match="istft.*window overlap add min"):
        ta.istft(ta.ones(5, 3, 2, dtype=np.float64), 8, window=zero_window)


def test_stft_grid_of_all_flags_as_torch():
    """Every combination of center, normalized and onesided for one odd and one even n_fft."""
    a = np.random.RandomState(8).randn(19)
    x, tx = _pair(a)
    for n_fft, center, normalized, onesided in itertools.product((6, 7), (True, False),
                                                                 (True, False), (True, False)):
        kw = dict(n_fft=n_fft, hop_length=2, center=center, normalized=normalized,
                  onesided=onesided, window=None)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = ta.stft(x, return_complex=False, **kw)
            want = torch.stft(tx, return_complex=False, **kw)
        _close(got, want)


# ---- binomial and poisson -------------------------------------------------------------------


def test_binomial_edges_dtype_broadcast_and_no_gradient():
    count = ta.tensor([0.0, 5.0, 7.0, 12.0], requires_grad=True)
    prob = ta.tensor([0.3, 0.0, 1.0, 1.0], requires_grad=True)
    got = ta.binomial(count, prob)
    want = torch.binomial(torch.tensor(count.tolist()), torch.tensor(prob.tolist()))
    assert got.tolist() == want.tolist() == [0.0, 0.0, 7.0, 12.0]
    assert got.dtype == np.float32 and not got.requires_grad
    wide = ta.binomial(ta.full((3, 2), 4.0, dtype=np.float64), ta.tensor(0.5, dtype=np.float64))
    assert wide.shape == torch.binomial(torch.full((3, 2), 4.0), torch.tensor(0.5)).shape
    assert wide.dtype == np.float64


def test_binomial_and_poisson_sample_their_laws():
    ta.manual_seed(0)
    n, p = ta.full((20000,), 30.0, dtype=np.float64), ta.full((20000,), 0.2, dtype=np.float64)
    draws = ta.binomial(n, p).numpy()
    assert np.all(draws == np.round(draws)) and draws.min() >= 0 and draws.max() <= 30
    assert abs(draws.mean() - 6.0) < 5 * np.sqrt(30 * 0.2 * 0.8 / 20000)
    assert abs(draws.var() - 4.8) < 0.3
    rates = ta.tensor(np.repeat([0.0, 0.5, 4.0], 20000))
    s = ta.poisson(rates).numpy().reshape(3, -1)
    assert np.all(s[0] == 0) and np.all(s == np.round(s))
    np.testing.assert_allclose(s.mean(1)[1:], [0.5, 4.0], atol=5 * np.sqrt(4.0 / 20000))
    np.testing.assert_allclose(s.var(1)[1:], [0.5, 4.0], rtol=0.05)


def test_binomial_and_poisson_follow_the_generator():
    c, p, r = ta.full((50,), 9.0), ta.full((50,), 0.4), ta.full((50,), 3.0)
    g1, g2 = ta.Generator().manual_seed(7), ta.Generator().manual_seed(7)
    assert ta.binomial(c, p, generator=g1).tolist() == ta.binomial(c, p, generator=g2).tolist()
    assert ta.poisson(r, generator=g1).tolist() == ta.poisson(r, generator=g2).tolist()
    ta.manual_seed(3)
    first = ta.poisson(r).tolist()
    ta.manual_seed(3)
    assert ta.poisson(r).tolist() == first
    out = ta.poisson(ta.tensor([1.0, 2.0], requires_grad=True))
    assert out.dtype == np.float32 and not out.requires_grad


def test_binomial_and_poisson_bad_input_as_torch():
    with pytest.raises(ValueError):
        torch.binomial(torch.tensor([5, 10]), torch.tensor([0.5, 0.2]))
    with pytest.raises(ValueError, match="binomial.*floating"):
        ta.binomial(ta.tensor([5, 10]), ta.tensor([0.5, 0.2]))
    with pytest.raises(ValueError, match=r"binomial.*prob.*\[0, 1\]"):
        ta.binomial(ta.tensor([5.0]), ta.tensor([1.5]))
    with pytest.raises(ValueError, match="binomial.*count"):
        ta.binomial(ta.tensor([-1.0]), ta.tensor([0.5]))
    with pytest.raises(ShapeError, match=r"binomial.*\(2,\).*\(3,\)"):
        ta.binomial(ta.ones(2), ta.ones(3))
    with pytest.raises(NotImplementedError):
        torch.poisson(torch.tensor([1, 2]))
    with pytest.raises(NotImplementedError, match="poisson.*int64"):
        ta.poisson(ta.tensor([1, 2]))
    with pytest.raises(RuntimeError):
        torch.poisson(torch.tensor([-1.0, 2.0]))
    with pytest.raises(RuntimeError, match="poisson.*non-negative"):
        ta.poisson(ta.tensor([-1.0, 2.0]))


# ---- empty_strided, range, typename ---------------------------------------------------------


@pytest.mark.parametrize("size, stride", [((2, 3), (3, 1)), ((2, 3), (1, 2)), ((4,), (2,)),
                                          ((2, 1, 3), (1, 7, 2)), ((), ())])
def test_empty_strided_as_torch(size, stride):
    got, want = ta.empty_strided(size, stride), torch.empty_strided(size, stride)
    assert got.shape == want.shape and got.stride() == want.stride()
    assert got.is_contiguous() == want.is_contiguous() and got.dtype == np.float32
    got.fill_(2.5)
    assert got.tolist() == want.fill_(2.5).tolist()
    made = ta.empty_strided(size, stride, dtype=np.float64, requires_grad=True)
    assert made.dtype == np.float64 and made.requires_grad and made.is_leaf


def test_empty_strided_bad_input_as_torch():
    for size, stride in (((2, 3), (1,)), ((2, 3), (1, -1))):
        with pytest.raises(RuntimeError):
            torch.empty_strided(size, stride)
        with pytest.raises(ShapeError, match="empty_strided"):
            ta.empty_strided(size, stride)


@pytest.mark.parametrize("args, kwargs", [((0, 3), {}), ((0, 1, 0.25), {}),
                                          ((3, 0, -1), {}), ((1, 2.05, 0.3), {}),
                                          ((0, 5, 2), {"dtype": "int64"}),
                                          ((-1, 1, 0.5), {"dtype": "float64"})])
def test_range_is_end_inclusive_as_torch_and_warns(args, kwargs):
    tkw = {k: getattr(torch, v) for k, v in kwargs.items()}
    with pytest.warns(UserWarning, match="range is deprecated.*arange"):
        got = ta.range(*args, **{k: getattr(ta, v) for k, v in kwargs.items()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.range(*args, **tkw)
    assert str(want.dtype) == f"torch.{got.dtype}"
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    assert got.shape == want.shape


def test_range_bad_steps_as_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for args, words in (((0, 3, 0), "step must be nonzero"), ((3, 0), "inconsistent")):
            with pytest.raises(RuntimeError, match=words):
                torch.range(*args)
            with pytest.raises(RuntimeError, match=f"range.*{words}"):
                ta.range(*args)


def test_typename_as_torch():
    def helper():
        pass

    for obj in (3, "s", [1], int, np.zeros(2), helper, warnings.catch_warnings):
        assert ta.typename(obj) == torch.typename(obj)
    for a in (np.zeros(2, np.float32), np.zeros(2), np.zeros(2, np.int64), np.zeros(2, bool)):
        assert ta.typename(ta.tensor(a)) == \
            torch.typename(torch.tensor(a)).replace("torch.", "tinyattn.")
    lin = ta.nn.Linear(2, 3)
    assert ta.typename(lin) == f"{type(lin).__module__}.Linear"
    assert ta.typename(lin.weight) == "tinyattn.FloatTensor" == lin.weight.type()


# ---- the default device -----------------------------------------------------------------------


@pytest.fixture
def _restore_backend():
    before = ta.get_backend().name
    yield
    ta.set_backend(before)


def test_default_device_is_cpu_as_torch(_restore_backend):
    assert ta.get_default_device() == torch.get_default_device().type == "cpu"
    assert repr(ta.get_default_device()) == repr(torch.get_default_device())
    ta.set_default_device("cpu")
    torch.set_default_device("cpu")
    try:
        assert ta.get_default_device() == "cpu" and ta.zeros(2).device == "cpu"
    finally:  # (torch's default device is a function mode: left on, torch's l1_loss drops its
        torch.set_default_device(None)  # weight= in later tests)
    ta.set_default_device(ta.device("cpu"))
    ta.set_default_device(None)
    assert ta.get_default_device() == "cpu"
    with ta.use_backend("numpy"):
        assert ta.get_default_device() == "cpu"


def test_default_device_cuda_where_there_is_one(_restore_backend):
    if ta.cuda.is_available():
        ta.set_default_device("cuda")
        assert ta.get_default_device() == "cuda" and ta.zeros(2).device == "cuda"
        assert ta.tensor([1.0]).device == "cuda"
    else:
        with pytest.raises(ta.BackendError):
            ta.set_default_device("cuda")
        assert ta.get_default_device() == "cpu"


@pytest.mark.parametrize("device, error", [("mps", ValueError), ("meta", ValueError),
                                           ("cuda:1", ValueError), ("xla", ValueError),
                                           (3.5, TypeError)])
def test_set_default_device_refuses_other_devices_by_name(device, error, _restore_backend):
    with pytest.raises(error, match=f"set_default_device.*{device}"):
        ta.set_default_device(device)
    assert ta.get_default_device() == "cpu"


# ---- histogramdd --------------------------------------------------------------------------


@pytest.mark.parametrize("bins, kwargs", [
    (4, {}),
    ([3, 5], {}),
    ([2, 3], {"range": [-1.0, 1.0, -2.0, 2.0]}),
    (3, {"density": True}),
    ([4, 2], {"weight": "w"}),
    ([4, 2], {"weight": "w", "density": True}),
    ("edges", {}),
])
def test_histogramdd_as_torch(bins, kwargs):
    rs = np.random.RandomState(9)
    a = rs.randn(50, 2)
    x, tx = _pair(a)
    w = rs.rand(50)
    kw, tkw = dict(kwargs), dict(kwargs)
    if kwargs.get("weight") == "w":
        kw["weight"], tkw["weight"] = ta.tensor(w), torch.tensor(w)
    tbins = bins
    if bins == "edges":
        bins = [ta.tensor([-3.0, -1.0, 0.0, 2.0], dtype=np.float64),
                ta.tensor([-2.0, 0.5, 3.0], dtype=np.float64)]
        tbins = [torch.tensor(b.numpy()) for b in bins]
    got, want = ta.histogramdd(x, bins, **kw), torch.histogramdd(tx, tbins, **tkw)
    _close(got.hist, want.hist)
    assert got.hist.dtype == np.float64 and len(got.bin_edges) == len(want.bin_edges)
    for g, e in zip(got.bin_edges, want.bin_edges, strict=True):
        _close(g, e)
    hist, edges = got  # (a named pair, as torch's)
    assert hist is got.hist and edges is got.bin_edges


def test_histogramdd_of_a_3d_batch_and_bad_input():
    a = np.random.RandomState(10).rand(4, 5, 3).astype(np.float32)
    got, want = ta.histogramdd(ta.tensor(a), 2), torch.histogramdd(torch.tensor(a), 2)
    np.testing.assert_allclose(got.hist.numpy(), want.hist.numpy())
    assert got.hist.dtype == np.float32
    with pytest.raises(ShapeError, match=r"histogramdd.*bins.*got 2.*3 dimensions"):
        ta.histogramdd(ta.tensor(a), [2, 2])
    with pytest.raises(ShapeError, match=r"histogramdd.*weight.*\(3,\).*\(4, 5\)"):
        ta.histogramdd(ta.tensor(a), 2, weight=ta.ones(3))
    with pytest.raises(DTypeError, match="histogramdd.*floating"):
        ta.histogramdd(ta.tensor([[1, 2]]), 2)


# ---- the functional RNN cells ---------------------------------------------------------------


def _cell_inputs(gates, batch, rs, bias=True):
    i, h = 3, 4
    shapes = [(batch, i) if batch else (i,), (batch, h) if batch else (h,), (gates * h, i),
              (gates * h, h)] + ([(gates * h,), (gates * h,)] if bias else [])
    return [rs.randn(*s) for s in shapes]


@pytest.mark.parametrize("name, gates", [("rnn_tanh_cell", 1), ("rnn_relu_cell", 1),
                                         ("lstm_cell", 4), ("gru_cell", 3)])
@pytest.mark.parametrize("batch, bias", [(2, True), (1, True), (2, False)])
def test_rnn_cells_values_and_gradients_as_torch(name, gates, batch, bias):
    rs = np.random.RandomState(11)
    arrays = _cell_inputs(gates, batch, rs, bias)
    if name == "lstm_cell":  # (hx is the pair (h, c))
        arrays.insert(2, rs.randn(*arrays[1].shape))
    ours = [ta.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]

    def call(lib, ts):
        if name == "lstm_cell":
            ts = [ts[0], (ts[1], ts[2])] + ts[3:]
        out = getattr(lib, name)(*ts)
        return out if isinstance(out, tuple) else (out,)

    got, want = call(ta, ours), call(torch, theirs)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _close(g, w)
    cotangents = [rs.randn(*w.shape) for w in want]
    sum((g * ta.tensor(c)).sum() for g, c in zip(got, cotangents, strict=True)).backward()
    sum((w * torch.tensor(c)).sum() for w, c in zip(want, cotangents, strict=True)).backward()
    for o, t in zip(ours, theirs, strict=True):
        _close(o.grad, t.grad)
    assert ta.autograd.gradcheck(lambda *ts: call(ta, list(ts)), tuple(ours))


def test_gru_cell_gradgradcheck():
    rs = np.random.RandomState(12)
    ours = [ta.tensor(a, requires_grad=True) for a in _cell_inputs(3, 2, rs)]
    assert ta.autograd.gradgradcheck(ta.gru_cell, tuple(ours))


def test_rnn_cells_bad_shapes_are_clear():
    rs = np.random.RandomState(13)
    x, h, w_ih, w_hh = (ta.tensor(a) for a in _cell_inputs(1, 2, rs, bias=False))
    with pytest.raises(RuntimeError):
        torch.rnn_tanh_cell(torch.zeros(2, 5), torch.zeros(2, 4), torch.zeros(4, 3),
                            torch.zeros(4, 4))
    with pytest.raises(ShapeError, match=r"rnn_tanh_cell.*input.*\(2, 5\).*w_ih.*\(4, 3\)"):
        ta.rnn_tanh_cell(ta.zeros(2, 5), h, w_ih, w_hh)
    with pytest.raises(ShapeError, match=r"gru_cell.*w_ih.*\(4, 3\).*3 \* hidden"):
        ta.gru_cell(x, h, w_ih, w_hh)
    with pytest.raises(TypeError, match=r"lstm_cell.*hx.*\(h, c\)"):
        ta.lstm_cell(x, h, w_ih, w_hh)
    with pytest.raises(IndexError):
        torch.rnn_tanh_cell(torch.zeros(3), torch.zeros(4), torch.zeros(4, 3), torch.zeros(4, 4))
    with pytest.raises(ta.DimError, match=r"rnn_tanh_cell.*2-D.*\(3,\).*\(4,\)"):
        ta.rnn_tanh_cell(ta.zeros(3), ta.zeros(4), w_ih, w_hh)
