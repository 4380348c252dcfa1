"""inference_mode as torch's: grad mode cannot be turned back on inside it (enable_grad and
set_grad_enabled(True) record nothing there; inference_mode(False) does), tensors made in it
are inference tensors (is_inference(); a view of a normal tensor made there is none, a view or
detach() of an inference tensor is one), such a tensor cannot be made to require grad outside
inference mode, nor be saved for backward by a recorded op. Each case is compared with torch.
"""

import numpy as np
import pytest

import tinyattn as ta


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


def _grad_turned_on_inside(lib):
    x = lib.ones(2, requires_grad=True)
    found = {}
    with lib.inference_mode():
        with lib.enable_grad():
            found["enable_grad"] = (x * 2).requires_grad
        with lib.set_grad_enabled(True):
            found["set_grad_enabled block"] = (x * 2).requires_grad
        lib.set_grad_enabled(True)
        found["set_grad_enabled call"] = (x * 2).requires_grad
        lib.set_grad_enabled(False)
        found["decorated"] = lib.enable_grad()(lambda: (x * 2).requires_grad)()
        with lib.inference_mode(False):
            found["inference_mode(False)"] = (x * 2).requires_grad
            with lib.no_grad():
                found["no_grad inside inference_mode(False)"] = (x * 2).requires_grad
        found["inference mode still"] = lib.is_inference_mode_enabled()
    found["after"] = (x * 2).requires_grad
    with lib.no_grad(), lib.inference_mode(False):
        found["inference_mode(False) in no_grad"] = (x * 2).requires_grad
    return found


def test_enable_grad_inside_inference_mode_records_nothing_as_torchs(torch):
    ours, theirs = _grad_turned_on_inside(ta), _grad_turned_on_inside(torch)
    assert ours == theirs
    assert not ours["enable_grad"] and ours["inference_mode(False)"]


def _inference_flags(lib):
    normal = lib.ones(3)
    found = {"normal": normal.is_inference()}
    with lib.inference_mode():
        t = normal * 2
        found.update({
            "op": t.is_inference(), "ones": lib.ones(2).is_inference(),
            "zeros rg": lib.zeros(2, requires_grad=True).is_inference(),
            "randn": lib.randn(2).is_inference(), "tensor": lib.tensor([1.0]).is_inference(),
            "clone": normal.clone().is_inference(),
            "comparison": (normal > 0).is_inference(),
            "view of normal": normal[1:].is_inference(),
            "reshape of normal": normal.reshape(3).is_inference(),
            "detach of normal": normal.detach().is_inference(),
            "view of inference": t[1:].is_inference(),
        })
        with lib.no_grad():
            found["no_grad inside"] = (normal * 2).is_inference()
        with lib.inference_mode(False):
            found["inference_mode(False) inside"] = (normal * 2).is_inference()
            found["ones in inference_mode(False)"] = lib.ones(1).is_inference()
    with lib.no_grad():
        found["no_grad"] = (normal * 2).is_inference()
    found.update({
        "t after": t.is_inference(), "view of t after": t[0].is_inference(),
        "reshape of t after": t.reshape(3).is_inference(),
        "detach of t after": t.detach().is_inference(),
        "clone of t after": t.clone().is_inference(), "op on t after": (t * 1).is_inference(),
    })
    return found


def test_is_inference_as_torchs(torch):
    ours, theirs = _inference_flags(ta), _inference_flags(torch)
    assert ours == theirs
    assert ours["op"] and not ours["normal"]


def test_requires_grad_on_an_inference_tensor_is_refused_outside_inference_mode(torch):
    for lib in (ta, torch):
        with lib.inference_mode():
            t = lib.ones(2)
            inside = lib.ones(2)
            inside.requires_grad_(True)  # allowed inside (torch)
            assert inside.requires_grad and not (inside * 2).requires_grad
        with pytest.raises(RuntimeError, match="inference tensor outside InferenceMode"):
            t.requires_grad_(True)
        assert not t.requires_grad
        t.requires_grad_(False)  # (off: nothing to refuse)


def test_an_inference_tensor_saved_for_backward_is_refused_as_torchs(torch):
    for lib in (ta, torch):
        with lib.inference_mode():
            t = lib.tensor([1.0, 2.0]) * 2
        w = lib.tensor([3.0, 4.0], requires_grad=True)
        for use in (lambda w, t: w * t, lambda w, t: t[0] * w, lambda w, t: w @ t):
            with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for "
                                                   "backward"):
                use(w, t)
        with lib.inference_mode(False), pytest.raises(RuntimeError, match="cannot be saved"):
            w * t
        # not saved: fine; a clone is a normal tensor
        assert (w + t).requires_grad and not (t * 2).is_inference()
        (w * t.clone()).sum().backward()
        np.testing.assert_array_equal(np.asarray(w.grad.tolist()), [2.0, 4.0])
        with lib.inference_mode():
            assert not (w * t).requires_grad  # inside: nothing is recorded


def test_views_made_in_inference_mode_are_views_and_a_copying_view_is_refused(torch):
    for lib in (ta, torch):
        normal = lib.ones(2, 3)
        with lib.inference_mode():
            t = lib.ones(2, 3) * 1
            s = t.sum() * 1  # (0-d)
            for base in (normal, t, s):  # (a view of an inference tensor has no _base in
                v = base.reshape(-1)  # torch: its views are not tracked; the memory is shared)
                before = float(base.sum())
                v.add_(1)
                assert float(base.sum()) == float(v.sum()) == before + v.numel()
            assert normal.reshape(-1)._base is normal
            with pytest.raises((RuntimeError, ValueError), match="view"):
                t.t().view(6)  # (torch: a view cannot read that memory; reshape copies)
