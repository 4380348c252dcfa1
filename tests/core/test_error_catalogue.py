"""The error catalogue: each bad input a user is likely to try, the TinyattnError subclass it
raises, and the words its message must hold (the op or key, the shapes, what to do). The
checkpoint entries also check what is left behind: nothing loaded, the old file intact."""

import os
import pickle
import re
import zipfile

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F  # noqa: N812 - PyTorch's usual name
from tinyattn.backends.numpy_backend import NumpyBackend


def t(*shape, **kw):
    return ta.randn(*shape, **kw)


def backward_twice():
    x = t(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    y.backward()


def in_place_with_a_view():
    h = t(2, 2, requires_grad=True) * 1.0
    alias = h.detach().requires_grad_()  # noqa: F841 - alive, with a graph, while h changes
    h += 1.0


def changed_after_saving():
    w = t(3, requires_grad=True)
    c = t(3)
    y = (w * c).sum()
    c[0] = 100.0
    y.backward()


class FakeBackend(NumpyBackend):
    """A second backend (NumPy underneath) to mix with the real one, as CuPy would be."""

    name = "fake"


def on_fake(*shape):
    return ta.tensor(np.ones(shape, dtype=np.float32), backend=FakeBackend())


# (what the user did, the call, the class it raises, the message fragments in order)
CATALOGUE = [
    ("matmul inner dims", lambda: t(2, 3) @ t(4, 5), ta.ShapeError,
     ["matmul", "(2, 3)", "(4, 5)", "inner dims 3 and 4 differ"]),
    ("matmul of a 0-d tensor", lambda: t() @ t(3), ta.ShapeError,
     ["matmul", "()", "(3,)", "use \\* for scalars"]),
    ("broadcast mismatch", lambda: t(2, 3) + t(4), ta.ShapeError,
     ["add", "(2, 3)", "(4,)", "broadcast", "equal or one is 1"]),
    ("broadcast mismatch in where", lambda: F.where(ta.tensor([True, False]), t(3), t(3)),
     ta.ShapeError, ["where", "(2,)", "(3,)", "broadcast"]),
    ("reshape to the wrong size", lambda: t(2, 3).reshape(4, 2), ta.ShapeError,
     ["reshape", "cannot reshape \\(2, 3\\) \\(6 elements\\) into \\(4, 2\\)"]),
    ("expand to an incompatible shape", lambda: t(2, 3).expand(4, 4), ta.ShapeError,
     ["expand", "(2, 3)", "(4, 4)"]),
    ("cat with different shapes", lambda: F.cat([t(2, 3), t(3, 4)], dim=0), ta.ShapeError,
     ["cat", "(2, 3)", "(3, 4)", "must match except in dim 0"]),
    ("stack with different shapes", lambda: F.stack([t(2, 3), t(3, 2)]), ta.ShapeError,
     ["stack", "(2, 3)", "(3, 2)", "same shape"]),
    ("masked_fill with a mask that does not broadcast",
     lambda: t(2, 3).masked_fill(ta.tensor([True, False]), 0.0), ta.ShapeError,
     ["masked_fill", "mask \\(2,\\)", "x \\(2, 3\\)"]),
    ("masked_fill with a float mask", lambda: t(2, 3).masked_fill(ta.ones(2, 3), 0.0),
     ta.DTypeError, ["masked_fill", "must be bool", "float32", "write x \\+ mask"]),
    ("attention q and k with different d",
     lambda: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 5, 6), t(2, 5, 6)), ta.ShapeError,
     ["scaled_dot_product_attention", "(2, 4, 8)", "(2, 5, 6)", "same last dim"]),
    ("attention k and v with different S",
     lambda: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 5, 8), t(2, 6, 8)), ta.ShapeError,
     ["scaled_dot_product_attention", "(2, 5, 8)", "(2, 6, 8)", "number of keys"]),
    ("attention bool mask of the wrong shape",
     lambda: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 4, 8), t(2, 4, 8),
                                            attn_mask=np.ones((4, 5), dtype=bool)),
     ta.ShapeError, ["scaled_dot_product_attention", "(2, 4, 4)", "(4, 5)", "True = attend"]),
    ("flash attention bool mask of the wrong shape",
     lambda: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 4, 8), t(2, 4, 8), impl="flash",
                                            attn_mask=np.ones((3, 3), dtype=bool)),
     ta.ShapeError, ["scaled_dot_product_attention", "(2, 4, 4)", "(3, 3)", "True = attend"]),
    ("attention float mask of the wrong shape",
     lambda: F.scaled_dot_product_attention(t(2, 4, 8), t(2, 4, 8), t(2, 4, 8),
                                            attn_mask=np.zeros((4, 5), dtype=np.float32)),
     ta.ShapeError, ["scaled_dot_product_attention", "(2, 4, 4)", "(4, 5)"]),
    ("flash attention with a float mask",
     lambda: F.scaled_dot_product_attention(t(1, 4, 8), t(1, 4, 8), t(1, 4, 8), impl="flash",
                                            attn_mask=np.zeros((4, 4), dtype=np.float32)),
     ta.DTypeError, ["impl='flash' takes a bool mask", "use impl='composite'"]),
    ("attention on 1-D inputs", lambda: F.scaled_dot_product_attention(t(4), t(4), t(4)),
     ta.ShapeError, ["scaled_dot_product_attention", "at least 2 dims"]),
    ("layer_norm over the wrong trailing shape", lambda: F.layer_norm(t(2, 3), 4),
     ta.ShapeError, ["layer_norm", "(4,)", "(2, 3)"]),
    ("softmax dim out of range", lambda: t(2, 3).softmax(dim=5), ta.DimError,
     ["softmax", "dim 5", "2 dims", "valid: -2..1"]),
    ("sum dim out of range", lambda: t(2, 3).sum(dim=-3), ta.DimError, ["sum", "dim -3"]),
    ("transpose dim out of range", lambda: t(2, 3).transpose(0, 2), ta.DimError,
     ["transpose", "dim 2"]),
    ("cat dim out of range", lambda: F.cat([t(2), t(2)], dim=1), ta.DimError, ["cat", "dim 1"]),
    ("a repeated dim", lambda: t(2, 3).sum(dim=(1, -1)), ta.DimError, ["sum", "repeats"]),
    ("a dim that is not an int", lambda: t(2, 3).sum(dim=1.5), TypeError,
     ["sum", "dim must be an int"]),
    ("softmax over two dims", lambda: t(2, 3).softmax(dim=(0, 1)), TypeError,
     ["softmax", "dim must be one int", "\\(0, 1\\)"]),  # (torch: TypeError too)
    ("softmax of a 0-d tensor over dim 1", lambda: t().softmax(1), ta.DimError,
     ["softmax", "dim 1 is out of range", "0 dims", "valid: -1..0"]),
    ("a list of repeated dims on a 0-d tensor", lambda: t().sum(dim=[0, 0]), ta.DimError,
     ["sum", "repeats"]),
    ("assigning out of range", lambda: t(2).__setitem__(5, 1.0), ta.DimError,
     ["setitem", "index 5", "(2,)", "out of bounds"]),
    ("permute that is not a permutation", lambda: t(2, 3).permute(0, 0), ta.ShapeError,
     ["permute", "not a permutation"]),
    ("an index out of range", lambda: t(2, 3)[5], ta.DimError, ["getitem", "(2, 3)", "5"]),
    ("backward on a non-scalar without gradient", lambda: (t(2, 3, requires_grad=True) * 2)
     .backward(), ta.GraphError, ["backward", "(2, 3)", "needs a scalar", "gradient="]),
    ("backward with a gradient of the wrong shape",
     lambda: (t(2, 3, requires_grad=True) * 2).backward(ta.ones(3)), ta.ShapeError,
     ["backward", "gradient has shape \\(3,\\)", "\\(2, 3\\)"]),
    ("backward through a freed graph", backward_twice, ta.GraphError,
     ["already freed", "retain_graph=True"]),
    ("backward on a tensor without a graph", lambda: t(3).sum().backward(), ta.GraphError,
     ["does not require grad", "requires_grad=True"]),
    ("integer tensor with requires_grad", lambda: ta.tensor([1, 2], requires_grad=True),
     ta.DTypeError, ["floating-point", "int64", "float32"]),
    ("requires_grad on an integer arange", lambda: ta.arange(3, requires_grad=True),
     ta.DTypeError, ["floating-point", "int64"]),
    ("object array", lambda: ta.tensor(np.array([1, "a"], dtype=object)), ta.DTypeError,
     ["tensor", "dtype object", "convert the data to numbers"]),
    ("string list", lambda: ta.tensor(["a", "b"]), ta.DTypeError, ["tensor", "<U1"]),
    ("ragged nested lists", lambda: ta.tensor([[1.0, 2.0], [3.0]]), ta.ShapeError,
     ["tensor", "ragged", "same length"]),
    ("None as data", lambda: ta.tensor(None), ta.DTypeError, ["tensor", "object"]),
    ("cross_entropy with float targets", lambda: F.cross_entropy(t(3, 4), t(3)),
     ta.DTypeError, ["cross_entropy", "integer class indices", "float32", "target.long\\(\\)"]),
    ("cross_entropy target above the classes",
     lambda: F.cross_entropy(t(3, 4), ta.tensor([0, 1, 7])), ta.DimError,
     ["cross_entropy", "target 7", "4 classes", "valid: 0..3"]),
    ("cross_entropy negative target",
     lambda: F.cross_entropy(t(3, 4), ta.tensor([0, -2, 1])), ta.DimError,
     ["cross_entropy", "target -2", "ignore_index=-100"]),
    ("cross_entropy targets of the wrong shape",
     lambda: F.cross_entropy(t(3, 4), ta.tensor([0, 1])), ta.ShapeError,
     ["cross_entropy", "(3, 4)", "(3,)", "(2,)"]),
    ("embedding id out of range", lambda: F.embedding(ta.tensor([0, 9]), t(4, 3)),
     ta.DimError, ["embedding", "id 9", "4 embeddings"]),
    ("embedding with float ids", lambda: F.embedding(t(2), t(4, 3)), ta.DTypeError,
     ["embedding", "integers", "float32"]),
    ("a bool op on an int condition", lambda: F.where(ta.tensor([1, 0, 1]), t(3), t(3)),
     ta.DTypeError, ["where", "bool"]),
    ("mixing backends", lambda: t(3) + on_fake(3), ta.BackendError,
     ["add", "two backends", "numpy", "fake", "\\.to\\('numpy'\\)"]),
    ("mixing backends in matmul", lambda: on_fake(2, 3) @ t(3, 2), ta.BackendError,
     ["matmul", "fake", "numpy"]),
    ("mixing backends in attention",
     lambda: F.scaled_dot_product_attention(t(1, 2, 4), on_fake(1, 2, 4), t(1, 2, 4)),
     ta.BackendError, ["two backends"]),
    ("an unknown backend name", lambda: ta.tensor([1.0], backend="tpu"), ta.BackendError,
     ["unknown backend 'tpu'", "cupy", "numpy"]),
    ("an in-place update of a parameter outside no_grad",
     lambda: t(3, requires_grad=True).__isub__(0.1), ta.GraphError,
     ["sub_", "(3,)", "leaf that requires grad", "no_grad()"]),
    ("adding floats into an int tensor in place", lambda: ta.tensor([1, 2]).__iadd__(0.5),
     ta.DTypeError, ["add_", "float32", "int64 tensor", "x = x + y"]),
    ("an in-place op that would grow the tensor", lambda: t(3).__imul__(t(2, 3)),
     ta.ShapeError, ["mul_", "(2, 3)", "(3,)", "cannot change a tensor's shape"]),
    ("writing into an expand() view", lambda: t(3).expand(2, 3).__iadd__(1.0), ta.GraphError,
     ["add_", "read-only", ".clone()"]),
    ("a recorded in-place op on a tensor with a live detached alias", in_place_with_a_view,
     ta.GraphError, ["add_", "(2, 2)", "shares its memory", "x = x + y"]),
    ("backward after a saved tensor changed", changed_after_saving, ta.GraphError,
     ["backward", "mul saved its input 1", "(3,)", "version 1", "version 0", ".clone()"]),
    ("max over two dims", lambda: t(2, 3).max(dim=(0, 1)), TypeError,
     ["max", "one int", "(0, 1)", "amax"]),
    ("topk with k larger than the dim", lambda: t(2, 3).topk(4), ta.DimError,
     ["topk", "0..3", "(2, 3)", "4"]),
    ("set_default_dtype to an integer type", lambda: ta.set_default_dtype(ta.int64), TypeError,
     ["set_default_dtype", "floating-point", "int64"]),
    ("the mean of an int tensor", lambda: ta.tensor([1, 2]).mean(), ta.DTypeError,
     ["mean", "floating-point", "int64", ".float()"]),
    ("attn_mask and is_causal together", lambda: F.scaled_dot_product_attention(
        t(1, 2, 4), t(1, 2, 4), t(1, 2, 4), attn_mask=F.causal_mask(2), is_causal=True),
     ValueError, ["scaled_dot_product_attention", "not both", "causal_mask"]),
    # the everyday toolkit
    ("atan2 of shapes that do not broadcast", lambda: t(2, 3).atan2(t(4)), ta.ShapeError,
     ["atan2", "(2, 3)", "(4,)", "broadcast"]),
    ("clamp with a bound that does not broadcast", lambda: t(2, 3).clamp(min=t(2)),
     ta.ShapeError, ["clamp", "(2, 3)", "(2,)", "broadcast"]),
    ("an activation of an int tensor", lambda: F.softplus(ta.tensor([1, 2])), ta.DTypeError,
     ["softplus", "floating-point", "int64", ".float()"]),
    ("hardtanh with min_val above max_val", lambda: F.hardtanh(t(3), 1.0, -1.0), ValueError,
     ["hardtanh", "min_val 1.0 is above max_val -1.0"]),
    ("a bitwise op on floats", lambda: t(3) & 1, ta.DTypeError,
     ["bitwise_and", "integer or bool", "float32", "logical_and"]),
    ("cumsum dim out of range", lambda: t(2, 3).cumsum(2), ta.DimError,
     ["cumsum", "dim 2", "2 dims"]),
    ("the norm of an int tensor", lambda: ta.tensor([3, 4]).norm(), ta.DTypeError,
     ["vector_norm", "floating-point", "int64"]),
    ("kthvalue with k beyond the dim", lambda: t(2, 3).kthvalue(4), ta.DimError,
     ["kthvalue", "1..3", "(2, 3)", "4"]),
    ("gather with a float index", lambda: t(2, 3).gather(1, t(2, 3)), ta.DTypeError,
     ["gather", "integers", "float32", ".long()"]),
    ("gather with an index of other dims", lambda: t(2, 3).gather(1, ta.tensor([0, 1])),
     ta.ShapeError, ["gather", "(2,)", "(2, 3)"]),
    ("scatter to an index out of range",
     lambda: t(3, 4).scatter(1, ta.tensor([[0, 7]]), t(1, 2)), ta.DimError,
     ["scatter", "index 7", "dim 1 of size 4", "(3, 4)"]),
    ("scatter with an index larger than src",
     lambda: t(3, 4).scatter_add(0, ta.tensor([[0, 1, 2]]), t(1, 2)), ta.ShapeError,
     ["scatter_add", "index (1, 3)", "(3, 4)", "src (1, 2)"]),
    ("scatter_reduce with an unknown reduction",
     lambda: t(3).scatter_reduce(0, ta.tensor([0]), t(1), "median"), ValueError,
     ["scatter_reduce", "sum, prod, mean, amax, amin", "'median'"]),
    ("einsum subscripts that do not fit", lambda: ta.einsum("ij,jk->ik", t(2, 3, 4), t(3, 2)),
     ta.ShapeError, ["einsum", "'ij'", "(2, 3, 4)"]),
    ("pad reflect wider than the dim", lambda: F.pad(t(2, 3), (3, 0), mode="reflect"),
     ta.ShapeError, ["pad", "reflect", "below the size 3", "(2, 3)"]),
    ("t() of a 3-D tensor", lambda: t(2, 3, 4).t(), ta.ShapeError,
     ["t:", "at most 2 dims", "(2, 3, 4)", "mT"]),
    ("multinomial with negative weights", lambda: ta.multinomial(ta.tensor([0.5, -1.0]), 1),
     ValueError, ["multinomial", ">= 0", "(2,)"]),
]


@pytest.mark.parametrize("what, call, cls, fragments", CATALOGUE,
                         ids=[row[0] for row in CATALOGUE])
def test_catalogue(what, call, cls, fragments):
    pattern = ".*".join(re.escape(f) if not any(c in f for c in "\\") else f for f in fragments)
    with pytest.raises(cls, match=re.compile(pattern, re.S)) as info:
        call()
    assert isinstance(info.value, ta.TinyattnError) or cls in (TypeError, ValueError)


def test_every_tinyattn_error_is_also_the_builtin_a_user_catches():
    assert issubclass(ta.ShapeError, ValueError) and issubclass(ta.DimError, IndexError)
    assert issubclass(ta.DTypeError, TypeError) and issubclass(ta.GraphError, RuntimeError)
    assert issubclass(ta.BackendError, RuntimeError)
    assert issubclass(ta.CheckpointError, ValueError)
    assert issubclass(ta.GradcheckError, AssertionError)


# ---- load_state_dict: nothing is loaded when it fails ------------------------------------------


def model_and_state():
    ta.manual_seed(0)
    model = ta.nn.Sequential(ta.nn.Linear(3, 4), ta.nn.LayerNorm(4))
    state = {k: v.numpy() + 1.0 for k, v in model.state_dict().items()}
    return model, state


def snapshot(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("change, fragments", [
    (lambda s: s.pop("1.bias"), ["nothing was loaded", "missing keys: 1.bias"]),
    (lambda s: s.update({"2.weight": np.ones(4)}), ["nothing was loaded",
                                                    "unexpected keys: 2.weight"]),
    (lambda s: s.update({"0.weight": np.ones((4, 4))}),
     ["nothing was loaded", "0.weight", "checkpoint has shape (4, 4)", "model (4, 3)"]),
])
def test_load_state_dict_refuses_and_loads_nothing(change, fragments):
    model, state = model_and_state()
    change(state)
    before = snapshot(model)
    with pytest.raises(ta.CheckpointError) as info:
        model.load_state_dict(state)
    message = str(info.value)
    assert all(f in message for f in fragments), message
    after = snapshot(model)
    assert all(np.array_equal(before[k], after[k]) for k in before)


def test_load_state_dict_not_strict_still_refuses_a_wrong_shape():
    model, state = model_and_state()
    state.pop("1.bias")
    state["0.bias"] = np.ones(5)
    before = snapshot(model)
    with pytest.raises(ta.CheckpointError, match=r"0\.bias: the checkpoint has shape \(5,\)"):
        model.load_state_dict(state, strict=False)
    assert all(np.array_equal(v, snapshot(model)[k]) for k, v in before.items())


def test_load_state_dict_with_everything_right_loads_it():
    model, state = model_and_state()
    model.load_state_dict(state)
    assert all(np.array_equal(v.numpy(), state[k]) for k, v in model.state_dict().items())


# ---- checkpoint files: corrupt, truncated, wrong kind; never pickle ------------------------------


def written_checkpoint(tmp_path):
    path = tmp_path / "good.npz"
    ta.save({"w": ta.randn(4, 3), "step": 7}, path)
    return path


class SideEffect:
    """Unpickling this would create a file: proof that pickle ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def bad_files(tmp_path):
    """(what, path) for each kind of file that is not a checkpoint."""
    good = written_checkpoint(tmp_path).read_bytes()
    files = {
        "random bytes": os.urandom(300),
        "an empty file": b"",
        "plain text": b"step: 7\nweights: [1, 2, 3]\n",
        "truncated in the middle": good[: len(good) // 2],
        "cut off at the end": good[:-10],
        "a pickle": pickle.dumps({"w": [1.0, 2.0]}),
        "a pickle that would run code": pickle.dumps(SideEffect(str(tmp_path / "pwned"))),
    }
    paths = []
    for i, (what, data) in enumerate(files.items()):
        path = tmp_path / f"bad{i}.npz"
        path.write_bytes(data)
        paths.append((what, path))
    np.save(tmp_path / "lone.npy", np.ones(3))
    paths.append(("a lone .npy array", tmp_path / "lone.npy"))
    np.savez(tmp_path / "plain.npz", w=np.ones(3))
    paths.append(("an .npz from numpy.savez", tmp_path / "plain.npz"))
    np.savez(tmp_path / "objects.npz", w=np.array([{"a": 1}], dtype=object))
    paths.append(("an .npz holding a pickled object array", tmp_path / "objects.npz"))
    np.savez(tmp_path / "future.npz", __tinyattn__=np.array('{"format": "tinyattn-checkpoint-9"}'))
    paths.append(("a checkpoint of another format version", tmp_path / "future.npz"))
    np.savez(tmp_path / "broken.npz", __tinyattn__=np.array('{"format": "tinyattn-checkpoint-1",'
                                                            ' "structure": {"tensor": "a9"}}'))
    paths.append(("a checkpoint naming an array it does not hold", tmp_path / "broken.npz"))
    np.savez(tmp_path / "json.npz", __tinyattn__=np.array("{not json"))
    paths.append(("a checkpoint with a damaged structure entry", tmp_path / "json.npz"))
    return paths


def test_every_bad_checkpoint_file_raises_checkpoint_error_naming_the_file(tmp_path):
    for what, path in bad_files(tmp_path):
        with pytest.raises(ta.CheckpointError) as info:
            ta.load(path)
        assert str(path) in str(info.value), what
    assert not (tmp_path / "pwned").exists()  # no pickle was ever run


def test_a_missing_checkpoint_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        ta.load(tmp_path / "nothing.npz")


def test_a_save_that_fails_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = written_checkpoint(tmp_path)
    before = path.read_bytes()
    class Thing:  # (an object save cannot store)
        pass

    with pytest.raises(TypeError, match="cannot store a Thing"):
        ta.save({"w": Thing()}, path)  # fails before writing
    assert path.read_bytes() == before

    def crash_midway(f, **arrays):  # as a full disk or a kill would, half-way through
        f.write(b"PK\x03\x04 half a zip")
        raise OSError("No space left on device")

    monkeypatch.setattr(np, "savez", crash_midway)
    with pytest.raises(OSError, match="No space left"):
        ta.save({"w": ta.randn(4, 3)}, path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["good.npz"]  # no temporary left over
    assert zipfile.is_zipfile(path) and ta.load(path)["step"] == 7
