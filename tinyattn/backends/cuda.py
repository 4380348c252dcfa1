"""torch.backends.cuda's switches, for scripts that set them: settable, with no effect.

`matmul.allow_tf32` (TensorFloat-32 matmuls on Ampere GPUs) and the reduced-precision reduction
flags change nothing here: the CuPy backend's matmuls use CuPy's (cuBLAS) defaults and its own
kernels, and the NumPy backend has no such modes; nor do the attention kernel switches
(enable_flash_sdp(False), flash_sdp_enabled(), and the same for mem_efficient, math, cudnn),
kept as set. is_built() says whether CuPy can run here (as
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

# torch's scaled_dot_product_attention kernel switches (enable_flash_sdp(False), ...): kept and
# reported, with no effect (tinyattn's attention picks its own kernel)
_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True}


def _sdp_switch(kind):
    def enable(enabled):
        _sdp[kind] = bool(enabled)

    def enabled():
        return _sdp[kind]

    enable.__name__, enabled.__name__ = f"enable_{kind}_sdp", f"{kind}_sdp_enabled"
    return enable, enabled


enable_flash_sdp, flash_sdp_enabled = _sdp_switch("flash")
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _sdp_switch("mem_efficient")
enable_math_sdp, math_sdp_enabled = _sdp_switch("math")
enable_cudnn_sdp, cudnn_sdp_enabled = _sdp_switch("cudnn")


def is_built():
    """Whether CuPy imports and sees a GPU (ta.cuda.is_available()'s answer)."""
    try:
        import cupy

        return bool(cupy.is_available())
    except Exception:  # ImportError, or CuPy's CUDA driver and runtime errors of its own kinds
        return False
