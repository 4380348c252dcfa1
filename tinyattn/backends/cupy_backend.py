"""The CuPy backend: the same ops on an NVIDIA GPU, imported lazily.

`make_cupy_backend()` is called the first time the "cupy" (or "cuda") backend is asked for. It
says plainly whether CuPy is missing or the GPU is unusable. Ordinary array work goes through
`xp = cupy`; the fused primitives fall back to the readable references of `Backend` until a
kernel overrides them.
"""

from ..errors import BackendError
from .base import Backend

INSTALL_HINT = ("install CuPy for your CUDA version: pip install 'tinyattn[cuda12]' "
                "(CUDA 12.x) or 'tinyattn[cuda13]' (CUDA 13.x)")


def make_cupy_backend(seed=None):
    try:
        import cupy
    except ImportError as e:
        raise BackendError(f"the cupy backend needs CuPy, which is not installed ({e}); "
                           f"{INSTALL_HINT}; or stay on the numpy backend") from None
    try:
        ok = cupy.is_available()
    except Exception as e:  # CuPy raises CUDA driver errors of its own kinds here
        ok, why = False, f"{type(e).__name__}: {e}"
    else:
        why = "cupy.is_available() is False"
    if not ok:
        raise BackendError(f"CuPy is installed but cannot use a GPU here ({why}): check "
                           "`nvidia-smi` and that the CuPy wheel matches your CUDA driver; "
                           "or stay on the numpy backend")
    return CupyBackend(seed)


class CupyBackend(Backend):
    name = "cupy"

    def __init__(self, seed=None):
        import cupy
        import cupyx
        import cupyx.scipy.special

        self.xp = cupy
        self._cupyx = cupyx
        super().__init__(seed)

    def to_numpy(self, array):
        return self.xp.asnumpy(array)

    def scatter_add(self, out, index, values):
        self._cupyx.scatter_add(out, index, values)

    def erf(self, x):
        return self._cupyx.scipy.special.erf(x)
