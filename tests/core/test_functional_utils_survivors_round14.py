"""Tests for the seed-2 mutation survivors of autograd_functional and utils (2026-11-29),
against torch: hvp and vhp where func is linear in one input (its second derivatives are
zeros, not an error), their refusal of a non-tensor input naming them, checkpoint refusing
context_fn with use_reentrant=True, RandomSampler's refusal naming it, and
DistributedSampler padding by default (drop_last=False), and an unseeded default generator
giving its stream's seed."""

import numpy as np
import pytest

import tinyattn as ta

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_hessian_products_where_func_is_linear_in_one_input(name):
    def run(lib):
        def f(x, y):
            return (x ** 3).sum() + (y * 3).sum()

        x = lib.tensor([1.0, 2.0], dtype=lib.float64)
        y = lib.tensor([3.0, -1.0], dtype=lib.float64)
        v = (lib.tensor([1.0, 0.5], dtype=lib.float64), lib.tensor([2.0, 1.0], dtype=lib.float64))
        out, r = getattr(lib.autograd.functional, name)(f, (x, y), v)
        return float(out), [t.tolist() for t in r]

    assert run(ta) == run(torch) == (15.0, [[6.0, 6.0], [0.0, 0.0]])


@pytest.mark.parametrize("name", ["hvp", "vhp"])
def test_hessian_products_refuse_a_non_tensor_input_naming_themselves(name):
    fn = getattr(ta.autograd.functional, name)
    with pytest.raises(TypeError, match=rf"^{name}: input 0 must be a tinyattn Tensor, got str"):
        fn(lambda x: (x * x).sum(), "x", ta.ones(2))


def test_checkpoint_refuses_context_fn_with_use_reentrant():
    for lib in (ta, torch):
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(ValueError, match="Passing `context_fn` or `debug` is only "
                                             "supported when use_reentrant=False"):
            lib.utils.checkpoint.checkpoint(lambda t: t * 2, x, use_reentrant=True,
                                            context_fn=lambda: (None, None))


def test_random_sampler_refuses_a_replacement_that_is_no_bool_naming_itself():
    with pytest.raises(TypeError, match=r"^RandomSampler: replacement should be a boolean "
                                        r"value, but got replacement='yes'"):
        ta.utils.data.RandomSampler(list(range(5)), replacement="yes")


def test_distributed_sampler_pads_by_default():
    got = [[list(lib.utils.data.DistributedSampler(list(range(5)), num_replicas=2, rank=r,
                                                   shuffle=False)) for r in (0, 1)]
           for lib in (ta, torch)]
    assert got[0] == got[1] == [[0, 2, 4], [1, 3, 0]]
    np.testing.assert_equal(len(ta.utils.data.DistributedSampler(list(range(5)), num_replicas=2,
                                                                 rank=0)), 3)


def test_an_unseeded_default_generator_gives_its_streams_seed():
    # (as torch.initial_seed() before any manual_seed: the seed the stream started from)
    fresh = type(ta.default_generator)()
    seed = fresh.initial_seed()
    assert isinstance(seed, int) and seed == int(fresh.rng.bit_generator.seed_seq.entropy)
    assert isinstance(torch.default_generator.initial_seed(), int)
