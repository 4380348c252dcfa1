"""torch.cuda's questions, answered for the CuPy backend: is_available() and device_count();
and its setup calls: manual_seed / manual_seed_all (the CuPy backend's generator), and
is_bf16_supported() (False: tinyattn has no bfloat16). ta.cuda.amp is tinyattn.amp's
(autocast, GradScaler; see there).

    device = "cuda" if ta.cuda.is_available() else "cpu"
    model.to(device); x = ta.tensor(batch, device=device)

CuPy is imported by the first question, never by `import tinyattn` (nor by manual_seed).
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


def manual_seed(seed):
    """Seed the CuPy backend's generator (draws on "cuda" without a generator=), now, or when
    the backend is first made; tinyattn.manual_seed seeds it too. Without CuPy or a GPU it
    seeds nothing and says nothing, as torch's without CUDA (its seed waits for a CUDA that
    never comes)."""
    from . import backends
    from .generator import seed_of

    backends.seed_one("cupy", seed_of("cuda.manual_seed", seed, cast=True))


def manual_seed_all(seed):
    """manual_seed: tinyattn's CuPy backend is one device."""
    manual_seed(seed)


def is_bf16_supported(including_emulation=True):
    """False: tinyattn has no bfloat16 (use float16 or float32)."""
    return False
