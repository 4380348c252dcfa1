"""DataLoader's worker options, which tinyattn keeps (it loads in one process) but torch
checks: a negative or non-int num_workers, a negative timeout, prefetch_factor or
persistent_workers without workers are refused as torch refuses them, so torch code with a
wrong one fails here too. What torch takes stays taken (num_workers > 0 warns once)."""

import pytest

import tinyattn as ta

DATA = list(range(10))

REFUSED = [
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative"),
    ({"timeout": -1}, ValueError, "timeout option should be non-negative"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), REFUSED,
                         ids=[str(k) for k, _, _ in REFUSED])
def test_worker_options_torch_refuses(kwargs, error, message):
    with pytest.raises(error, match=f"^DataLoader: {message}"):
        ta.utils.data.DataLoader(DATA, **kwargs)
    torch = pytest.importorskip("torch")
    with pytest.raises((ValueError, TypeError)):
        torch.utils.data.DataLoader(DATA, **kwargs)


def test_a_num_workers_of_no_int_is_refused_at_once():
    # (torch's DataLoader takes num_workers=1.5 and fails at the first batch)
    with pytest.raises(TypeError, match="^DataLoader: num_workers must be an int, got 1.5"):
        ta.utils.data.DataLoader(DATA, num_workers=1.5)


def test_worker_options_torch_takes():
    with pytest.warns(UserWarning, match="loads the batches in this process"):
        loader = ta.utils.data.DataLoader(DATA, batch_size=4, num_workers=2, prefetch_factor=2,
                                          persistent_workers=True, timeout=1.5)
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers,
            loader.timeout) == (2, 2, True, 1.5)
