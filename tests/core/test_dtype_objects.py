"""The dtype names (ta.float32, ta.long, ta.get_default_dtype(), ...) are the very objects a
tensor's .dtype gives, so they hash as they compare: torch scripts key dicts and sets by dtype
(`x.dtype in {torch.float16, torch.bfloat16}`, `{torch.float32: "fp32"}[x.dtype]`)."""

import copy
import io
import pickle

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")

# every dtype name tinyattn exports, with torch's name for it
NAMES = {"float16": "float16", "float32": "float32", "float64": "float64", "half": "half",
         "float": "float", "double": "double", "int8": "int8", "int16": "int16",
         "short": "short", "int32": "int32", "int": "int", "int64": "int64", "long": "long",
         "uint8": "uint8", "bool": "bool", "bool_": "bool"}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_dtype_name_hashes_as_the_tensors_dtype(name):
    dt = getattr(ta, name)
    x = ta.zeros(2, dtype=dt)
    tx = torch.zeros(2, dtype=getattr(torch, NAMES[name]))
    assert isinstance(dt, np.dtype) and isinstance(dt, ta.dtype)
    assert x.dtype == dt and hash(x.dtype) == hash(dt)
    assert (x.dtype in {dt}) is (tx.dtype in {getattr(torch, NAMES[name])}) is True
    assert {dt: "found"}.get(x.dtype) == "found"
    assert str(x.dtype) == str(tx.dtype).removeprefix("torch.")


def test_dtype_sets_and_dicts_as_torch():
    x, tx = ta.zeros(3), torch.zeros(3)
    assert (x.dtype in {ta.float16, ta.float32}) is (tx.dtype in {torch.float16,
                                                                 torch.float32}) is True
    names, tnames = {ta.float32: "fp32", ta.float16: "fp16"}, {torch.float32: "fp32",
                                                               torch.float16: "fp16"}
    assert names.get(x.dtype) == tnames.get(tx.dtype) == "fp32"
    assert names[x.half().dtype] == tnames[tx.half().dtype] == "fp16"
    assert ta.get_default_dtype() in {ta.float32} and ta.float in {x.dtype}
    assert ta.long in {ta.tensor([1, 2]).dtype} and ta.bool in {(x > 0).dtype}
    assert ta.int64 is ta.long and ta.float32 is ta.float and ta.float16 is ta.half
    assert ta.get_default_dtype() is ta.float32


def test_isinstance_of_ta_dtype_as_torch():
    assert isinstance(ta.zeros(1).dtype, ta.dtype) and isinstance(torch.zeros(1).dtype,
                                                                  torch.dtype)
    assert isinstance(ta.long, ta.dtype) and not isinstance(ta.zeros(1), ta.dtype)
    assert not isinstance("float32", ta.dtype)
    assert ta.dtype is np.dtype  # (NumPy's class: its attributes, not torch.dtype's)


def test_dtype_names_work_where_dtypes_are_taken():
    x = ta.tensor([1.5, -2.5])
    assert x.to(ta.long).tolist() == [1, -2] and x.to(ta.bool).tolist() == [True, True]
    assert ta.zeros(2, dtype=ta.double).dtype == np.float64 and x.type(ta.half).dtype == np.float16
    assert x.view(ta.int32).dtype == np.int32 and x.sum(dtype=ta.float64).dtype == np.float64
    assert ta.arange(3, dtype=ta.uint8).dtype == np.uint8 and x.new_zeros(1, dtype=ta.int8).dtype \
        == np.int8
    assert ta.finfo(ta.half).max == 65504 and ta.iinfo(ta.short).max == 32767
    assert np.zeros(2, dtype=ta.float16).dtype == np.float16  # NumPy takes them too
    assert ta.nn.Linear(2, 2).to(ta.float64).weight.dtype == np.float64
    before = ta.get_default_dtype()
    try:
        ta.set_default_dtype(ta.double)
        assert ta.get_default_dtype() is ta.float64 and ta.zeros(1).dtype == ta.double
    finally:
        ta.set_default_dtype(before)


def test_torch_dtypes_still_convert_and_dtypes_pickle():
    assert ta.zeros(2, dtype=torch.float16).dtype is ta.float16
    assert ta.tensor([1], dtype=torch.long).dtype in {ta.long}
    for dt in (ta.float32, ta.long, ta.bool):
        assert pickle.loads(pickle.dumps(dt)) == dt and copy.deepcopy(dt) == dt
    x = ta.tensor([1, 2], dtype=ta.int16)
    buf = io.BytesIO()
    ta.save({"x": x}, buf)
    buf.seek(0)
    assert ta.load(buf)["x"].dtype in {ta.int16}
    assert pickle.loads(pickle.dumps(x)).dtype in {ta.int16}


def test_reprs_are_unchanged():
    assert repr(ta.zeros(2)) == "tensor([0., 0.])"
    assert repr(ta.zeros(2, dtype=ta.float64)) == "tensor([0., 0.], dtype=float64)"
    assert str(ta.float32) == "float32" and str(ta.zeros(1).dtype) == "float32"
