"""torch.backends.cuda's switches, for scripts that set them: settable, with no effect.

`matmul.allow_tf32` (TensorFloat-32 matmuls on Ampere GPUs) and the reduced-precision reduction
flags change nothing here: the CuPy backend's matmuls use CuPy's (cuBLAS) defaults and its own
kernels, and the NumPy backend has no such modes. is_built() says whether CuPy can run here (as
torch's says whether it was built with CUDA).
"""


class _Matmul:
    """torch.backends.cuda.matmul: its flags, kept as set."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True
        self.fp32_precision = "none"

    def __repr__(self):
        return f"<tinyattn.backends.cuda.matmul: {vars(self)} (no effect)>"


matmul = _Matmul()


def is_built():
    """Whether CuPy imports and sees a GPU (ta.cuda.is_available()'s answer)."""
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:  # ImportError, or CuPy's CUDA driver and runtime errors of its own kinds
        return False
