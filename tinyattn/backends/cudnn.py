"""torch.backends.cudnn's switches, for scripts that set them: tinyattn has no cuDNN, so they are
plain settable attributes with no effect (read back as set).

    ta.backends.cudnn.deterministic = True   # tinyattn's ops are deterministic anyway
    ta.backends.cudnn.benchmark = False      # nothing to autotune

is_available() is False and version() None, as torch's without cuDNN.
"""

enabled = True
deterministic = False
benchmark = False
benchmark_limit = None  # (torch's without cuDNN)
allow_tf32 = True


def is_available():
    """False: tinyattn never calls cuDNN (its GPU backend runs CuPy and kernels of its own)."""
    return False


def version():
    """None: no cuDNN, as torch's answer without one."""
    return None
