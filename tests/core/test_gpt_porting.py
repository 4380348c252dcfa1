"""minGPT / nanoGPT-style training code ported from torch to tinyattn: each test is a defect a
torch user met running such a script with `torch` swapped for `tinyattn`."""

import itertools

import pytest

import tinyattn as ta
import tinyattn.utils.data as tud


def test_random_sampler_huge_num_samples_is_lazy():
    # minGPT's Trainer: RandomSampler(ds, replacement=True, num_samples=int(1e10)); torch draws
    # the indices 32 at a time, tinyattn drew all 1e10 at once (a 74.5 GiB allocation)
    ds = list(range(7))
    for replacement in (True, False):
        sampler = tud.RandomSampler(ds, replacement=replacement, num_samples=int(1e10),
                                    generator=ta.Generator().manual_seed(0))
        first = list(itertools.islice(iter(sampler), 40))
        assert len(first) == 40 and set(first) <= set(ds)
        assert len(sampler) == int(1e10)
    loader = tud.DataLoader(ds, batch_size=4, sampler=tud.RandomSampler(
        ds, replacement=True, num_samples=int(1e10)))
    assert next(iter(loader)).shape == (4,)


def test_pin_memory_then_non_blocking_to():
    # nanoGPT's get_batch on a GPU: x.pin_memory().to(device, non_blocking=True)
    x = ta.arange(6).view(2, 3)
    y = x.pin_memory().to("cpu", non_blocking=True)
    assert y.tolist() == x.tolist() and y.dtype == ta.long
    assert x.is_pinned() is False


def test_float32_matmul_precision():
    # build-nanogpt's first line: torch.set_float32_matmul_precision('high')
    assert ta.get_float32_matmul_precision() == "highest"
    try:
        ta.set_float32_matmul_precision("high")
        assert ta.get_float32_matmul_precision() == "high"
        with pytest.warns(UserWarning, match="bogus is not one of"):
            ta.set_float32_matmul_precision("bogus")
        assert ta.get_float32_matmul_precision() == "high"
    finally:
        ta.set_float32_matmul_precision("highest")


def test_sdp_backend_switches():
    # nanoGPT forks: torch.backends.cuda.enable_flash_sdp(True) and friends
    cuda = ta.backends.cuda
    for kind in ("flash", "mem_efficient", "math", "cudnn"):
        assert getattr(cuda, f"{kind}_sdp_enabled")() is True
        assert getattr(cuda, f"enable_{kind}_sdp")(False) is None
        assert getattr(cuda, f"{kind}_sdp_enabled")() is False
        getattr(cuda, f"enable_{kind}_sdp")(True)
        assert getattr(cuda, f"{kind}_sdp_enabled")() is True


def test_optimizer_signatures_name_their_settings():
    # nanoGPT: fused_available = 'fused' in inspect.signature(torch.optim.AdamW).parameters
    import inspect

    torch = pytest.importorskip("torch")
    for name in ("SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
                 "Adadelta"):
        ours = inspect.signature(getattr(ta.optim, name)).parameters
        theirs = inspect.signature(getattr(torch.optim, name)).parameters
        assert set(theirs) <= set(ours), (name, set(theirs) - set(ours))
        for key, p in theirs.items():  # the same defaults, by position or by keyword alike
            # (torch's how-to-run switches, which a few of its optimizers also take by
            # position, are keyword-only here)
            if key not in ("foreach", "maximize", "capturable", "differentiable"):
                assert ours[key].kind == p.kind, (name, key)
            if key != "params":
                assert ours[key].default == p.default, (name, key)
    assert "fused" in inspect.signature(ta.optim.AdamW).parameters

    class Custom(ta.optim.AdamW):  # a subclass with an __init__ of its own: its signature
        def __init__(self, params, lr=0.5):
            super().__init__(params, lr=lr)

    class Plain(ta.optim.AdamW):
        pass

    assert list(inspect.signature(Custom).parameters) == ["params", "lr"]
    assert inspect.signature(Plain) == inspect.signature(ta.optim.AdamW)


@pytest.mark.parametrize("legacy", [False, True])
def test_loading_a_torch_save_file_says_so(tmp_path, legacy):
    # a model trained in torch, sampled in tinyattn: ta.load("ckpt.pt") of torch.save's file
    # said "a damaged or truncated zip", as if the file were broken
    torch = pytest.importorskip("torch")
    path = tmp_path / "ckpt.pt"
    torch.save({"model": {"w": torch.ones(2)}, "iter_num": 3}, path,
               _use_new_zipfile_serialization=not legacy)
    with pytest.raises(ta.errors.CheckpointError, match="written by torch.save") as info:
        ta.load(path)
    assert "damaged" not in str(info.value)
