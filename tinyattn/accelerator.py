"""torch.accelerator's questions, for tinyattn's one accelerator, CUDA through CuPy:

    device = ta.accelerator.current_accelerator() if ta.accelerator.is_available() else "cpu"

is_available() is ta.cuda.is_available() (False without CuPy and a GPU; there is no MPS or
other backend), current_accelerator() device("cuda") or None, device_count() ta.cuda's.
"""

from . import cuda


def is_available():
    return cuda.is_available()


def current_accelerator(check_available=False):
    """device(type='cuda') where CuPy can run (tinyattn's accelerator), else None."""
    from .tensor import Device

    return Device("cuda") if cuda.is_available() else None


def device_count():
    return cuda.device_count()
