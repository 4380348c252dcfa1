"""torch's device= on every function that makes a tensor (zeros(3, device="cuda")): another name
for backend=, on the NumPy backend and (faked) CuPy; the two naming different backends is an
error that names the function."""

import inspect

import numpy as np
import pytest

import tinyattn as ta

MAKERS = {  # name -> make(**where): each a call a torch user writes, with device= or backend=
    "tensor": lambda **w: ta.tensor([1.0, 2.0], **w),
    "as_tensor": lambda **w: ta.as_tensor([1, 2], **w),
    "zeros": lambda **w: ta.zeros(2, 3, **w),
    "ones": lambda **w: ta.ones((2,), **w),
    "full": lambda **w: ta.full((2,), 7.0, **w),
    "empty": lambda **w: ta.empty(4, **w),
    "eye": lambda **w: ta.eye(3, **w),
    "arange": lambda **w: ta.arange(5, **w),
    "linspace": lambda **w: ta.linspace(0, 1, 5, **w),
    "logspace": lambda **w: ta.logspace(0, 1, 3, **w),
    "randn": lambda **w: ta.randn(2, 2, **w),
    "rand": lambda **w: ta.rand(3, **w),
    "randint": lambda **w: ta.randint(0, 9, (4,), **w),
    "randperm": lambda **w: ta.randperm(5, **w),
    "normal": lambda **w: ta.normal(0.0, 1.0, (3,), **w),
    "zeros_like": lambda **w: ta.zeros_like(ta.ones(2), **w),
    "ones_like": lambda **w: ta.ones_like(ta.ones(2), **w),
    "full_like": lambda **w: ta.full_like(ta.ones(2), 3.0, **w),
    "empty_like": lambda **w: ta.empty_like(ta.ones(2), **w),
    "rand_like": lambda **w: ta.rand_like(ta.ones(2), **w),
    "randn_like": lambda **w: ta.randn_like(ta.ones(2), **w),
}


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS.keys())
def test_device_names_the_backend_as_backend_does(make, monkeypatch):
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    here = make()
    for device in ("cpu", "numpy", here.device):
        t = make(device=device)
        assert t.device == "cpu" and (t.shape, t.dtype) == (here.shape, here.dtype)
    for device in ("cuda", "cupy"):
        t = make(device=device)
        assert t.device == "cuda" and t.backend is ta.backends.backend("cupy")
        assert (t.shape, t.dtype) == (here.shape, here.dtype)
        assert make(device=device, backend="cupy").device == "cuda"  # the same one twice
    name = next(k for k, v in MAKERS.items() if v is make)
    with pytest.raises(ValueError, match=f"{name}: device='cuda' and backend='numpy' name two "
                                         "backends: give one"):
        make(device="cuda", backend="numpy")


def test_the_like_functions_default_to_the_tensors_own_backend(monkeypatch):
    import fake_cupy  # tests/support

    fake_cupy.install(monkeypatch, kernels=False)
    on_gpu = ta.ones(3, device="cuda")
    assert ta.zeros_like(on_gpu).device == "cuda"
    assert ta.zeros_like(on_gpu, device="cpu").device == "cpu"
    np.testing.assert_array_equal(ta.full_like(on_gpu, 2.0, device="cpu").numpy(), [2.0] * 3)


@pytest.mark.parametrize("name", MAKERS)
def test_the_signature_shows_device_as_torchs_does(name):
    fn = getattr(ta, name)
    assert inspect.signature(fn).parameters["device"].default is None
    assert fn.__name__ == name and fn.__doc__ == fn.__wrapped__.__doc__  # help() reads as before
    torch = pytest.importorskip("torch")
    assert "device" in getattr(torch, name).__doc__  # (torch documents it on each of them)


def test_cuda_is_available_says_whether_the_cupy_backend_can_run(monkeypatch):
    import sys
    import types

    import fake_cupy  # tests/support

    monkeypatch.setitem(sys.modules, "cupy", None)  # not installed: `import cupy` fails
    assert ta.cuda.is_available() is False and ta.cuda.device_count() == 0
    broken = types.ModuleType("cupy")

    def driver_error():
        raise RuntimeError("cudaErrorInsufficientDriver")

    broken.is_available = driver_error
    monkeypatch.setitem(sys.modules, "cupy", broken)
    assert ta.cuda.is_available() is False and ta.cuda.device_count() == 0
    fake_cupy.install(monkeypatch, kernels=False)  # a CuPy that sees two GPUs
    assert ta.cuda.is_available() is True and ta.cuda.device_count() == 2
    device = "cuda" if ta.cuda.is_available() else "cpu"  # the idiom, as in torch
    assert ta.zeros(2, device=device).device == "cuda"
