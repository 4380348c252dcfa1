"""The tensor memory model as torch's: storage(), as_strided, unfold's view, writes into
overlapping memory, memory_format=preserve_format, frombuffer and Generator.device."""

import warnings

import numpy as np
import pytest

import tinyattn as ta


def _torch():
    torch = pytest.importorskip("torch")
    warnings.filterwarnings("ignore", "TypedStorage is deprecated")
    return torch


# ---- storage() / untyped_storage() -----------------------------------------------------------


def test_storage_of_a_view_is_its_bases_memory_as_torch():
    torch = _torch()
    for m in (torch, ta):
        a = m.arange(6.0).view(2, 3)
        s = a[1].storage()
        assert s.size() == len(s) == 6
        assert s.tolist() == list(s) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert s[2] == 2.0 and s[-1] == 5.0
        assert s.nbytes() == 24 and s.element_size() == 4
        assert s.data_ptr() == a.data_ptr() == a.storage().data_ptr()
        assert s.dtype == m.float32
        assert str(s.device) == "cpu"
        assert a[1].storage_offset() == 3


def test_storage_writes_reach_the_tensor_and_repr_is_torchs():
    torch = _torch()
    for m in (torch, ta):
        a = m.arange(3.0)
        s = a[1:].storage()
        s[0] = 9.0
        assert a.tolist() == [9.0, 1.0, 2.0]
        with pytest.raises(IndexError):
            s[3]
    r = repr(ta.tensor([1.5, 2.0]).storage())
    assert r.startswith(" 1.5\n 2.0\n[")
    assert r.endswith("TypedStorage(dtype=float32, device=cpu) of size 2]")
    assert repr(torch.tensor([1.5, 2.0]).storage()).startswith(" 1.5\n 2.0\n[")


def test_untyped_storage_counts_bytes_and_identifies_memory():
    torch = _torch()
    for m in (torch, ta):
        x = m.arange(3.0)
        u = x[1:].untyped_storage()
        assert u.nbytes() == u.size() == len(u) == 12
        assert u.data_ptr() == x.untyped_storage().data_ptr() == x.data_ptr()
        assert x.clone().untyped_storage().data_ptr() != u.data_ptr()
        assert x.t().untyped_storage().data_ptr() == u.data_ptr()
        assert x.detach().untyped_storage().data_ptr() == u.data_ptr()
        assert x.data.storage().data_ptr() == x.storage().data_ptr()
        assert "UntypedStorage(device=cpu) of size 12]" in repr(u)


def test_storage_of_an_expand_and_of_view_dtype():
    torch = _torch()
    for m in (torch, ta):
        x = m.arange(3.0)
        assert x.expand(4, 3).storage().size() == 3
        v = x.view(m.int32)
        assert v.storage().size() == 3 and v.storage().dtype == m.int32


# ---- as_strided ------------------------------------------------------------------------------


def test_as_strided_is_a_view_of_the_storage_as_torch():
    torch = _torch()
    for m in (torch, ta):
        x = m.arange(9.0)
        y = x.as_strided((2, 2), (3, 1), 1)
        assert y.tolist() == [[1.0, 2.0], [4.0, 5.0]]
        assert y.stride() == (3, 1) and y.storage_offset() == 1
        y[0, 0] = 100.0
        assert x[1].item() == 100.0
        assert m.as_strided(x, (3,), (2,)).tolist() == [0.0, 2.0, 4.0]
        assert x[2:].as_strided((2,), (1,)).tolist() == [2.0, 3.0]  # its own storage_offset
        assert x[2:].as_strided((2,), (1,), 0).tolist() == [0.0, 100.0]  # the storage's start


def test_as_strided_gradient_and_bounds_as_torch():
    torch = _torch()
    grads = []
    for m in (torch, ta):
        x = m.arange(6.0, requires_grad=True)
        y = (x * 1).as_strided((3, 2), (1, 1))  # overlapping windows: entries read twice
        (y * m.arange(6.0).view(3, 2)).sum().backward()
        grads.append(x.grad.tolist())
        with pytest.raises((RuntimeError, ValueError), match="out of bounds"):
            m.arange(6.0).as_strided((3, 3), (1, 1), 5)
    assert grads[0] == grads[1]


# ---- unfold is a view ------------------------------------------------------------------------


def test_unfold_is_a_view_as_torch():
    torch = _torch()
    for m in (torch, ta):
        x = m.arange(8.0)
        u = x.unfold(0, 3, 2)
        assert u.stride() == (2, 1) and u.data_ptr() == x.data_ptr()
        assert not u.is_contiguous()
        u[0, 0] = 100.0
        assert x[0].item() == 100.0
        w = m.arange(12.0).view(3, 4).unfold(1, 2, 1)
        assert w.shape == (3, 3, 2) and w.stride() == (4, 1, 1) and w.storage_offset() == 0


def test_unfold_gradient_adds_overlapping_windows():
    torch = _torch()
    grads = []
    for m in (torch, ta):
        x = m.arange(10.0, requires_grad=True)
        (x.unfold(0, 4, 3) * m.arange(12.0).view(3, 4)).sum().backward()
        grads.append(x.grad.tolist())
    assert grads[0] == grads[1]


def test_unfold_of_a_gather_along_inner_dims_reads_its_own_memory():
    # (NumPy allocates a gather along an inner dim with its dims permuted: one dense run all
    # the same, so windows over it and its storage() are views of that memory, as torch's)
    idx = ta.tensor([1, 0, 1, 2, 3, 2])
    x = ta.randn(2, 3, 4, 4, dtype=ta.float64, requires_grad=True)
    y = x.index_select(2, idx).index_select(3, idx)
    windows = y.unfold(2, 3, 1)
    assert windows.data_ptr() == y.data_ptr()
    np.testing.assert_array_equal(windows.numpy(), y.contiguous().unfold(2, 3, 1).numpy())
    assert y.storage().data_ptr() == y.data_ptr()
    assert y.storage()[y.storage_offset()] == y.flatten()[0].item()
    weights = ta.randn(*windows.shape, dtype=ta.float64)
    (g,) = ta.autograd.grad((windows * weights).sum(), x)
    (expected,) = ta.autograd.grad((y.contiguous().unfold(2, 3, 1) * weights).sum(), x)
    np.testing.assert_allclose(g.numpy(), expected.numpy())


# ---- in-place writes into overlapping memory ------------------------------------------------


@pytest.mark.parametrize("change", [
    lambda x, m: x.add_(1), lambda x, m: x.mul_(2), lambda x, m: x.copy_(m.ones(2, 3)),
    lambda x, m: x.exp_(), lambda x, m: x.normal_(), lambda x, m: x.__iadd__(1)])
def test_writing_into_an_expand_is_torchs_error(change):
    torch = _torch()
    for m in (torch, ta):
        x = m.zeros(1, 3).expand(2, 3)
        with pytest.raises((RuntimeError, ValueError),
                           match="more than one element of the written-to tensor refers to a "
                                 "single memory location"):
            change(x, m)


# ---- memory_format=preserve_format keeps the strides of a dense tensor -----------------------


def test_preserve_format_keeps_a_transposes_strides_as_torch():
    torch = _torch()
    for m in (torch, ta):
        x = m.zeros(2, 3).t()
        assert x.clone().stride() == (1, 3)
        assert x.clone(memory_format=m.preserve_format).stride() == (1, 3)
        assert x.clone(memory_format=m.contiguous_format).stride() == (2, 1)
        for like in (m.empty_like, m.zeros_like, m.ones_like, m.rand_like, m.randn_like):
            assert like(x).stride() == (1, 3)
            assert like(x, memory_format=m.contiguous_format).stride() == (2, 1)
        assert m.full_like(x, 2.0).stride() == (1, 3)
        assert m.zeros_like(m.zeros(2, 3, 4).permute(2, 0, 1)).stride() == (1, 12, 4)
        assert m.zeros(2, 3, 8)[:, :, ::2].permute(2, 0, 1).clone().stride() == (1, 12, 4)
        assert m.zeros(3).expand(2, 3).clone().stride() == (3, 1)
        assert x.contiguous().stride() == (2, 1) and x.contiguous().is_contiguous()


def test_a_preserved_clone_keeps_its_gradient():
    x = ta.arange(6.0, requires_grad=True)
    y = x.view(2, 3).t().clone()
    assert y.stride() == (1, 3)
    (y * ta.arange(6.0).view(3, 2)).sum().backward()
    assert x.grad.tolist() == [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]


# ---- frombuffer ------------------------------------------------------------------------------


def test_frombuffer_shares_the_buffer_as_torch():
    torch = _torch()
    for m in (torch, ta):
        b = bytearray(b"\x01\x02\x03\x04")
        t = m.frombuffer(b, dtype=m.uint8)
        t[0] = 9
        assert t.tolist() == list(b) == [9, 2, 3, 4]
        raw = bytearray(np.arange(4, dtype=np.float32).tobytes())
        assert m.frombuffer(raw, dtype=m.float32, count=2, offset=4).tolist() == [1.0, 2.0]
        with pytest.raises(ValueError):
            m.frombuffer(bytearray(b"\x01\x02\x03"), dtype=m.float32)


# ---- Generator.device -------------------------------------------------------------------------


def test_generator_device_is_a_device_as_a_tensors():
    torch = _torch()
    for m in (torch, ta):
        g = m.Generator()
        assert g.device == m.zeros(1).device == m.device("cpu")
        assert repr(g.device) == "device(type='cpu')" and g.device.type == "cpu"
