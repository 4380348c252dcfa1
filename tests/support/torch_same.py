"""Run one functional call in tinyattn and in torch and compare: the output and the gradient
of every input (of sum(y * cos(k)), a cotangent that weighs each output entry differently).
Used by the conv, pool, unfold and interpolate tests; torch is imported by the caller (they
skip without it)."""

import math

import numpy as np

import tinyattn as ta


def run(lib, dtype, fn, arrays):
    """fn(lib's functional module, *tensors) and the gradients of sum(y * cos(k)) for each
    input: [output, grad of input 0, ...] as NumPy arrays."""
    xs = [lib.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    y = fn(lib.nn.functional, *xs)
    weights = np.cos(np.arange(math.prod(y.shape))).reshape(tuple(y.shape))
    (y * lib.tensor(weights, dtype=dtype)).sum().backward()
    return [y.detach().numpy()] + [x.grad.numpy() for x in xs]


def same(fn, arrays, dtypes):
    """fn(f, *inputs) (f: tinyattn's functional, then torch's) gives the same output and
    gradients in both; dtypes: (tinyattn's dtype, torch's, assert_allclose's tolerances)."""
    import torch

    ours, theirs, tol = dtypes
    got, want = run(ta, ours, fn, arrays), run(torch, theirs, fn, arrays)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a.shape == b.shape, (i, a.shape, b.shape)
        np.testing.assert_allclose(a, b, err_msg=f"output/grad {i}", **tol)
