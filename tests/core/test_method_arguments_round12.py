"""Int arguments of Tensor methods that torch takes only as ints (select's index, tril's and
triu's diagonal, rot90's k, narrow's start and length, diagonal's offset, topk's and
kthvalue's k, the counts and dims of repeat, tile, flip, split and tensor_split): a float, a
bool, None or a tuple is refused naming the method, where it was used as another number
(tril(1.5) as 1.5, rot90(1.5) turned 1.5 times mod 4, select(0, None) added a dim,
select(0, (0, 0)) picked twice) or met a raw Python error; negative split sizes and repeat
counts are refused as torch refuses them. What torch takes (NumPy ints, integer 0-d tensors)
still gives its values."""

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.errors import ShapeError

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)

# (method, args, the message's start)
REFUSED = [
    *[("select", (0, bad), "select: index must be an int") for bad in (1.5, True, None, (0, 0))],
    *[("tril", (bad,), "tril: diagonal must be an int") for bad in (1.5, True, None, "a")],
    *[("triu", (bad,), "triu: diagonal must be an int") for bad in (1.5, True, None)],
    *[("rot90", (bad, (0, 1)), "rot90: k must be an int") for bad in (1.5, True, None)],
    *[("narrow", (0, bad, 1), "narrow: start must be an int") for bad in (1.5, True, None, "a")],
    ("narrow", (0, 0, 1.5), "narrow: length must be an int"),
    *[("diagonal", (bad,), "diagonal: offset must be an int") for bad in (1.5, True, None)],
    ("flip", (True,), "flip: dims must be ints"),
    ("repeat", (True, 1, 1), "repeat: sizes must be ints"),
    ("tile", (True,), "tile: dims must be ints"),
    ("split", (True,), "split: split_size_or_sections must be ints"),
    *[("split", (bad,), "split: split_size_or_sections must be an int or a tuple of ints")
      for bad in (1.5, None, "a")],
    ("split", ([1, 1.0],), "split: split_size_or_sections must be an int"),
    ("tensor_split", (True,), "tensor_split: indices_or_sections must be ints"),
    *[("tensor_split", (bad,), "tensor_split: indices_or_sections must be an int or a tuple")
      for bad in (1.5, None, "a")],
]


def _ids(cases):
    return [f"{name}{args}" for name, args, _ in cases]


@pytest.mark.parametrize(("name", "args", "message"), REFUSED, ids=_ids(REFUSED))
def test_refused_naming_the_method(name, args, message):
    with pytest.raises(TypeError) as info:
        getattr(ta.tensor(X), name)(*args)
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(("name", "args", "message"), REFUSED, ids=_ids(REFUSED))
def test_torch_refuses_them_too(name, args, message):
    torch = pytest.importorskip("torch")
    with pytest.raises((TypeError, RuntimeError)):
        getattr(torch.tensor(X), name)(*args)


@pytest.mark.parametrize("name", ["topk", "kthvalue"])
def test_a_bool_is_no_k(name):
    with pytest.raises(IndexError, match=f"^{name}: k must be an int"):
        getattr(ta.tensor(X), name)(True)


@pytest.mark.parametrize(("name", "args"), [("split", ([4, -1], 1)),
                                            ("split_with_sizes", ([4, -1], 1))])
def test_negative_split_sizes_are_refused(name, args):
    # (4 + -1 is dim 1's size 3: the sum alone would pass, and split gave a piece of -1 rows)
    with pytest.raises(ValueError, match=f"^{name}: (split_)?sizes must be >= 0"):
        getattr(ta, name)(ta.tensor(X), *args)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        getattr(torch, name)(torch.tensor(X), *args)


def test_split_with_sizes_refuses_what_is_no_list_of_ints():
    for bad in (1.5, None, 3, [1, 2.0, 1]):
        with pytest.raises(TypeError, match="^split_with_sizes: split_sizes must be"):
            ta.split_with_sizes(ta.tensor(X), bad, 1)


@pytest.mark.parametrize(("name", "args"), [("repeat", (-1, 1, 1)), ("tile", (-1,))])
def test_negative_repeat_counts_are_refused(name, args):
    with pytest.raises(ShapeError, match=f"^{name}: sizes must be >= 0"):
        getattr(ta.tensor(X), name)(*args)


# (method, the call's args in the library given) accepted by both with the same values
TAKEN = [
    ("select", lambda lib: (0, lib.tensor(1))),
    ("select", lambda lib: (1, np.int64(-1))),
    ("tril", lambda lib: (np.int64(1),)),
    ("triu", lambda lib: (-1,)),
    ("rot90", lambda lib: (3, (1, 2))),
    ("rot90", lambda lib: (-1, (2, 0))),
    ("narrow", lambda lib: (2, lib.tensor(1), 2)),
    ("diagonal", lambda lib: (np.int64(1), 1, 2)),
    ("flip", lambda lib: ((0, 2),)),
    ("repeat", lambda lib: (2, 1, 1, 2)),
    ("tile", lambda lib: ((2,),)),
    ("split", lambda lib: (lib.tensor(2), 2)),
    ("split", lambda lib: ([1, 3], 2)),
    ("tensor_split", lambda lib: (lib.tensor([1, 3]), 2)),
    ("tensor_split", lambda lib: ((1, -1), 2)),
    ("tensor_split", lambda lib: (3, 2)),
    ("nan_to_num", lambda lib: (None,)),
    ("flip", lambda lib: ((0, True),)),  # (a bool inside a tuple: torch takes it as its int)
    ("tensor_split", lambda lib: ((1, True, 3), 2)),
]


@pytest.mark.parametrize(("name", "call"), TAKEN, ids=[f"{c[0]}-{i}" for i, c in enumerate(TAKEN)])
def test_what_torch_takes_gives_its_values(name, call):
    torch = pytest.importorskip("torch")
    x = X.copy()
    x[0, 0, 0] = np.nan
    got = getattr(ta.tensor(x), name)(*call(ta))
    want = getattr(torch.tensor(x), name)(*call(torch))
    got, want = (got, want) if isinstance(want, torch.Tensor) else (list(got), list(want))
    for g, w in zip(got if isinstance(got, list) else [got],  # noqa: B905
                    want if isinstance(want, list) else [want]):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    if isinstance(want, list):
        assert len(got) == len(want)


# the functions of the same family (their int or number settings)
FUNCTIONS_REFUSED = [
    *[("roll", lambda lib, x, bad=bad: lib.roll(x, bad, 0), "roll: shifts must be an int")
      for bad in (1.5, True, None, "a")],
    ("roll", lambda lib, x: lib.roll(x, (1, 2.5), (0, 1)), "roll: shifts must be an int"),
    *[("diag_embed", lambda lib, x, bad=bad: lib.diag_embed(x, bad),
       "diag_embed: offset must be an int") for bad in (1.5, True, None)],
    *[("bincount", lambda lib, x, bad=bad: lib.bincount(lib.tensor([0, 2]), None, bad),
       "bincount: minlength must be an int") for bad in (1.5, None, "a")],
    *[("cdist", lambda lib, x, bad=bad: lib.cdist(x, x, bad), "cdist: p must be a number")
      for bad in (None, "a")],
    *[("pdist", lambda lib, x, bad=bad: lib.pdist(x[0], bad), "pdist: p must be a number")
      for bad in (None, "a")],
    *[("tensordot", lambda lib, x, bad=bad: lib.tensordot(x, x, dims=bad),
       "tensordot: dims must be an int or two lists") for bad in (1.5, None, "a", ([0], None),
                                                                  ([0], 1.5), ([0], "a"))],
    *[("vander", lambda lib, x, bad=bad: lib.vander(lib.tensor([1.0, 2.0, 3.0]), bad),
       "vander: N must be an int") for bad in (1.5, True, "a")],
]


@pytest.mark.parametrize(("name", "call", "message"), FUNCTIONS_REFUSED,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(FUNCTIONS_REFUSED)])
def test_functions_refuse_naming_themselves(name, call, message):
    with pytest.raises(TypeError) as info:
        call(ta, ta.tensor(X))
    assert str(info.value).startswith(message), str(info.value)
    torch = pytest.importorskip("torch")
    with pytest.raises((TypeError, RuntimeError)):
        call(torch, torch.tensor(X))


FUNCTIONS_TAKEN = [
    lambda lib, x: lib.roll(x, 1),
    lambda lib, x: lib.roll(x, (1, -2), (0, 2)),
    lambda lib, x: lib.roll(x, np.int64(2), 1),
    lambda lib, x: lib.diag_embed(x, np.int64(1)),
    lambda lib, x: lib.bincount(lib.tensor([0, 2]), None, np.int64(4)),
    lambda lib, x: lib.cdist(x, x, True),
    lambda lib, x: lib.pdist(x[0], 1),
    lambda lib, x: lib.tensordot(x, x.permute(2, 1, 0), dims=1),
    lambda lib, x: lib.tensordot(x, x, dims=([0, 1], [0, 1])),
    lambda lib, x: lib.vander(lib.tensor([1.0, 2.0, 3.0]), np.int64(2)),
]


@pytest.mark.parametrize("call", FUNCTIONS_TAKEN)
def test_functions_take_what_torch_takes(call):
    torch = pytest.importorskip("torch")
    got, want = call(ta, ta.tensor(X)), call(torch, torch.tensor(X))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


def test_roll_with_several_shifts_and_no_dims_is_refused():
    with pytest.raises(ValueError, match="roll: 2 shifts with no dims"):
        ta.tensor(X).roll((1, 2))
