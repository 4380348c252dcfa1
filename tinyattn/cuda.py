"""torch.cuda's two questions, answered for the CuPy backend: is_available() and device_count().

    device = "cuda" if ta.cuda.is_available() else "cpu"
    model.to(device); x = ta.tensor(batch, device=device)

CuPy is imported by the first question, never by `import tinyattn`.
"""


def is_available():
    """Whether the cupy backend ("cuda") can run here: CuPy imports and sees a GPU. Never
    raises: a missing CuPy or a CUDA driver error is a False (ta.backends.backend("cupy")
    says why)."""
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:  # ImportError, or CuPy's CUDA driver and runtime errors of its own kinds
        return False


def device_count():
    """How many GPUs CuPy sees (0 where is_available() is False)."""
    if not is_available():
        return 0
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())
