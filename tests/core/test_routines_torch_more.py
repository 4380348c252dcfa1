"""torch's top-level names tinyattn lacked (routines_torch_more.py), each against torch 2.13:
vmap, cond, while_loop, conv_tbc, convolution; the autocast state functions; DLPack; the
process settings; svd_lowrank / pca_lowrank; the native_* norms and dropout, grid_sampler*,
affine_grid_generator, embedding_renorm_, empty_permuted, resize_as_, logit_, is_neg,
resolve_neg, segment_reduce; and ta.random."""

import warnings

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.autograd import gradcheck

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _torch_distributions_validate():
    """torch.cond and torch.while_loop compile their branches with dynamo, which switches
    torch.distributions' default validate_args off for the rest of the process (the
    distribution tests after these would see torch accept bad parameters): put it back."""
    before = torch.distributions.Distribution._validate_args
    yield
    torch.distributions.Distribution.set_default_validate_args(before)

RNG = np.random.default_rng(0)


def arr(*shape):
    return RNG.standard_normal(shape)


def pair(a, requires_grad=False):
    return (ta.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def close(got, want, tol=1e-10):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            close(g, w, tol)
        return
    g = got.numpy() if isinstance(got, ta.Tensor) else np.asarray(got)
    w = want.detach().numpy()
    assert g.shape == w.shape
    assert str(g.dtype) == str(w.dtype).replace("torch.", "")
    np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)


# ---- vmap, cond, while_loop ---------------------------------------------------------------------


def test_vmap_is_func_vmap_and_maps_as_torchs():
    assert ta.vmap is ta.func.vmap
    a, b = arr(4, 3), arr(3)
    (x, tx), (y, ty) = pair(a), pair(b)
    close(ta.vmap(lambda r, v: (r * v).sum())(x, y.expand(4, 3)),
          torch.vmap(lambda r, v: (r * v).sum())(tx, ty.expand(4, 3)))
    close(ta.vmap(ta.dot, in_dims=(0, None))(x, y),
          torch.vmap(torch.dot, in_dims=(0, None))(tx, ty))


def test_cond_runs_the_branch_the_predicate_picks_with_gradients():
    for pred in (True, False, 0, 2.5):
        a = arr(3)
        (x, tx) = pair(a, True)
        got = ta.cond(pred, lambda v: (v.sin(), v * 2), lambda v: (v.cos(), v - 1), (x,))
        want = torch.cond(pred, lambda v: (v.sin(), v * 2), lambda v: (v.cos(), v - 1), (tx,))
        close(got, want)
        got[0].sum().backward()
        want[0].sum().backward()
        close(x.grad, tx.grad)
    x, tx = pair(arr(3))
    close(ta.cond(ta.tensor(False), lambda v: v + 1, lambda v: v - 1, [x]),
          torch.cond(torch.tensor(False), lambda v: v + 1, lambda v: v - 1, [tx]))
    assert gradcheck(lambda v: ta.cond(ta.tensor([1.0]), lambda u: u.exp(), lambda u: u, (v,)),
                     (ta.tensor(arr(3), requires_grad=True),))


def test_cond_refuses_what_torch_refuses():
    x, tx = pair(arr(2))
    for m, v in ((torch, tx), (ta, x)):
        with pytest.raises(RuntimeError, match="pred"):
            m.cond(m.tensor([True, False]), lambda u: u, lambda u: u, (v,))
        with pytest.raises(RuntimeError, match="operands"):
            m.cond(m.tensor(True), lambda u: u, lambda u: u, (v, "a"))
        with pytest.raises(RuntimeError, match="callable"):
            m.cond(m.tensor(True), 1, lambda u: u, (v,))
        with pytest.raises(RuntimeError, match="pred"):
            m.cond("yes", lambda u: u, lambda u: u, (v,))


def test_while_loop_carries_its_values_as_torchs():
    a = arr(3)
    x, tx = pair(a)
    got, want = (m.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2), (m.tensor(0), v))
                 for m, v in ((ta, x), (torch, tx)))
    close(got, want)
    got = ta.while_loop(lambda i: i < 3, lambda i: i + 1, (ta.tensor(0),))
    want = torch.while_loop(lambda i: i < 3, lambda i: i + 1, (torch.tensor(0),))
    close(got, want)
    # never run: the inputs, cloned, as a tuple
    got = ta.while_loop(lambda v: v.sum() > 100, lambda v: (v + 1,), [x])
    want = torch.while_loop(lambda v: v.sum() > 100, lambda v: (v + 1,), [tx])
    assert isinstance(got, tuple) and got[0] is not x
    close(got, want)


def test_while_loop_refuses_what_torch_refuses():
    x, tx = pair(arr(2))
    for m, v in ((torch, tx), (ta, x)):
        with pytest.raises(RuntimeError, match="callable"):
            m.while_loop(None, lambda u: (u,), (v,))
        with pytest.raises(AssertionError, match="can only be of"):  # (torch's type)
            m.while_loop(lambda u: u.sum() > 0, lambda u: (u,), (v, 1.5))
        with pytest.raises(RuntimeError, match="cond_fn.*bool"):
            m.while_loop(lambda u: u.sum(), lambda u: (u - 1,), (v,))
    with pytest.raises(RuntimeError, match="carried_inputs"):
        ta.while_loop(lambda u: u.sum() > 0, lambda u: u, x)
    with pytest.raises(RuntimeError, match="same number"):
        ta.while_loop(lambda i, u: i < 2, lambda i, u: (i + 1,), (ta.tensor(0), x))


def test_while_loop_gradients_flow_through_the_iterations():
    def f(v):
        return ta.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s.sin() * 2),
                             (ta.tensor(0), v))[1]
    assert gradcheck(f, (ta.tensor(arr(3), requires_grad=True),))


# ---- conv_tbc, convolution ---------------------------------------------------------------------


def test_conv_tbc_is_functionals():
    (x, tx), (w, tw), (b, tb) = pair(arr(5, 2, 3), True), pair(arr(3, 3, 4), True), \
        pair(arr(4), True)
    close(ta.conv_tbc(x, w, b, 1), torch.conv_tbc(tx, tw, tb, 1))
    ta.conv_tbc(x, w, b, pad=1).sum().backward()
    torch.conv_tbc(tx, tw, tb, pad=1).sum().backward()
    close([x.grad, w.grad, b.grad], [tx.grad, tw.grad, tb.grad])


CONVS = {  # (input shape, weight shape, stride, padding, dilation, transposed, out_pad, groups)
    "1d": ((2, 4, 7), (6, 2, 3), [2], [1], [1], False, [0], 2),
    "2d": ((1, 2, 5, 6), (4, 2, 3, 2), [1, 2], [1, 0], [2, 1], False, [0, 0], 1),
    "3d": ((1, 2, 4, 4, 3), (2, 2, 2, 2, 2), [1, 1, 1], [0, 1, 0], [1, 1, 1], False,
           [0, 0, 0], 1),
    "transposed 1d": ((2, 4, 5), (4, 3, 3), [2], [1], [1], True, [1], 1),
    "transposed 2d": ((1, 4, 3, 4), (4, 1, 3, 3), [2, 1], [0, 1], [1, 2], True, [1, 0], 2),
    "transposed 3d": ((1, 2, 3, 2, 2), (2, 2, 2, 2, 2), [1, 2, 1], [0, 0, 1], [1, 1, 1], True,
                      [0, 1, 0], 1),
}


@pytest.mark.parametrize("case", list(CONVS))
def test_convolution_dispatches_as_torchs(case):
    xs, ws, *rest = CONVS[case]
    (x, tx), (w, tw) = pair(arr(*xs), True), pair(arr(*ws), True)
    n_out = ws[0] if not rest[3] else ws[1] * rest[5]
    b, tb = pair(arr(n_out), True)
    got, want = ta.convolution(x, w, b, *rest), torch.convolution(tx, tw, tb, *rest)
    close(got, want)
    got.pow(2).sum().backward()
    want.pow(2).sum().backward()
    close([x.grad, w.grad, b.grad], [tx.grad, tw.grad, tb.grad])
    close(ta.convolution(x, w, None, *rest), torch.convolution(tx, tw, None, *rest))


def test_convolution_refuses_a_weight_of_no_conv():
    x, w = ta.tensor(arr(2, 3)), ta.tensor(arr(2, 3))
    with pytest.raises(RuntimeError):
        torch.convolution(torch.tensor(arr(2, 3)), torch.tensor(arr(2, 3)), None, [1], [0],
                          [1], False, [0], 1)
    with pytest.raises(ta.ShapeError, match=r"convolution.*\(2, 3\)"):
        ta.convolution(x, w, None, [1], [0], [1], False, [0], 1)


# ---- autocast state ---------------------------------------------------------------------------


def test_autocast_state_outside_is_torchs():
    for dev in ("cpu", "cuda"):
        assert ta.is_autocast_enabled(dev) is torch.is_autocast_enabled(dev) is False
        assert str(ta.get_autocast_dtype(dev)).split(".")[-1] == \
            str(torch.get_autocast_dtype(dev)).split(".")[-1]
    assert ta.is_autocast_enabled() is torch.is_autocast_enabled() is False
    assert ta.is_autocast_cache_enabled() is torch.is_autocast_cache_enabled() is True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert ta.is_autocast_cpu_enabled() is torch.is_autocast_cpu_enabled()
        assert str(ta.get_autocast_cpu_dtype()).endswith("bfloat16")
        assert str(ta.get_autocast_gpu_dtype()).endswith("float16")


def test_inside_an_enabled_autocast_it_says_enabled():
    with torch.autocast("cpu"):
        assert torch.is_autocast_enabled("cpu")
    with ta.autocast("cpu", dtype=ta.float32):
        assert ta.is_autocast_enabled("cpu") and not ta.is_autocast_enabled("cuda")
        assert ta.get_autocast_dtype("cpu") == ta.float32
        with ta.autocast("cpu", enabled=False):
            assert not ta.is_autocast_enabled("cpu")
        assert ta.is_autocast_enabled("cpu")
    assert not ta.is_autocast_enabled("cpu")
    assert str(ta.get_autocast_dtype("cpu")).endswith("bfloat16")


def test_autocast_setters_set_and_refuse_a_cast_tinyattn_cannot_do():
    try:
        ta.set_autocast_dtype("cpu", ta.float64)
        ta.set_autocast_enabled("cpu", True)
        assert ta.is_autocast_enabled("cpu") and ta.get_autocast_dtype("cpu") == ta.float64
        ta.set_autocast_enabled("cpu", False)
        ta.set_autocast_dtype("cpu", ta.bfloat16)
        with pytest.raises(TypeError, match="set_autocast_enabled"):
            ta.set_autocast_enabled("cpu", True)
        assert not ta.is_autocast_enabled("cpu")
        with pytest.raises(RuntimeError, match="set_autocast_dtype"):
            ta.set_autocast_dtype("tpu", ta.float32)
        ta.set_autocast_cache_enabled(False)
        assert ta.is_autocast_cache_enabled() is False
    finally:
        ta.set_autocast_cache_enabled(True)
        ta.set_autocast_enabled("cpu", False)
        ta.set_autocast_dtype("cpu", ta.bfloat16)


def test_autocast_nesting_counts_as_torchs():
    got = [ta.autocast_increment_nesting(), ta.autocast_increment_nesting(),
           ta.autocast_decrement_nesting(), ta.autocast_decrement_nesting()]
    want = [torch.autocast_increment_nesting(), torch.autocast_increment_nesting(),
            torch.autocast_decrement_nesting(), torch.autocast_decrement_nesting()]
    assert got == want
    assert ta.clear_autocast_cache() is None


# ---- DLPack -----------------------------------------------------------------------------------


def test_from_dlpack_shares_numpy_and_torch_memory():
    a = np.arange(4.0)
    t = ta.from_dlpack(a)
    a[0] = 7.0
    assert t.tolist() == [7.0, 1.0, 2.0, 3.0] and t.dtype == ta.float64
    src = torch.arange(3, dtype=torch.float32)
    u = ta.from_dlpack(src)
    src[1] = 9.0
    assert u.tolist() == [0.0, 9.0, 2.0] and u.dtype == ta.float32
    assert ta.from_dlpack(a, copy=True).numpy() is not a


def test_to_dlpack_round_trips_through_torch_sharing_memory():
    t = ta.tensor([1.0, 2.0, 3.0])
    back = torch.from_dlpack(ta.to_dlpack(t))
    back[2] = -1.0
    assert t.tolist() == [1.0, 2.0, -1.0]
    direct = torch.from_dlpack(t)  # (Tensor.__dlpack__)
    direct[0] = 5.0
    assert t.tolist()[0] == 5.0
    with pytest.raises(TypeError, match="from_dlpack.*capsule"):
        ta.from_dlpack(torch.to_dlpack(back))
    with pytest.raises(TypeError, match="to_dlpack"):
        ta.to_dlpack([1.0])


# ---- process settings -------------------------------------------------------------------------


def test_interop_threads_and_warn_always():
    n = ta.get_num_interop_threads()
    assert isinstance(n, int) and n >= 1
    ta.set_num_interop_threads(3)
    assert ta.get_num_interop_threads() == 3
    with pytest.raises(RuntimeError, match="set_num_interop_threads"):
        ta.set_num_interop_threads(0)
    assert ta.is_warn_always_enabled() is torch.is_warn_always_enabled() is False
    ta.set_warn_always(True)
    assert ta.is_warn_always_enabled()
    ta.set_warn_always(False)
    for m in (torch, ta):
        with pytest.raises(RuntimeError, match="bool"):
            m.set_warn_always(1)


def test_set_flush_denormal_answers_as_torch_and_flushes():
    want = torch.set_flush_denormal(True)
    torch.set_flush_denormal(False)
    try:
        assert ta.set_flush_denormal(True) is want
        tiny = ta.tensor([1e-310], dtype=ta.float64)
        if want:
            assert (tiny * 1.0).item() == 0.0
    finally:
        assert ta.set_flush_denormal(False) is want
    assert (ta.tensor([1e-310], dtype=ta.float64) * 1.0).item() == 1e-310


def test_deterministic_debug_mode_is_torchs():
    try:
        for mode in ("warn", 2, "default", 1, 0, "error"):
            torch.set_deterministic_debug_mode(mode)
            ta.set_deterministic_debug_mode(mode)
            assert ta.get_deterministic_debug_mode() == torch.get_deterministic_debug_mode()
            assert ta.are_deterministic_algorithms_enabled() is \
                torch.are_deterministic_algorithms_enabled()
            assert ta.is_deterministic_algorithms_warn_only_enabled() is \
                torch.is_deterministic_algorithms_warn_only_enabled()
        for bad, error in ((3, RuntimeError), ("x", RuntimeError), (1.0, TypeError)):
            with pytest.raises(error):
                torch.set_deterministic_debug_mode(bad)
            with pytest.raises(error, match="set_deterministic_debug_mode"):
                ta.set_deterministic_debug_mode(bad)
    finally:
        torch.set_deterministic_debug_mode(0)
        ta.set_deterministic_debug_mode(0)
    ta.use_deterministic_algorithms(True, warn_only=True)
    assert ta.get_deterministic_debug_mode() == 1
    ta.use_deterministic_algorithms(False)


def test_is_storage():
    x = ta.zeros(2)
    assert ta.is_storage(x.untyped_storage()) is torch.is_storage(torch.zeros(2).untyped_storage())
    assert ta.is_storage(x) is torch.is_storage(torch.zeros(2)) is False
    assert ta.is_storage(np.zeros(2)) is False


def test_set_default_tensor_type_warns_and_sets_the_dtype():
    try:
        with warnings.catch_warnings():  # (torch warns once a process: a second run of this
            warnings.simplefilter("ignore")  # test in one process sees no warning from it)
            torch.set_default_tensor_type(torch.DoubleTensor)
        with pytest.warns(UserWarning, match="deprecated"):
            ta.set_default_tensor_type(ta.DoubleTensor)
        assert ta.get_default_dtype() == ta.float64 and ta.ones(1).dtype == ta.float64
        with pytest.warns(UserWarning):
            ta.set_default_tensor_type("torch.FloatTensor")
        assert ta.get_default_dtype() == ta.float32
        for m in (torch, ta):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for bad in (m.LongTensor, "torch.IntTensor", m.float64):
                    with pytest.raises(TypeError, match="floating-point"):
                        m.set_default_tensor_type(bad)
    finally:
        torch.set_default_dtype(torch.float32)
        ta.set_default_dtype(ta.float32)


# ---- svd_lowrank, pca_lowrank -------------------------------------------------------------------


def low_rank(m, n, r, batch=()):
    return RNG.standard_normal((*batch, m, r)) @ RNG.standard_normal((*batch, r, n))


@pytest.mark.parametrize("shape", [(8, 5), (5, 9), (2, 7, 6)])
def test_svd_lowrank_finds_the_singular_values_of_a_low_rank_matrix(shape):
    a = low_rank(*shape[-2:], 3, shape[:-2])
    x, tx = pair(a)
    u, s, v = ta.svd_lowrank(x, q=4)
    tu, ts, tv = torch.svd_lowrank(tx, q=4)
    assert u.shape == tuple(tu.shape) and s.shape == tuple(ts.shape) and v.shape == tuple(tv.shape)
    assert u.dtype == s.dtype == ta.float64
    close(s[..., :3], ts[..., :3], tol=1e-8)
    assert float(s[..., 3].abs().max()) < 1e-8
    recon = (u * s.unsqueeze(-2)) @ v.mT
    np.testing.assert_allclose(recon.numpy(), a, atol=1e-9)
    np.testing.assert_allclose((u.mT @ u).numpy(), np.broadcast_to(np.eye(4), u.mT.shape[:-1] +
                                                                    (4,)), atol=1e-10)


def test_svd_lowrank_with_m_and_pca_lowrank_center_as_torchs():
    a = low_rank(9, 6, 2) + 3.0
    x, tx = pair(a)
    mean = x.mean(dim=0, keepdim=True)
    _, s, _ = ta.svd_lowrank(x, q=3, M=mean)
    _, ts, _ = torch.svd_lowrank(tx, q=3, M=tx.mean(dim=0, keepdim=True))
    close(s[:2], ts[:2], tol=1e-8)
    u, s, v = ta.pca_lowrank(x)
    tu, ts, tv = torch.pca_lowrank(tx)
    assert u.shape == tuple(tu.shape) and v.shape == tuple(tv.shape)
    close(s[:2], ts[:2], tol=1e-8)
    np.testing.assert_allclose(((u * s) @ v.mT).numpy(), a - a.mean(0), atol=1e-9)
    _, s, _ = ta.pca_lowrank(x, q=3, center=False)  # (uncentered: rank 3)
    _, ts, _ = torch.pca_lowrank(tx, q=3, center=False)
    close(s, ts, tol=1e-8)
    f32 = ta.pca_lowrank(ta.tensor(a, dtype=ta.float32), q=2)
    assert all(t.dtype == ta.float32 for t in f32)


def test_lowrank_refusals_are_torchs():
    x, tx = pair(arr(4, 3))
    for m, v in ((torch, tx), (ta, x)):
        with pytest.raises(ValueError, match="q"):
            m.pca_lowrank(v, q=4)
        with pytest.raises(ValueError, match="niter"):
            m.pca_lowrank(v, niter=-1)


def test_lowrank_gradients_are_those_of_the_tensor_ops():
    a = low_rank(6, 4, 4)

    def f(v):
        ta.manual_seed(3)
        return ta.svd_lowrank(v, q=4, niter=1)[1]
    assert gradcheck(f, (ta.tensor(a, requires_grad=True),))
    x, tx = pair(a, True)
    ta.svd_lowrank(x, q=4)[1].sum().backward()
    torch.svd_lowrank(tx, q=4)[1].sum().backward()  # (full rank: the nuclear norm's gradient)
    close(x.grad, tx.grad, tol=1e-7)


# ---- native_* -------------------------------------------------------------------------------


def test_native_layer_norm():
    (x, tx), (w, tw), (b, tb) = pair(arr(2, 3, 4), True), pair(arr(3, 4), True), \
        pair(arr(3, 4), True)
    got, want = ta.native_layer_norm(x, [3, 4], w, b, 1e-5), \
        torch.native_layer_norm(tx, [3, 4], tw, tb, 1e-5)
    close(got, want)
    assert not got[1].requires_grad and not got[2].requires_grad
    got[0].pow(2).sum().backward()
    want[0].pow(2).sum().backward()
    close([x.grad, w.grad, b.grad], [tx.grad, tw.grad, tb.grad])
    close(ta.native_layer_norm(x, (4,), None, None, 1e-3),
          torch.native_layer_norm(tx, (4,), None, None, 1e-3))
    assert gradcheck(lambda v: ta.native_layer_norm(v, [4], None, None, 1e-5)[0],
                     (ta.tensor(arr(2, 4), requires_grad=True),))


def test_native_batch_norm_training_and_eval():
    a = arr(4, 3, 2)
    (x, tx), (w, tw), (b, tb) = pair(a, True), pair(arr(3), True), pair(arr(3), True)
    (rm, trm), (rv, trv) = pair(np.zeros(3)), pair(np.ones(3))
    got = ta.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)
    want = torch.native_batch_norm(tx, tw, tb, trm, trv, True, 0.1, 1e-5)
    close(got, want)
    close([rm, rv], [trm, trv])
    got[0].pow(2).sum().backward()
    want[0].pow(2).sum().backward()
    close([x.grad, w.grad, b.grad], [tx.grad, tw.grad, tb.grad])
    close(ta.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5),
          torch.native_batch_norm(tx, tw, tb, trm, trv, False, 0.1, 1e-5))
    close(ta.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
          torch.native_batch_norm(tx, None, None, None, None, True, 0.1, 1e-5))


def test_native_group_norm():
    (x, tx), (w, tw), (b, tb) = pair(arr(2, 6, 5), True), pair(arr(6), True), pair(arr(6), True)
    got = ta.native_group_norm(x, w, b, 2, 6, 5, 3, 1e-5)
    want = torch.native_group_norm(tx, tw, tb, 2, 6, 5, 3, 1e-5)
    close(got, want)
    got[0].pow(2).sum().backward()
    want[0].pow(2).sum().backward()
    close([x.grad, w.grad, b.grad], [tx.grad, tw.grad, tb.grad])
    with pytest.raises(RuntimeError):
        torch.native_group_norm(tx, tw, tb, 2, 6, 4, 3, 1e-5)
    with pytest.raises(ta.ShapeError, match=r"native_group_norm.*\(2, 6, 5\)"):
        ta.native_group_norm(x, w, b, 2, 6, 4, 3, 1e-5)


def test_native_dropout():
    x, tx = pair(arr(50, 40), True)
    for train in (False,):
        close(ta.native_dropout(x, 0.5, train), torch.native_dropout(tx, 0.5, train))
    for train in (True, None):
        out, mask = ta.native_dropout(x, 0.3, train)
        assert mask.dtype == ta.bool and out.dtype == ta.float64
        kept = mask.numpy()
        assert 0.6 < kept.mean() < 0.8
        np.testing.assert_allclose(out.numpy(), np.where(kept, x.numpy() / 0.7, 0.0))
        out.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), kept / 0.7)
        x.grad = None
    out, mask = ta.native_dropout(x, 1.0, True)
    assert not mask.numpy().any() and not out.numpy().any()


def test_native_norm_is_the_p_norm():
    x, tx = pair(arr(3, 4), True)
    close(ta.native_norm(x), torch.norm(tx))
    close(ta.native_norm(x, 1, [1], True, None), torch.norm(tx, 1, [1], True))
    close(ta.native_norm(x, 3, [0], False, ta.float64), torch.norm(tx, 3, [0], False))
    assert gradcheck(lambda v: ta.native_norm(v, 3, [0], False, None),
                     (ta.tensor(arr(3, 2), requires_grad=True),))


# ---- grid_sampler, affine_grid_generator ------------------------------------------------------


@pytest.mark.parametrize("mode", [0, 1, 2])
@pytest.mark.parametrize("padding", [0, 1, 2])
def test_grid_sampler_2d_codes(mode, padding):
    (x, tx), (g, tg) = pair(arr(1, 2, 4, 5), True), pair(RNG.uniform(-1.2, 1.2, (1, 3, 2, 2)))
    for name in ("grid_sampler", "grid_sampler_2d"):
        got = getattr(ta, name)(x, g, mode, padding, True)
        want = getattr(torch, name)(tx, tg, mode, padding, True)
        close(got, want, tol=1e-9)
    ta.grid_sampler(x, g, mode, padding, False).sum().backward()
    torch.grid_sampler(tx, tg, mode, padding, False).sum().backward()
    close(x.grad, tx.grad, tol=1e-9)


def test_grid_sampler_3d_and_refusals():
    (x, tx), (g, tg) = pair(arr(1, 2, 3, 4, 3)), pair(RNG.uniform(-1, 1, (1, 2, 2, 2, 3)))
    close(ta.grid_sampler_3d(x, g, 0, 1, False), torch.grid_sampler_3d(tx, tg, 0, 1, False))
    close(ta.grid_sampler(x, g, 1, 0, True), torch.grid_sampler(tx, tg, 1, 0, True))
    with pytest.raises(RuntimeError):
        torch.grid_sampler_2d(tx, tg, 0, 0, False)
    with pytest.raises(ta.ShapeError, match="grid_sampler_2d"):
        ta.grid_sampler_2d(x, g, 0, 0, False)
    with pytest.raises(ValueError, match="grid_sampler.*interpolation_mode"):
        ta.grid_sampler(x, g, 5, 0, False)


def test_affine_grid_generator():
    th, tth = pair(arr(2, 2, 3), True)
    for align in (True, False):
        close(ta.affine_grid_generator(th, [2, 1, 3, 4], align),
              torch.affine_grid_generator(tth, [2, 1, 3, 4], align))
    ta.affine_grid_generator(th, [2, 1, 3, 4], False).pow(2).sum().backward()
    torch.affine_grid_generator(tth, [2, 1, 3, 4], False).pow(2).sum().backward()
    close(th.grad, tth.grad)


# ---- embedding_renorm_, empty_permuted, resize_as_, logit_, is_neg, resolve_neg ---------------


def test_embedding_renorm_writes_in_place():
    w, tw = pair(arr(4, 3) * 3)
    ids = [0, 2, 0]
    got = ta.embedding_renorm_(w, ta.tensor(ids), 1.5, 2.0)
    want = torch.embedding_renorm_(tw, torch.tensor(ids), 1.5, 2.0)
    assert got is w and want is tw
    close(w, tw)


def test_empty_permuted_strides():
    for size, layout in (((2, 3, 4), (0, 2, 1)), ((2, 3, 4, 5), (0, 2, 3, 1)), ((3,), (0,))):
        got, want = ta.empty_permuted(size, layout), torch.empty_permuted(size, layout)
        assert got.shape == tuple(want.shape) and got.stride() == want.stride()
        assert got.dtype == ta.float32
    assert ta.empty_permuted((2, 3), (1, 0), dtype=ta.float64).dtype == ta.float64
    with pytest.raises(RuntimeError):
        torch.empty_permuted((2, 3), (0, 0))
    with pytest.raises(ValueError, match=r"empty_permuted.*\(0, 0\)"):
        ta.empty_permuted((2, 3), (0, 0))


def test_resize_as_logit_is_neg_resolve_neg():
    a, ta_a = torch.zeros(2, 3), ta.zeros(2, 3)
    assert torch.resize_as_(a, torch.zeros(4)) is a and ta.resize_as_(ta_a, ta.zeros(4)) is ta_a
    assert ta_a.shape == tuple(a.shape)
    x, tx = pair(RNG.uniform(0, 1, 5))
    assert ta.logit_(x) is x and torch.logit_(tx) is tx
    close(x, tx)
    x, tx = pair(RNG.uniform(0, 1, 5))
    close(ta.logit_(x, eps=0.3), torch.logit_(tx, eps=0.3))
    assert ta.is_neg(x) is torch.is_neg(tx) is False
    assert ta.resolve_neg(x) is x


# ---- segment_reduce -----------------------------------------------------------------------------


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod", "amax", "amin"])
@pytest.mark.parametrize("initial", [None, 4.0])
def test_segment_reduce_values_and_gradients(reduce, initial):
    data = np.array([1.0, 5.0, 5.0, 2.0, 3.0, -1.0])
    (x, tx), lengths = pair(data, True), [3, 0, 2, 1]
    got = ta.segment_reduce(x, reduce, lengths=ta.tensor(lengths), initial=initial)
    want = torch.segment_reduce(tx, reduce, lengths=torch.tensor(lengths), initial=initial)
    close(got, want)
    weights = [1.0, 3.0, 2.0, -1.0]  # (no 0: the empty max segment is -inf)
    (got * ta.tensor(weights)).sum().backward()
    (want * torch.tensor(weights, dtype=torch.float64)).sum().backward()
    close(x.grad, tx.grad)


def test_segment_reduce_offsets_axis_and_gradcheck():
    (x, tx) = pair(arr(3, 6, 2), True)
    offsets = [[0, 2, 2, 6], [0, 0, 5, 6], [1, 3, 4, 4]]  # (per row of the dims before axis)
    got = ta.segment_reduce(x, "mean", offsets=ta.tensor(offsets), axis=1, unsafe=True)
    want = torch.segment_reduce(tx, "mean", offsets=torch.tensor(offsets), axis=1, unsafe=True)
    close(got, want)
    lengths = [[2, 0, 4], [1, 5, 0], [3, 3, 0]]
    got = ta.segment_reduce(x, "amax", lengths=ta.tensor(lengths), axis=1)
    want = torch.segment_reduce(tx, "amax", lengths=torch.tensor(lengths), axis=1)
    close(got, want)
    (got * 2).where(got.isfinite(), 0.0).sum().backward()
    (want * 2).where(want.isfinite(), 0.0).sum().backward()
    close(x.grad, tx.grad)
    for m, v in ((torch, tx), (ta, x)):
        with pytest.raises(RuntimeError, match="axis"):
            m.segment_reduce(v, "sum", lengths=m.tensor([2, 4]), axis=1)
    lengths = ta.tensor([[2, 4], [5, 1]])
    assert gradcheck(lambda v: ta.segment_reduce(v, "prod", lengths=lengths, axis=1),
                     (ta.tensor(arr(2, 6), requires_grad=True),))


def test_segment_reduce_refusals():
    x, tx = pair(arr(6))
    cases = [dict(lengths=[3, 2]), dict(), dict(lengths=[3, -1, 4])]
    for kw in cases:
        for m, v in ((torch, tx), (ta, x)):
            kw2 = {k: m.tensor(val) for k, val in kw.items()}
            with pytest.raises(RuntimeError, match="segment_reduce|negative"):
                m.segment_reduce(v, "sum", **kw2)
    with pytest.raises(RuntimeError, match="reduce"):
        ta.segment_reduce(x, "avg", lengths=ta.tensor([6]))


# ---- torch's keyword names, with values torch takes ----------------------------------------------


def _keyword_calls(m, t, seed=7):
    """(name, call) pairs: each function called with torch's own keyword names (the same
    data for either library: the draws start from seed)."""
    rng = np.random.default_rng(seed)

    def arr(*shape):  # (this call's own draws)
        return rng.standard_normal(shape)

    x4, g = t(arr(1, 2, 3, 4)), t(rng.uniform(-1, 1, (1, 2, 3, 2)))
    return [
        ("native_layer_norm", lambda: m.native_layer_norm(
            input=x4, normalized_shape=[4], weight=None, bias=None, eps=1e-5)),
        ("native_group_norm", lambda: m.native_group_norm(
            input=x4, weight=None, bias=None, N=1, C=2, HxW=12, group=2, eps=1e-5)),
        ("native_batch_norm", lambda: m.native_batch_norm(
            input=x4, weight=None, bias=None, running_mean=None, running_var=None,
            training=True, momentum=0.1, eps=1e-5)),
        ("native_dropout", lambda: m.native_dropout(input=x4, p=0.5, train=False)),
        ("grid_sampler", lambda: m.grid_sampler(input=x4, grid=g, interpolation_mode=0,
                                                padding_mode=1, align_corners=False)),
        ("affine_grid_generator", lambda: m.affine_grid_generator(
            theta=t(arr(1, 2, 3)), size=[1, 1, 2, 3], align_corners=False)),
        ("convolution", lambda: m.convolution(
            input=x4, weight=t(arr(3, 2, 2, 2)), bias=None, stride=[1, 1], padding=[0, 1],
            dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1)),
        ("conv_tbc", lambda: m.conv_tbc(input=t(arr(4, 1, 2)), weight=t(arr(2, 2, 3)),
                                        bias=t(arr(3)), pad=1)),
        ("segment_reduce", lambda: m.segment_reduce(data=t(arr(5)), reduce="sum",
                                                    lengths=t(np.array([2, 3])), axis=0)),
        ("svd_lowrank shapes", lambda: [v.shape for v in m.svd_lowrank(A=t(arr(5, 4)), q=2,
                                                                        niter=1, M=None)]),
        ("pca_lowrank shapes", lambda: [v.shape for v in m.pca_lowrank(A=t(arr(5, 4)), q=2,
                                                                        center=True, niter=1)]),
    ]


def test_torchs_keyword_names_are_taken():
    got = _keyword_calls(ta, ta.tensor)
    want = _keyword_calls(torch, torch.tensor)
    for (name, g), (_, w) in zip(got, want, strict=True):
        g, w = g(), w()
        if name.endswith("shapes"):
            assert [tuple(s) for s in g] == [tuple(s) for s in w], name
        else:
            close(g, w)


# ---- ta.random --------------------------------------------------------------------------------


def test_ta_random_is_a_module_like_torchs():
    assert ta.random.manual_seed is not None and hasattr(torch.random, "fork_rng")
    ta.random.manual_seed(5)
    assert ta.random.initial_seed() == 5
    state = ta.random.get_rng_state()
    a = ta.rand(3).numpy()
    ta.random.set_rng_state(state)
    np.testing.assert_array_equal(ta.rand(3).numpy(), a)
    ta.random.set_rng_state(state)
    with ta.random.fork_rng():
        inside = ta.rand(3).numpy()
    np.testing.assert_array_equal(inside, a)
    np.testing.assert_array_equal(ta.rand(3).numpy(), a)  # restored after the block
    with ta.random.fork_rng(enabled=False):
        ta.rand(1)
    assert not np.array_equal(ta.rand(3).numpy(), a)
    s = ta.random.seed()
    assert ta.random.initial_seed() == s
    import tinyattn.random as r

    assert r is ta.random
