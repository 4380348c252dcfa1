"""Round 4 of probing ta.capture as users use it: each test pins a problem found, where a replay
gave another result than the eager step, or a refusal did not say why."""

import copy
import types
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import nn


def _batch(i, shape=(5, 4)):
    return ta.tensor(np.random.default_rng(i).standard_normal(shape).astype(np.float32))


def _check_twins(fn_of, set_value, values, seed_each=False):
    """Run a captured step and its eager twin over len(values) calls, set_value(v) before each
    call (outside fn); assert every call's loss and weight gradient equal, bit for bit, and
    return the captured step."""
    ta.manual_seed(0)
    m1 = nn.Linear(4, 3)
    m2 = copy.deepcopy(m1)
    step, eager = ta.capture(fn_of(m1)), fn_of(m2)
    got, want = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, v in enumerate(values):
            set_value(v)
            x = _batch(i)
            for m in (m1, m2):
                m.zero_grad()
            if seed_each:
                ta.manual_seed(i)
            got.append((step(x)._data.copy(), m1.weight.grad._data.copy()))
            if seed_each:
                ta.manual_seed(i)
            loss = eager(x.clone())
            loss.backward()
            want.append((loss._data.copy(), m2.weight.grad._data.copy()))
    for (a, ga), (b, gb) in zip(got, want, strict=True):
        assert np.array_equal(a, b) and np.array_equal(ga, gb)
    return step


SCALE = 1.0


def _set_global(v):
    global SCALE
    SCALE = v


def test_a_number_read_from_a_global_changed_after_replaying_is_seen():
    _check_twins(lambda m: lambda x: (m(x) * SCALE).sum(), _set_global, [1.0, 1.0, 1.0, 3.0, 5.0])


def test_a_number_read_from_a_closure_changed_after_replaying_is_seen():
    temp = 1.0

    def set_temp(v):
        nonlocal temp
        temp = v

    def fn_of(m):
        return lambda x: (m(x) / temp).logsumexp(-1).mean()

    _check_twins(fn_of, set_temp, [1.0, 1.0, 1.0, 2.0, 4.0])


def test_a_number_in_a_list_or_a_config_object_changed_after_replaying_is_seen():
    box = [1.0]
    cfg = types.SimpleNamespace(p=0.5)

    def set_both(v):
        box[0] = v
        cfg.p = v / 4

    def fn_of(m):
        return lambda x: F.dropout(m(x) * box[0], p=cfg.p).sum()

    _check_twins(fn_of, set_both, [1.0, 1.0, 1.0, 2.0, 3.0], seed_each=True)


def test_an_equal_number_made_anew_each_call_still_replays():
    step = _check_twins(lambda m: lambda x: (m(x) * SCALE).sum(), _set_global,
                  [float(s) for s in ["1.5", "1.5", "1.5", "1.5"]])
    assert step.state == "replaying"


def test_a_buffer_updated_in_place_by_a_module_is_named():
    m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
    step = ta.capture(lambda x: m(x).pow(2).mean())
    with pytest.warns(UserWarning, match="buffer") as record:
        step(_batch(0))
    assert "eval()" in str(record[0].message)
    assert step.state.startswith("eager")
