"""Tests for the seed-4 mutation survivors of replay (2026-11-29): capture's record of what a
container holds (_Held) compares by identity for tensors and by value for numbers, and `!=`
is the exact opposite of `==` (a tuple's own `!=` would compare the tensors element by
element)."""

import tinyattn as ta
from tinyattn.replay import _Held


def test_held_containers_compare_the_same_way_with_eq_and_ne():
    t, twin = ta.ones(3), ta.ones(3)
    same, other = _Held([t, 2.0, "a"]), _Held([t, 2.0, "a"])
    assert same == other and not same != other
    moved = _Held([twin, 2.0, "a"])  # an equal tensor, but another one: not the same
    assert not same == moved and same != moved
    assert _Held({"k": 1}) != _Held({"k": 2}) and not _Held({"k": 1}) != _Held({"k": 1})
    assert _Held([1]) != _Held([1, 2])
