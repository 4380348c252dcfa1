"""The names torch scripts call at setup (seeds, RNG state, determinism, threads, cuDNN flags,
legacy tensor types, data_ptr, bfloat16, autocast, GradScaler, compile, accelerator): each
exists, and does what torch's does or says plainly why it cannot."""


import numpy as np
import pytest

import tinyattn as ta
from tinyattn import backends, runtime

torch = pytest.importorskip("torch")


# ---- seeds and random state --------------------------------------------------------------------


def test_cuda_seeds_are_silent_without_a_gpu_and_wait_for_the_backend():
    for lib in (ta, torch):
        assert lib.cuda.manual_seed(3) is None and lib.cuda.manual_seed_all(4) is None
    if "cupy" not in backends.made():
        assert backends._pending.get("cupy") == 4  # (for a CuPy backend made later)
        ta.manual_seed(0)  # a later manual_seed seeds every backend, as torch's
        assert "cupy" not in backends._pending
    assert ta.cuda.is_bf16_supported() is False


def test_get_rng_state_restores_the_draws_exactly():
    ta.manual_seed(5)
    ta.randn(3)
    state = ta.get_rng_state()
    assert state.dtype == ta.uint8 and state.ndim == 1  # as torch's ByteTensor
    a, b = ta.randn(4), ta.rand(2, 2)
    ta.randn(7)
    ta.set_rng_state(state)
    np.testing.assert_array_equal(ta.randn(4).numpy(), a.numpy())
    np.testing.assert_array_equal(ta.rand(2, 2).numpy(), b.numpy())
    assert ta.initial_seed() == 5
    with pytest.raises(TypeError, match="uint8 tensor get_rng_state"):
        ta.set_rng_state(ta.zeros(3))
    with pytest.raises(ValueError, match="not a state tinyattn's get_rng_state"):
        ta.set_rng_state(ta.tensor(torch.get_rng_state().numpy()))


def test_seed_picks_a_fresh_seed_that_initial_seed_reports():
    s = ta.seed()
    assert isinstance(s, int) and ta.initial_seed() == s
    a = ta.randn(3)
    ta.manual_seed(s)
    np.testing.assert_array_equal(ta.randn(3).numpy(), a.numpy())


# ---- determinism, threads, cuDNN and other flags -----------------------------------------------


def test_determinism_is_taken_and_reported():
    try:
        for lib in (ta, torch):
            assert lib.are_deterministic_algorithms_enabled() is False
            lib.use_deterministic_algorithms(True, warn_only=True)
            assert lib.are_deterministic_algorithms_enabled() is True
            assert lib.is_deterministic_algorithms_warn_only_enabled() is True
            lib.use_deterministic_algorithms(False)
            assert lib.are_deterministic_algorithms_enabled() is False
    finally:
        ta.use_deterministic_algorithms(False)
        torch.use_deterministic_algorithms(False)
    with pytest.raises(TypeError):
        ta.use_deterministic_algorithms("yes")


def test_set_num_threads_sets_numpys_blas_threads_and_reports_the_count(monkeypatch):
    import threadpoolctl

    def blas_threads():
        return {p["num_threads"] for p in threadpoolctl.threadpool_info()
                if p["user_api"] == "blas"}

    monkeypatch.setattr(runtime, "_threads", {"count": None, "limiter": None})
    with threadpoolctl.threadpool_limits(limits=2):  # (gives the pools their settings back)
        assert ta.get_num_threads() == 2  # the BLAS pool's own count, nothing set yet
        ta.set_num_threads(1)
        assert blas_threads() == {1} and ta.get_num_threads() == 1
        ta.set_num_threads(3)
        assert blas_threads() == {3} and ta.get_num_threads() == 3
        for bad in (0, -1, 1.5, True, "2"):
            with pytest.raises(ValueError, match="positive integer"):
                ta.set_num_threads(bad)
        assert blas_threads() == {3}


def test_backend_flags_are_settable_and_answer_as_torchs_without_cuda():
    import tinyattn.backends.cudnn as cudnn

    assert cudnn is ta.backends.cudnn
    for name in ("deterministic", "benchmark", "enabled", "allow_tf32"):
        assert getattr(cudnn, name) == getattr(torch.backends.cudnn, name)
    old = cudnn.deterministic, cudnn.benchmark, ta.backends.cuda.matmul.allow_tf32
    try:
        cudnn.deterministic, cudnn.benchmark = True, False
        ta.backends.cuda.matmul.allow_tf32 = True
        assert ta.backends.cudnn.deterministic and ta.backends.cuda.matmul.allow_tf32
    finally:
        cudnn.deterministic, cudnn.benchmark, ta.backends.cuda.matmul.allow_tf32 = old
    assert cudnn.is_available() is torch.backends.cudnn.is_available() is False
    assert ta.backends.mps.is_available() is torch.backends.mps.is_available() is False
    assert ta.accelerator.is_available() == ta.cuda.is_available()
    if not ta.cuda.is_available():
        assert ta.accelerator.current_accelerator() is None
        assert ta.accelerator.device_count() == 0


def test_compile_returns_the_model_or_function_unchanged():
    model = ta.nn.Linear(2, 2)
    assert ta.compile(model) is model
    assert ta.compile(model, mode="max-autotune", fullgraph=True, dynamic=False) is model

    @ta.compile
    def f(x):
        return x * 2

    @ta.compile(mode="reduce-overhead")
    def g(x):
        return x + 1

    assert f(ta.ones(1)).item() == 2.0 and g(ta.ones(1)).item() == 2.0


# ---- legacy tensor types, data_ptr, bfloat16 ----------------------------------------------------


@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor",
                                  "IntTensor", "ShortTensor", "CharTensor", "ByteTensor",
                                  "BoolTensor"])
def test_legacy_tensor_types_make_and_recognise_as_torch(name):
    ours, theirs = getattr(ta, name), getattr(torch, name)
    for args in [([1, 0, 2],), ([[1.7, 0.2], [0.0, 2.5]],), (3,), (2, 3), (), ([],),
                 (np.array([1.0, 2.0]),), (ta.Size([2, 1]),)]:
        targs = tuple(torch.Size(a) if isinstance(a, ta.Size) else a for a in args)
        a, t = ours(*args), theirs(*targs)
        assert tuple(a.shape) == tuple(t.shape), args
        assert str(a.dtype) == str(t.dtype).removeprefix("torch.").replace("bool", "bool")
        if args and not isinstance(args[0], (int, ta.Size)):  # (a shape: torch leaves
            # the memory uninitialised, tinyattn zeros it)
            np.testing.assert_array_equal(a.numpy(), t.numpy())
        assert isinstance(a, ours) and isinstance(t, theirs)
    x = ours([1])
    assert ours(x) is x
    other = ta.DoubleTensor if name != "DoubleTensor" else ta.FloatTensor
    assert not isinstance(other([1]), ours)
    with pytest.raises(TypeError):
        ours(other([1]))
    with pytest.raises(TypeError, match="data must be a sequence"):
        ours(2.5)
    with pytest.raises(RuntimeError, match="legacy constructor expects device type: cpu"):
        ours(2, device="cuda")


def test_legacy_types_as_type_arguments():
    assert ta.LongTensor([1.7, -1.7]).tolist() == torch.LongTensor([1.7, -1.7]).tolist()
    x = ta.zeros(2)
    assert x.type(ta.DoubleTensor).dtype == ta.float64
    assert isinstance(ta.nn.Parameter(ta.zeros(2)), ta.FloatTensor)
    assert repr(ta.FloatTensor) == "<class 'tinyattn.FloatTensor'>"


def test_data_ptr_is_the_address_of_the_first_entry_as_torchs():
    x, t = ta.zeros(3, 4), torch.zeros(3, 4)
    assert isinstance(x.data_ptr(), int)
    assert x[1].data_ptr() - x.data_ptr() == t[1].data_ptr() - t.data_ptr() == 16
    assert x.view(12).data_ptr() == x.data_ptr() and x.detach().data_ptr() == x.data_ptr()
    assert x.clone().data_ptr() != x.data_ptr()


def test_bfloat16_is_a_name_that_refuses_use():
    assert str(ta.bfloat16) == "bfloat16"
    assert ta.zeros(2).dtype not in {ta.float16, ta.bfloat16}
    assert (ta.bfloat16 if ta.cuda.is_bf16_supported() else ta.float16) == ta.float16
    for use in (lambda: ta.zeros(2, dtype=ta.bfloat16), lambda: ta.zeros(2).to(ta.bfloat16),
                lambda: ta.tensor([1.0], dtype=ta.bfloat16)):
        with pytest.raises(ta.DTypeError, match="bfloat16 is not supported"):
            use()


# ---- autocast and GradScaler -------------------------------------------------------------------


def test_disabled_autocast_is_an_exact_no_op_and_enabled_is_refused():
    x = ta.ones(2, 2)
    for make in (lambda: ta.autocast("cuda", dtype=ta.float16, enabled=False),
                 lambda: ta.amp.autocast(device_type="cpu", enabled=False),
                 lambda: ta.cuda.amp.autocast(enabled=False),
                 lambda: ta.autocast("cpu", dtype=ta.float32)):
        with make():
            y = x @ x
        assert y.dtype == ta.float32

        @make()
        def f(z):
            return z * 2

        assert f(x).dtype == ta.float32
    for make in (lambda: ta.autocast("cuda"), lambda: ta.autocast("cpu"),
                 lambda: ta.autocast("cuda", dtype=ta.float16),
                 lambda: ta.autocast("cpu", dtype=ta.bfloat16), lambda: ta.cuda.amp.autocast()):
        with pytest.raises(TypeError, match="is not supported: tinyattn computes each op in"):
            make()


@pytest.mark.filterwarnings("ignore:`torch.cuda.amp.GradScaler:FutureWarning")
def test_a_disabled_grad_scaler_is_an_exact_no_op_as_torchs():
    for lib in (ta, torch):
        for scaler in (lib.amp.GradScaler(enabled=False), lib.cuda.amp.GradScaler(enabled=False),
                       lib.amp.GradScaler("cpu", enabled=False)):
            w = lib.ones(2, requires_grad=True)
            opt = lib.optim.SGD([w], lr=0.5)
            loss = (w * 3).sum()
            assert scaler.scale(loss) is loss
            loss.backward()
            assert scaler.unscale_(opt) is None and scaler.get_scale() == 1.0
            assert scaler.step(opt) is None and scaler.update() is None
            assert w.detach().numpy().tolist() == [-0.5, -0.5]
            assert scaler.state_dict() == {} and not scaler.is_enabled()


def test_an_enabled_grad_scaler_scales_skips_and_grows_as_torchs():
    def run(lib):
        w = lib.tensor([1.0, -2.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        out = []
        with np.errstate(all="ignore"):
            for i, x in enumerate([1.0, 2.0, float("inf"), 0.5, 3.0, 1.0]):
                opt.zero_grad()
                loss = (w * x).sum() * w.sum()
                scaler.scale(loss).backward()
                if i == 3:
                    scaler.unscale_(opt)  # (as before clipping)
                    with pytest.raises(RuntimeError, match="already been called"):
                        scaler.unscale_(opt)
                scaler.step(opt)
                scaler.update()
                out.append((scaler.get_scale(), w.detach().numpy().tolist()))
        return out, scaler.state_dict()

    assert run(ta) == run(torch)


@pytest.mark.filterwarnings("ignore:`torch.cuda.amp.GradScaler:FutureWarning")
def test_an_enabled_cuda_grad_scaler_without_cuda_disables_itself_as_torchs():
    if ta.cuda.is_available():
        pytest.skip("CUDA is here: the scaler stays enabled")
    for lib in (ta, torch):
        with pytest.warns(UserWarning, match="CUDA is not available.  Disabling"):
            scaler = lib.cuda.amp.GradScaler()
        assert not scaler.is_enabled()


def test_an_enabled_grad_scaler_refuses_float16_gradients_as_torchs():
    for lib in (ta, torch):
        w = lib.ones(2, dtype=lib.float16, requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu")
        scaler.scale(lib.ones(1))
        w.grad = lib.ones(2, dtype=lib.float16)
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            scaler.step(opt)
