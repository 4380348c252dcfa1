"""torch's device strings with an index ("cpu:0", "cuda:0") name tinyattn's backends wherever
a device is taken (Tensor.to, the factories' device=, the new_* methods' device=, which were
missing); a second GPU is refused by name (tinyattn runs on one); ta.device refuses what
torch refuses (an unknown type, None, a negative or repeated index)."""

import pytest

import tinyattn as ta
from tinyattn.errors import BackendError


@pytest.mark.parametrize("make", [
    lambda d: ta.ones(2, 3).to(d), lambda d: ta.ones(2, device=d), lambda d: ta.zeros(2, device=d),
    lambda d: ta.ones(2).new_ones(2, device=d), lambda d: ta.ones(2).new_zeros((2,), device=d),
    lambda d: ta.ones(2).new_empty(2, device=d), lambda d: ta.ones(2).new_full((2,), 1.0, device=d),
    lambda d: ta.ones(2).new_tensor([1.0], device=d), lambda d: ta.nn.Linear(2, 2).to(d).weight,
], ids=["to", "ones", "zeros", "new_ones", "new_zeros", "new_empty", "new_full", "new_tensor",
        "Module.to"])
@pytest.mark.parametrize("device", ["cpu", "cpu:0", "cpu:1", ta.device("cpu:0"), "numpy"])
def test_cpu_device_strings_name_the_numpy_backend(make, device):
    t = make(device)
    assert t.device == "cpu"
    assert t.backend.name == "numpy"


def test_a_second_gpu_is_refused_by_name():
    with pytest.raises(BackendError, match="device 'cuda:1': tinyattn runs on one GPU"):
        ta.zeros(2).to("cuda:1")
    with pytest.raises(BackendError, match="runs on one GPU"):
        ta.ones(2, device="cuda:2")


@pytest.mark.parametrize(("args", "error"), [
    (("nope",), RuntimeError), (("cpu:-1",), RuntimeError), (("cuda:abc",), RuntimeError),
    ((None,), TypeError), ((0,), TypeError), (("cpu:0", 0), RuntimeError),
    (("cpu", -1), RuntimeError), (("cpu", 1.5), RuntimeError),
])
def test_device_refuses_what_torch_refuses(args, error):
    with pytest.raises(error):
        ta.device(*args)
    torch = pytest.importorskip("torch")
    with pytest.raises((RuntimeError, TypeError)):
        torch.device(*args)


def test_device_reads_as_torch():
    d = ta.device("cuda:0")
    assert (d.type, d.index) == ("cuda", 0)
    assert repr(d) == "device(type='cuda', index=0)"
    assert ta.device("cpu", 0).index == 0
    assert ta.device("cpu").index is None
    assert ta.ones(2).device == ta.device("cpu")


@pytest.mark.parametrize("name", ["new_zeros", "new_ones", "new_empty"])
def test_the_new_methods_read_their_device(name):
    with pytest.raises(BackendError, match="unknown backend 'nope'"):
        getattr(ta.ones(2), name)(2, device="nope")
    with pytest.raises(BackendError, match="runs on one GPU"):
        getattr(ta.ones(2), name)(2, device="cuda:1")
    with pytest.raises(BackendError, match="runs on one GPU"):
        ta.ones(2).new_tensor([1.0], device="cuda:1")
