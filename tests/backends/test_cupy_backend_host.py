"""The CuPy backend's Python code run on the CPU, on tests/support/fake_cupy.py instead of CuPy.

With TINYATTN_CUPY_KERNELS=0 every op, a training step and `tinyattn train --backend cupy`
must match the NumPy backend; with kernels on, the launches (names, argument types, grids,
shared memory, mask parameters) are checked without running them, and the GELU/Adam
ElementwiseKernels run their NumPy replays. The fake is strict where CuPy is: a NumPy array
in a device op, or an implicit device-to-host copy, is a TypeError, so host-side mistakes
that would only show on a GPU show here. Each test puts the fake in sys.modules and a fresh
backend cache in place; monkeypatch takes all of it back afterwards.
"""

import os
import re
import sys

import cuda_emu  # tests/support is on sys.path (tests/conftest.py)
import fake_cupy
import kernel_refs as kr  # tests/support (tests/conftest.py)
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.backends as B
import tinyattn.functional as F
from tinyattn.backends import cuda_launch as cl
from tinyattn.backends import cupy_backend as cb
from tinyattn.errors import BackendError, DTypeError
from tinyattn.ops import REGISTRY
from tinyattn.ops import samples as S

FAKE_NAMES = ("cupy", "cupyx", "cupyx.scipy", "cupyx.scipy.special")


def _install(monkeypatch, kernels):
    return fake_cupy.install(monkeypatch, kernels)


@pytest.fixture
def fake_be(monkeypatch):
    """The "cupy" backend on the fake, kernels off (the reference primitives in `xp`)."""
    be = _install(monkeypatch, kernels=False)
    assert isinstance(be, cb.CupyBackend) and not be.use_kernels
    return be


@pytest.fixture
def fake_kernels_be(monkeypatch):
    """The "cupy" backend on the fake with kernels on (launches recorded, not run)."""
    fake_cupy.RAW_MODULES.clear()
    be = _install(monkeypatch, kernels=True)
    assert be.use_kernels
    return be


def launches():
    return [launch for module in fake_cupy.RAW_MODULES for launch in module.launches]


# ---- the fake itself is strict, or the tests below prove nothing ------------------------------

def test_the_fake_refuses_host_arrays_and_implicit_copies(fake_be):
    cp = fake_be.xp
    a = cp.asarray(np.arange(3.0))
    assert isinstance(a, cp.ndarray) and not isinstance(a, np.ndarray)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(a)
    with pytest.raises(TypeError, match="Unsupported type"):
        a + np.ones(3)
    with pytest.raises(TypeError, match="Unsupported type"):
        cp.where(np.ones(3, bool), a, 0)
    assert isinstance(a.sum(), cp.ndarray) and a.sum().ndim == 0  # no NumPy scalars
    np.testing.assert_array_equal(cp.asnumpy(cp.exp(a) * 2), np.exp(np.arange(3.0)) * 2)
    with pytest.raises(TypeError, match="float32 or float64"):
        cp.random.default_rng(0).standard_normal(3, dtype=np.float16)


# ---- every registered op, kernels off: same forward and backward as NumPy -----------------------

def _op_params():
    return [(name, i) for name in sorted(REGISTRY) for i in range(len(REGISTRY[name].samples))]


def _run_op(name, index, backend):
    inputs, params = REGISTRY[name].samples[index]
    rng = np.random.default_rng(2000 + index)
    xs = S.materialize(inputs, rng, lambda v, rg: ta.tensor(v, requires_grad=rg,
                                                            backend=backend))
    out = REGISTRY[name](*xs, **params)
    g = np.random.default_rng(7).standard_normal(out.shape).astype(out.dtype)
    if np.issubdtype(out.dtype, np.floating) and any(
            isinstance(x, ta.Tensor) and x.requires_grad for x in xs):
        out.backward(ta.tensor(g, backend=backend))
    grads = [x.grad.numpy() if isinstance(x, ta.Tensor) and x.grad is not None else None
             for x in xs]
    return out, grads


def test_every_registered_op_has_cases():
    assert all(o.samples for o in REGISTRY.values())
    assert len(_op_params()) > 100


def _assert_op_matches_numpy(be, name, index, rtol, atol):
    """The op's sample on "cupy" (on the fake) gives NumPy's output and gradients."""
    want, want_grads = _run_op(name, index, "numpy")
    got, got_grads = _run_op(name, index, "cupy")
    assert got.backend is be and isinstance(got.data, be.xp.ndarray)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=rtol, atol=atol)
    for i, (a, b) in enumerate(zip(got_grads, want_grads, strict=True)):
        assert (a is None) == (b is None), i
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"input {i}")


@pytest.mark.parametrize("name,index", _op_params(), ids=[f"{n}-{i}" for n, i in _op_params()])
def test_op_matches_numpy_with_kernels_off(fake_be, name, index):
    _assert_op_matches_numpy(fake_be, name, index, rtol=1e-12, atol=1e-14)


@pytest.fixture
def fake_emu_be(monkeypatch):
    """The "cupy" backend on the fake with kernels on and run: their CUDA source on the CPU."""
    if not cuda_emu.available():
        pytest.skip("the CUDA emulator needs g++")
    fake_cupy.RAW_MODULES.clear()
    return fake_cupy.install(monkeypatch, kernels=True, emulate=True)


@pytest.mark.emulated
@pytest.mark.parametrize("name,index", _op_params(), ids=[f"{n}-{i}" for n, i in _op_params()])
def test_op_matches_numpy_with_kernels_emulated(fake_emu_be, name, index):
    """Every op's samples with the kernels on (float64: the softmax kernels' f64 versions)."""
    _assert_op_matches_numpy(fake_emu_be, name, index, rtol=1e-10, atol=1e-12)
    if name in ("softmax", "scaled_masked_softmax"):
        assert any(n.startswith("tinyattn_softmax_") for n, *_ in launches())


def _cast_cases():
    return [(name, i, dt) for name, i in _op_params() for dt in ("float32", "float16")
            if name not in ("cast", "embedding", "cross_entropy")]


@pytest.mark.parametrize("name,index,dtype", _cast_cases(),
                         ids=[f"{n}-{i}-{d}" for n, i, d in _cast_cases()])
def test_op_keeps_the_dtype_with_kernels_off(fake_be, name, index, dtype):
    """In float32/float16 the output and gradient dtypes are NumPy's (values: float64 above)."""
    inputs, params = REGISTRY[name].samples[index]

    def run(backend):
        rng = np.random.default_rng(index)
        xs = S.materialize(inputs, rng, lambda v, rg: ta.tensor(
            v.astype(dtype) if rg else v, requires_grad=rg, backend=backend))
        with np.errstate(all="ignore"):
            out = REGISTRY[name](*xs, **params)
            out.backward(ta.tensor(np.ones(out.shape, out.dtype), backend=backend))
        return out, [x.grad.dtype for x in xs if isinstance(x, ta.Tensor) and x.requires_grad]

    (want, want_grads), (got, got_grads) = run("numpy"), run("cupy")
    assert (got.dtype, got.shape, got_grads) == (want.dtype, want.shape, want_grads)


# ---- tensors and modules across backends -------------------------------------------------------

def test_tensor_to_cupy_and_back(fake_be):
    x = ta.tensor(np.arange(6.0).reshape(2, 3))
    y = x.to("cupy")
    assert y.backend is fake_be and x.to("cuda").backend is fake_be
    assert isinstance(y.data, fake_be.xp.ndarray)
    assert y.to("cupy") is y
    back = y.to("numpy")
    assert isinstance(back.data, np.ndarray)
    np.testing.assert_array_equal(back.numpy(), x.numpy())
    assert "backend='cupy'" in repr(y)
    assert (y * 2).sum().item() == 30.0
    with pytest.raises(BackendError, match="two backends"):
        x + y
    with pytest.raises(BackendError, match="two backends"):
        F.softmax(y, dim=-1) @ x.T


def test_module_to_cupy(fake_be):
    model = ta.nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=1, max_len=8)
    model.to("cupy")
    assert all(p.backend is fake_be and isinstance(p.data, fake_be.xp.ndarray)
               for p in model.parameters())
    with pytest.raises(BackendError, match="two backends"):
        model(ta.tensor(np.array([[1, 2, 3]]), backend="numpy"))
    logits = model(ta.tensor(np.array([[1, 2, 3]]), backend="cupy"))
    assert logits.shape == (1, 3, 7) and logits.backend is fake_be
    on_cpu = ta.nn.TinyTransformer(vocab_size=7, d_model=16, n_heads=2, n_layers=1, max_len=8)
    on_cpu.load_state_dict(model.state_dict())  # device tensors into a NumPy model
    model.load_state_dict(on_cpu.state_dict())  # and NumPy arrays onto the device
    assert all(isinstance(p.data, fake_be.xp.ndarray) for p in model.parameters())
    np.testing.assert_allclose(on_cpu(ta.tensor(np.array([[1, 2, 3]]))).numpy(),
                               logits.numpy(), rtol=1e-5, atol=1e-7)  # erf: fast vs exact


def _training_steps(backend, steps=2, dropout=0.0, dtype="float64"):
    from tinyattn import nn, optim

    ta.manual_seed(0)
    model = nn.TinyTransformer(vocab_size=11, d_model=32, n_heads=2, n_layers=2, max_len=16,
                               dropout=dropout)
    model.to(backend).to(dtype)
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 11, (3, 16)), rng.integers(0, 11, (3 * 16,))
    opt = optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    losses = []
    for _ in range(steps):
        logits = model(ta.tensor(x, backend=backend))
        loss = F.cross_entropy(logits.reshape(-1, 11), ta.tensor(y, backend=backend))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {name: p.numpy() for name, p in model.named_parameters()}


def test_training_step_matches_numpy_with_kernels_off(fake_be):
    want_losses, want = _training_steps("numpy")
    got_losses, got = _training_steps("cupy")
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-12)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_cli_train_on_cupy(fake_be, tmp_path, capsys):
    from tinyattn import cli

    out = tmp_path / "run"
    rc = cli.main(["train", "--backend", "cupy", "--steps", "3", "--d-model", "16", "--heads",
                   "2", "--layers", "1", "--batch-size", "4", "--eval-every", "3",
                   "--no-progress", "--out", str(out)])
    assert rc == 0
    assert (out / "metrics.json").exists() and (out / "checkpoint.npz").exists()
    assert B._made["cupy"] is fake_be  # it ran on the fake, not on a new backend


# ---- kernels on: the host side of each launch ---------------------------------------------------

def _gpu(be, *arrays):
    return [be.xp.asarray(a) for a in arrays]


@pytest.mark.parametrize("n", [5, 33, 1024, 3000])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_launches(fake_kernels_be, n, dtype):
    be = fake_kernels_be
    (x,) = _gpu(be, np.zeros((2, 3, n), dtype=dtype))
    keep = be.xp.asarray(np.ones((3, n), bool))
    for y in (be.softmax(x), be.scaled_masked_softmax(x, keep, scale=0.5, causal=True),
              be.softmax_backward(x, x), be.scaled_masked_softmax_backward(x, x, 0.5, True),
              be.softmax(x, axis=1)):
        assert isinstance(y, be.xp.ndarray) and y.dtype == dtype
    assert [y.shape for y in (be.softmax(x, axis=1),)] == [x.shape]
    suffix = cl.DTYPE_SUFFIX[np.dtype(dtype)]
    launch = kr.softmax_launch(n)
    kind = f"warp{launch[1]}" if launch[0] == "warp" else "block"
    names = [name for name, *_ in launches()]
    assert names[:4] == [f"tinyattn_softmax_forward_{kind}_{suffix}"] * 2 + \
        [f"tinyattn_softmax_backward_{kind}_{suffix}"] * 2
    for name, grid, block, _args, smem in launches()[:4]:
        threads = kr.WARP_BLOCK_THREADS if launch[0] == "warp" else launch[1]
        assert block == (threads,)
        if launch[0] == "warp":
            assert grid == (-(-6 // (threads // launch[2])),)
        else:
            assert grid == (6,)
            row = (1 if "forward" in name else 2) * n * kr.acc_dtype(dtype).itemsize
            assert smem == (row if row <= cl.ROW_CACHE_LIMIT else 0)


@pytest.mark.parametrize("optin,flash_dims", [(64 * 1024, {16}), (99 * 1024, {16, 32, 64, 128}),
                                              (227 * 1024, {16, 32, 64, 128})],
                         ids=["sm_75", "sm_86", "sm_90"])
def test_a_gpu_that_gives_a_block_less_shared_memory(monkeypatch, optin, flash_dims):
    """Flash tiles that do not fit the device's shared memory per block take the reference
    (right numbers, no launch); the block softmax caches rows only as far as the device allows,
    and never asks a kernel for more than the device has (the fake refuses, as CUDA does)."""
    monkeypatch.setitem(fake_cupy.DEVICE, "smem_optin", optin)
    fake_cupy.RAW_MODULES.clear()
    be = _install(monkeypatch, kernels=True)
    rng = np.random.default_rng(0)
    for d in (16, 32, 64, 128):
        q, k, v, g = (rng.standard_normal((1, 2, 9, d)).astype(np.float32) for _ in range(4))
        out, lse = be.attention_forward(*_gpu(be, q, k, v), None, 0.3, True)
        be.attention_backward(*_gpu(be, q, k, v), out, lse, *_gpu(be, g), None, 0.3, True)
        flashed = any(f"_d{d}_" in name for name, *_ in launches())
        assert flashed == (d in flash_dims), d
        if not flashed:
            want, _ = B.backend("numpy").attention_forward(q, k, v, None, 0.3, True)
            np.testing.assert_allclose(be.to_numpy(out), want, rtol=1e-5, atol=1e-6)
    fake_cupy.RAW_MODULES.clear()
    (x,) = _gpu(be, np.zeros((2, 8192), np.float32))
    be.softmax(x)
    be.softmax_backward(x, x)
    smem = {name.split("_")[2]: shared for name, _, _, _, shared in launches()}
    assert smem["forward"] == 8192 * 4
    assert smem["backward"] == (2 * 8192 * 4 if optin > 2 * 8192 * 4 + 1024 else 0)


def test_masked_softmax_passes_the_mask_and_strides(fake_kernels_be):
    be = fake_kernels_be
    x = be.xp.asarray(np.zeros((2, 3, 4, 5), np.float32))
    keep_np = np.random.default_rng(0).random((2, 1, 4, 5)) < 0.5
    be.scaled_masked_softmax(x, be.xp.asarray(keep_np), scale=2.0)
    be.scaled_masked_softmax(x, None, scale=2.0)
    (_, _, _, with_mask, _), (_, _, _, without, _) = launches()
    ptr, sb, si, sj = with_mask[-4:]
    assert isinstance(ptr, be.xp.ndarray) and ptr.dtype == np.uint8
    assert (sb, si, sj) != (0, 0, 0) and all(isinstance(s, np.int64) for s in (sb, si, sj))
    as_read = np.lib.stride_tricks.as_strided(ptr.get(), shape=(6, 4, 5),
                                              strides=(int(sb), int(si), int(sj)))
    np.testing.assert_array_equal(as_read.astype(bool),
                                  np.broadcast_to(keep_np, (2, 3, 4, 5)).reshape(6, 4, 5))
    assert without[-4:] == (np.uint64(0), 0, 0, 0) and isinstance(without[-4], np.uint64)
    assert float(with_mask[6]) == 2.0  # scale, as float64


def test_mask_params_on_device_arrays(fake_kernels_be):
    be = fake_kernels_be
    keep = be.xp.asarray(np.tril(np.ones((4, 5), bool)))
    (ptr, sb, si, sj), arr = be._mask_params(keep, (2, 3, 4, 5))
    assert ptr is arr and isinstance(arr, be.xp.ndarray)
    assert (int(sb), int(si), int(sj)) == (0, 5, 1)  # a (T, S) mask is read in place
    (ptr, *strides), arr = be._mask_params(None, (2, 4, 5))
    assert arr is None and ptr == 0 and strides == [0, 0, 0]


@pytest.mark.parametrize("d", sorted(kr.FLASH_TILES))
@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_flash_launches(fake_kernels_be, d, dtype):
    be = fake_kernels_be
    q, k = _gpu(be, np.zeros((2, 3, 10, d), dtype), np.zeros((1, 3, 7, d), dtype))
    keep = be.xp.asarray(np.ones((10, 7), bool))
    out, lse = be.attention_forward(q, k, k, keep, 0.1, True)
    assert out.shape == q.shape and lse.shape == q.shape[:-1] and lse.dtype == np.float32
    grads = be.attention_backward(q, k, k, out, lse, q, None, 0.1, False)
    assert [g.shape for g in grads] == [q.shape, (2, 3, 7, d), (2, 3, 7, d)]
    assert all(g.dtype == dtype for g in grads)
    (fname, fgrid, fblock, _, fsmem), (bname, bgrid, bblock, _, bsmem) = launches()
    (bq, _), (_, bk) = kr.FLASH_TILES[d]
    suffix = cl.DTYPE_SUFFIX[np.dtype(dtype)]
    # one grid dimension (x: up to 2^31 - 1 blocks; y would stop at 65535 tiles)
    assert fname == f"tinyattn_flash_forward_d{d}_{suffix}" and fgrid == (6 * -(-10 // bq),)
    assert bname == f"tinyattn_flash_backward_d{d}_{suffix}" and bgrid == (6 * -(-7 // bk),)
    assert fblock == bblock == (kr.FLASH_THREADS,)
    assert fsmem == cl.flash_smem_bytes(d, "forward")
    assert bsmem == cl.flash_smem_bytes(d, "backward")


def test_flash_with_an_empty_batch_launches_nothing(fake_kernels_be):
    """CUDA rejects a grid with 0 blocks (the fake too): an empty batch returns empty results."""
    be = fake_kernels_be
    q, g = _gpu(be, np.zeros((0, 3, 10, 16), np.float32), np.zeros((0, 3, 10, 16), np.float32))
    out, lse = be.attention_forward(q, q, q, None, 0.1, True)
    assert out.shape == (0, 3, 10, 16) and lse.shape == (0, 3, 10)
    grads = be.attention_backward(q, q, q, out, lse, g, None, 0.1, True)
    assert [a.shape for a in grads] == [(0, 3, 10, 16)] * 3 and not launches()


@pytest.mark.parametrize("grid,block", [((0,), (32,)), ((2**31,), (256,)), ((1, 65536), (256,)),
                                        ((1, 1, 65536), (32,)), ((1,), (1025,)),
                                        ((1,), (64, 32)), ((1,), (1, 1, 65))])
def test_launches_are_checked_against_cudas_limits(fake_kernels_be, grid, block):
    with pytest.raises(BackendError, match=r"tinyattn_k: (cannot launch a (grid|block)|a block "
                                           r"of .* threads)"):
        cl.check_launch("tinyattn_k", grid, block)
    with pytest.raises(ValueError, match="cudaErrorInvalidConfiguration|threads"):  # the fake too
        fake_kernels_be.kernel("softmax.cu", "tinyattn_softmax_forward_warp1_f32")(
            grid, block, ())
    cl.check_launch("tinyattn_k", (2**31 - 1, 65535, 65535), (1024,))
    cl.check_launch("tinyattn_k", (1,), (16, 16, 4))


def test_the_shared_memory_opt_in_is_set_on_every_device(fake_kernels_be, monkeypatch):
    """CUDA keeps max_dynamic_shared_size_bytes per device: a kernel used on a second device
    needs it set there too (head dim 64 asks for 68 KB)."""
    be = fake_kernels_be
    (q,) = _gpu(be, np.zeros((1, 1, 9, 64), np.float32))
    be.attention_forward(q, q, q, None, 0.1, True)
    monkeypatch.setitem(fake_cupy.DEVICE, "current", 1)
    be.attention_forward(q, q, q, None, 0.1, True)
    assert [name for name, *_ in launches()] == ["tinyattn_flash_forward_d64_f32"] * 2


def test_the_masked_softmax_kernel_takes_only_bool_masks(fake_kernels_be):
    be = fake_kernels_be
    x, keep = _gpu(be, np.zeros((2, 5), np.float32), np.ones((2, 5), np.float32))
    with pytest.raises(DTypeError, match=r"scaled_masked_softmax: the mask must be bool .*got "
                                         r"float32"):
        be.scaled_masked_softmax(x, keep)
    assert not launches()


def test_rows_past_the_kernels_int_indexing_take_the_reference(fake_kernels_be):
    """A block-kernel thread indexes j0 + 4 * blockDim.x with int: rows longer than
    SOFTMAX_MAX_COLS (2^31 - 4097) are not given to the kernels."""
    longest = np.broadcast_to(np.float32(0), (1, kr.SOFTMAX_MAX_COLS))
    assert fake_kernels_be._softmax_ok(longest)
    assert not fake_kernels_be._softmax_ok(np.broadcast_to(np.float32(0),
                                                           (1, kr.SOFTMAX_MAX_COLS + 1)))
    assert kr.SOFTMAX_MAX_COLS - 1 + kr.BLOCK_UNROLL * 1024 <= 2**31 - 1


def test_flash_falls_back_where_no_kernel_fits(fake_kernels_be):
    be = fake_kernels_be
    q = be.xp.asarray(np.random.default_rng(0).standard_normal((1, 5, 48)))
    out, _ = be.attention_forward(q, q, q, None, 0.2, True)  # head dim 48 / float64: reference
    assert not launches() and isinstance(out, be.xp.ndarray)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_kernels_host_side(fake_kernels_be, approximate):
    be = fake_kernels_be
    xn = np.linspace(-4, 4, 11, dtype=np.float32)
    (x,) = _gpu(be, xn)
    out, saved = be.gelu_forward(x, approximate)
    gx = be.gelu_backward(be.xp.ones_like(x), x, saved, approximate)
    want_out, want_saved = kr.gelu_forward(xn, approximate)
    np.testing.assert_array_equal(out.get(), want_out)
    np.testing.assert_array_equal(saved.get(), want_saved)
    np.testing.assert_array_equal(gx.get(), kr.gelu_backward(np.ones_like(xn), xn, want_saved,
                                                               approximate))


def test_adam_kernel_host_side(fake_kernels_be):
    be = fake_kernels_be
    rng = np.random.default_rng(5)
    p, g, m = (rng.standard_normal(50).astype(np.float32) for _ in range(3))
    v = rng.random(50).astype(np.float32)
    pg, gg, mg, vg = _gpu(be, p, g, m, v)
    for step in (1, 2, 3):
        args = dict(lr=1e-2, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.1, step=step,
                    decoupled=True)
        kr.adam_update(p, g, m, v, **args)
        be.adam_update(pg, gg, mg, vg, **args)
    for a, b in ((pg, p), (mg, m), (vg, v)):
        np.testing.assert_allclose(a.get(), b, rtol=1e-6)


def test_kernels_compile_once_per_file(fake_kernels_be):
    be = fake_kernels_be
    (x,) = _gpu(be, np.zeros((2, 40), np.float32))
    be.softmax(x)
    be.softmax_backward(x, x)
    be.softmax(x.astype(np.float64))
    assert len(fake_cupy.RAW_MODULES) == 1 and set(be._modules) == {"softmax.cu"}
    assert f'#include "{cl.COMMON_HEADER}"' not in fake_cupy.RAW_MODULES[0].code
    assert fake_cupy.RAW_MODULES[0].options == cl.NVRTC_OPTIONS


def test_the_fake_is_gone_afterwards():
    """Runs after the tests above (file order): nothing of the fake is left behind."""
    made = B._made.get("cupy")
    assert made is None or made.xp.ndarray is not fake_cupy.FakeArray
    assert B._default is None or B.ALIASES.get(str(B._default).lower()) != "cupy"
    assert "TINYATTN_CUPY_KERNELS" not in os.environ
    for name in FAKE_NAMES:
        module = sys.modules.get(name)
        assert module is None or getattr(module, "ndarray", None) is not fake_cupy.FakeArray


# ---- the GPU benchmarks' own code, run on the fake with the kernels emulated ------------------

@pytest.mark.emulated
def test_the_gpu_benchmarks_run_end_to_end(fake_emu_be, monkeypatch, capsys):
    """benchmarks/softmax_gpu.py and attention.py --backend cupy, tiny shapes: every contender
    is checked against the others and timed (the fake's events say 1 ms), a row is printed for
    each, and nothing in the GPU-only code paths (events, device properties, the memory pool)
    fails before a GPU session gets to run them. torch is left out (it sees no GPU here)."""
    from tinyattn.bench import attention, softmax

    monkeypatch.setattr(softmax, "torch_cuda", lambda: None)
    monkeypatch.setattr(softmax, "shapes", lambda quick: [("8 x 1500", (8, 1500)),
                                                          ("attention T=40", (3, 40, 40))])
    assert softmax.main(["--quick", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for shape in ("8 x 1500", "attention T=40"):
        for variant in ("forward", "backward", "causal forward", "causal backward"):
            for who in ("kernel", "cupy composite"):
                assert re.search(rf"^{shape}\s+{variant}\s+{who}\s+\d", out, re.M), out
    assert attention.main(["--backend", "cupy", "--t", "40", "130", "--batch", "1", "--heads",
                           "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for t in ("40", "130"):
        assert re.search(rf"^\s+{t} flash kernel .*\n\s+{t} cupy composed ", out, re.M), out
    assert any(n.startswith("tinyattn_flash_forward_d64") for n, *_ in launches())
