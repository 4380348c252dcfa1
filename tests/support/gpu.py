"""Whether the GPU tests can run here: real CuPy that sees a CUDA device."""

import functools


@functools.cache
def reason():
    """Why the GPU tests skip (CuPy missing, no device, a driver error), or None on a GPU."""
    try:
        import cupy
    except ImportError:
        return "CuPy is not installed"
    try:
        return None if cupy.is_available() else "CuPy sees no GPU"
    except Exception as e:  # a CUDA driver error
        return f"CuPy cannot use a GPU: {e}"
