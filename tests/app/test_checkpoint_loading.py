"""Loading a checkpoint (tinyattn.load, `tinyattn sample`) survives damaged and forged files:
each is one CheckpointError naming the file, before any large allocation (issue 17)."""

import io
import itertools
import json
import math
import zipfile

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import cli
from tinyattn.sample import _fits_file, load_model, sample
from tinyattn.train import FlagError, TrainConfig, train


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    train(TrainConfig(task="reverse", length=3, d_model=8, heads=2, layers=1, batch_size=4,
                      steps=3, heldout_size=8, out=str(out)), progress=False)
    return out


def npy_bytes(header_shape, dtype="<f4", payload=b"", version=(1, 0)):
    """An .npy entry whose header declares `header_shape` whatever its payload holds."""
    buf = io.BytesIO()
    header = {"descr": dtype, "fortran_order": False, "shape": header_shape}
    if version == (1, 0):
        np.lib.format.write_array_header_1_0(buf, header)
    else:
        buf.write(np.lib.format.magic(*version) + b"\x10\x00" + b" " * 15 + b"\n")
    return buf.getvalue() + payload


def write_zip(path, entries, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in entries.items():
            z.writestr(name, data)


def meta(structure):
    text = json.dumps({"format": "tinyattn-checkpoint-1", "structure": structure})
    buf = io.BytesIO()
    np.save(buf, np.array(text))
    return buf.getvalue()


def test_a_huge_declared_shape_is_refused_before_allocating(tmp_path):
    path = tmp_path / "forged.npz"
    write_zip(path, {"__tinyattn__.npy": meta({"tensor": "a0"}),
                     "a0.npy": npy_bytes((10**13,), payload=b"\0" * 1_200_000)})
    with pytest.raises(ta.CheckpointError, match=r"declares shape \(10000000000000,\).*holds "
                                                 r"1200000 bytes"):
        ta.load(path)


def test_unreadable_versions_are_checkpoint_errors(tmp_path, run):
    data = bytearray((run / "checkpoint.npz").read_bytes())
    at = data.find(b"PK\x01\x02")  # the central directory: 'version needed to extract'
    while at != -1:
        data[at + 6:at + 8] = (99).to_bytes(2, "little")
        at = data.find(b"PK\x01\x02", at + 4)
    path = tmp_path / "zip-version.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(ta.CheckpointError, match="zip-version.npz"):
        ta.load(path)
    npy9 = tmp_path / "npy-version.npz"
    write_zip(npy9, {"__tinyattn__.npy": meta({"array": "a0"}),
                     "a0.npy": npy_bytes((2,), version=(9, 0))})
    with pytest.raises(ta.CheckpointError, match=r"format version \(9, 0\)"):
        ta.load(npy9)


def test_an_npy_entry_of_format_version_2_0_loads(tmp_path):
    """NumPy writes format 2.0 where a header outgrows 1.0's 65,535 bytes: it is read too."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3.0), version=(2, 0))
    path = tmp_path / "npy-2.0.npz"
    write_zip(path, {"__tinyattn__.npy": meta({"array": "a0"}), "a0.npy": buf.getvalue()})
    np.testing.assert_array_equal(np.asarray(ta.load(path)), np.arange(3.0))


def test_only_the_entries_asked_for_are_read(tmp_path, run, monkeypatch):
    path = tmp_path / "extra.npz"
    with zipfile.ZipFile(run / "checkpoint.npz") as src, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
        dst.writestr("junk.npy", npy_bytes((8_000_000,), payload=bytes(32_000_000)))
    # (one entry per array: the LM head's weight, tied to the embedding's, is stored once)
    n_model = len({id(t._data) for t in ta.load(run / "checkpoint.npz")["model"].values()})
    opened = []
    real_open = zipfile.ZipFile.open

    def spy(self, name, *args, **kwargs):
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", spy)
    model, ck = load_model(path)
    assert "junk.npy" not in opened and "optim" not in ck
    assert len(set(opened) - {"__tinyattn__.npy"}) == n_model  # the weights, nothing else


def _forge(run, tmp_path, change):
    ck = ta.load(run / "checkpoint.npz")
    change(ck)
    path = tmp_path / "forged.npz"
    ta.save(ck, path)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda ck: ck["model_config"].update(n_heads=0), "n_heads = 0"),
    (lambda ck: ck["model_config"].update(d_model=-8), "d_model = -8"),
    (lambda ck: ck["model_config"].update(d_model=100_000), "parameters in a file of"),
    (lambda ck: ck.update(vocab=ck["vocab"][:3]), "vocabulary of 3 entries"),
    (lambda ck: ck["config"].update(task="nope"), "task 'nope'"),
    (lambda ck: ck["model"].update({"wte.weight": ta.zeros(2, 2)}), r"wte.weight.*\(2, 2\)"),
    (lambda ck: ck.pop("model_config"), "no 'model_config' entry"),
    (lambda ck: ck["model_config"].update(vocab_size=0), "vocab_size = 0; it must be a whole"),
    (lambda ck: ck["model_config"].update(n_heads=3), "n_heads = 3; it must be a whole number "
                                                      ">= 1 that divides d_model"),
    (lambda ck: ck["model_config"].update(n_layers=True), "n_layers = True; it must be a whole"),
    (lambda ck: ck["model_config"].update(max_len=2.0), "max_len = 2.0; it must be a whole"),
    (lambda ck: ck["model_config"].update(dropout=1.0), r"dropout = 1.0; it must be in \[0, 1\)"),
    (lambda ck: ck["model_config"].update(dropout=-0.1), "dropout = -0.1"),
    (lambda ck: ck["model_config"].update(rotary="yes"), "rotary = 'yes'; it must be true or"),
    (lambda ck: ck["model_config"].update(norm="batch"), "norm = 'batch'; it must be one of"),
    (lambda ck: ck["model_config"].update(tie=2), "tie = 2; it must be true or false"),
    (lambda ck: ck["model_config"].update(bias="no"), "bias = 'no'; it must be true or false"),
    (lambda ck: ck["config"].update(length=0), "task 'reverse', length 0"),
    (lambda ck: ck.update(vocab=[*ck["vocab"][:-1], 5]), "vocabulary of 13 entries"),
    (lambda ck: ck["model"].update({"wte.weight": ta.zeros(13, 8, dtype=ta.int32)}),
     r"wte.weight'\] has shape \(13, 8\) of int32; the model of its configuration expects "
     r"\(13, 8\) of floats"),  # the right shape, not floats
    (lambda ck: ck.update(model_config=[8, 2]), "has a damaged configuration"),
], ids=["heads0", "dmodel", "huge", "short-vocab", "task", "shape", "missing", "vocab0",
        "heads-divide", "layers-bool", "maxlen-float", "dropout1", "dropout-neg", "rotary",
        "norm", "tie", "bias", "length0", "vocab-entry", "int-weight", "config-list"])
def test_a_forged_configuration_is_one_error(run, tmp_path, change, message):
    path = _forge(run, tmp_path, change)
    with pytest.raises(ta.CheckpointError, match=message):
        sample(path, "123")


def test_a_checkpoint_from_before_the_model_options_loads_with_their_defaults(run, tmp_path):
    """Checkpoints written before rotary/norm/tie/bias existed load as the model they were."""
    path = _forge(run, tmp_path, lambda ck: [ck["model_config"].pop(k)
                                             for k in ("rotary", "norm", "tie", "bias")])
    old, _ = load_model(path)
    new, _ = load_model(run / "checkpoint.npz")
    assert old.config == new.config
    assert not old.training  # ready to sample: dropout off
    assert sample(path, "123") == sample(run / "checkpoint.npz", "123")


def test_a_deep_structure_is_one_error(tmp_path):
    path = tmp_path / "deep.npz"
    deep = "[" * 100_000 + "]" * 100_000
    text = '{"format": "tinyattn-checkpoint-1", "structure": ' + deep + "}"
    buf = io.BytesIO()
    np.save(buf, np.array(text))
    write_zip(path, {"__tinyattn__.npy": buf.getvalue()})
    with pytest.raises(ta.CheckpointError, match="nested too deep"):
        ta.load(path)
    nested = {"list": [1]}
    for _ in range(150):
        nested = {"list": [nested]}
    write_zip(path, {"__tinyattn__.npy": meta(nested)})
    with pytest.raises(ta.CheckpointError, match="nested deeper than 100"):
        ta.load(path)


@pytest.mark.parametrize("name", ["metrics.json", "loss.png", "samples.txt"])
def test_other_run_files_are_not_a_tinyattn_checkpoint(run, name):
    with pytest.raises(ta.CheckpointError, match=f"not a tinyattn checkpoint: .*{name}"):
        cli.main(["sample", "--checkpoint", str(run / name)])


@pytest.mark.parametrize("flags, message", [
    (["--temperature", "-1"], "--temperature must be a finite number > 0"),
    (["--temperature", "inf"], "--temperature must be"),  # (0 is taken: a toy task)
    (["--temperature", "nan"], "--temperature must be"),
    (["--top-k", "-3"], "--top-k must be a whole number >= 1: got -3"),
    (["--top-k", "0"], "--top-k must be"),
    (["--top-p", "0"], r"--top-p must be in \(0, 1\]: got 0.0"),
    (["--top-p", "1.5"], "--top-p must be"),
    (["--max-new-tokens", "-1"], "--max-new-tokens must be"),
])
def test_sample_flags_are_checked(run, flags, message):
    with pytest.raises(FlagError, match=message):
        cli.main(["sample", "--checkpoint", str(run / "checkpoint.npz"), *flags])


def test_top_p_reaches_the_sampler(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("abcdefgh" * 40)
    train(TrainConfig(task="text", text=str(corpus), seq_len=8, steps=3, d_model=8, heads=2,
                      layers=1, batch_size=4, heldout_size=8, out=str(tmp_path / "run")),
          progress=False)
    ck = tmp_path / "run" / "checkpoint.npz"
    greedy = sample(ck, "abc", max_new_tokens=30, greedy=True)
    hot = dict(max_new_tokens=30, temperature=50.0)
    assert sample(ck, "abc", top_p=1e-9, **hot) == greedy  # only the most likely token is left
    assert sample(ck, "abc", **hot) != greedy  # without top_p, a hot sampler wanders


# ---- the model a configuration declares: its size, rotary and the options' defaults -----------

OPTION_GRID = [dict(zip(("rotary", "norm", "tie", "bias", "qk_norm"), values, strict=True))
               for values in itertools.product((False, True), ("layer", "rms"), (True, False),
                                               (True, False), (False, True))]
SIZES = [dict(vocab_size=13, d_model=8, n_heads=2, n_layers=1, max_len=7),
         dict(vocab_size=5, d_model=24, n_heads=3, n_layers=3, max_len=300)]


@pytest.mark.parametrize("sizes", SIZES, ids=["small", "deep-long"])
def test_sample_asks_a_checkpoint_for_the_parameters_of_its_model(tmp_path, sizes):
    """_fits_file takes a file of as many bytes as the model of the configuration has
    parameters, and not one byte less: for every option (a rotary model has no position
    table, an untied head its own weight, bias, norm and qk_norm their gains and biases)."""
    path = tmp_path / "ck.npz"
    for options in OPTION_GRID:
        model = ta.nn.TinyTransformer(**sizes, **options)
        n = sum(math.prod(p.shape) for p in model.parameters())
        mc = {**sizes, "dropout": 0.0, **options}
        with open(path, "wb") as f:
            f.truncate(n)
        _fits_file(mc, path)
        with open(path, "wb") as f:
            f.truncate(n - 1)
        with pytest.raises(ta.CheckpointError, match=f"declares a model of {n:,} parameters"):
            _fits_file(mc, path)
        params, buffers = ta.nn.TinyTransformer.tensor_shapes(**sizes, **options)
        assert params == {k: tuple(p.shape) for k, p in model.named_parameters()}, options
        assert buffers == {k: tuple(b.shape) for k, b in model.named_buffers()}, options


def _as_rotary(ck, **config):
    ck["model_config"].update(rotary=True, **config)
    ck["model"].pop("wpe.weight")  # a rotary model has no position table


def test_a_rotary_checkpoint_with_a_long_context_samples(run, tmp_path):
    """Its size does not grow with max_len: 65536 positions are no sign of damage."""
    short = _forge(run, tmp_path, _as_rotary).rename(tmp_path / "short.npz")
    long = _forge(run, tmp_path, lambda ck: _as_rotary(ck, max_len=65536))
    assert long.stat().st_size < 65536 * 8  # what a position table of 65536 rows would take
    model, _ = load_model(long)
    assert model.config.max_len == 65536 and model.wpe is None
    assert sample(long, "123") == sample(short, "123")


def test_rotary_tables_no_checkpoint_could_use_are_refused_before_allocating(run, tmp_path):
    path = _forge(run, tmp_path, lambda ck: _as_rotary(ck, max_len=10**12))
    with pytest.raises(ta.CheckpointError, match=r"max_len 1000000000000.*rotary tables of "
                                                 r"32,000,000,000,000 bytes"):
        load_model(path)


def test_a_rotary_checkpoint_with_an_odd_head_dim_is_one_error(run, tmp_path):
    path = _forge(run, tmp_path, lambda ck: _as_rotary(ck, n_heads=8))  # d_model 8: D = 1
    with pytest.raises(ta.CheckpointError, match="rotary = True; it must be true or false "
                                                 r"\(true needs an even d_model / n_heads: "
                                                 r"8 / 8\)"):
        load_model(path)


def test_options_written_as_null_are_their_defaults(run, tmp_path):
    """null (None) is accepted for each option, as for a checkpoint without it: the default,
    never a falsy 'no bias' or 'untied' model (or a crash on norm None)."""
    path = _forge(run, tmp_path, lambda ck: ck["model_config"].update(
        dict.fromkeys(("rotary", "norm", "tie", "bias", "qk_norm"))))
    model, _ = load_model(path)
    assert model.config == load_model(run / "checkpoint.npz")[0].config
    assert sample(path, "123") == sample(run / "checkpoint.npz", "123")


def test_a_toy_checkpoint_takes_a_temperature_of_zero(run, capsys):
    """A toy task's answers are greedy: the temperature is unused, and 0 is taken as with
    --greedy (a text checkpoint still wants --greedy for it)."""
    flags = ["sample", "--checkpoint", str(run / "checkpoint.npz"), "--prompt", "123"]
    assert cli.main(flags) == 0
    default = capsys.readouterr().out
    assert cli.main([*flags, "--temperature", "0"]) == 0
    assert capsys.readouterr().out == default
