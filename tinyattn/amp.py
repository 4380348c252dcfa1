"""torch.amp's names: autocast and GradScaler (also as ta.autocast and in ta.cuda.amp), and
custom_fwd / custom_bwd for an autograd.Function (they note and restore the autocast state:
nothing to cast here).

tinyattn computes every op in the dtype of its inputs; it never casts them on its own, so
mixed-precision *autocast* is not supported:

- `autocast(device_type, dtype, enabled=False)` (and autocast to float32 or float64, which has
  nothing to cast) is an exact no-op, as torch's disabled autocast: a context manager and a
  decorator that change nothing.
- `autocast(..., enabled=True)` to float16 (the default dtype on "cuda") or bfloat16 (the
  default on "cpu") raises a TypeError saying so: cast the model and its inputs yourself
  (`model.half()`, `x.half()`), or pass enabled=False.

GradScaler is torch's dynamic loss scaling:

- `GradScaler(enabled=False)` is an exact no-op, as torch's: scale(loss) returns loss itself,
  step(opt) calls and returns opt.step(), unscale_() and update() do nothing, get_scale() is 1.
- enabled (the default) on "cuda" where tinyattn's CUDA (CuPy) is not available warns and
  disables itself, as torch's without CUDA; on "cpu", or on a GPU, it scales: scale(loss) is
  loss x scale (a float32 number, init_scale = 2**16), unscale_(opt) divides the gradients by it
  and notes any inf or NaN among them, step(opt) unscales (if not done yet) and skips
  opt.step() where one was found, update() halves the scale after such a step (backoff_factor)
  and doubles it after growth_interval steps without (growth_factor), with torch's state_dict.
  As torch's, it refuses to unscale float16 gradients (keep float32 master weights).
"""

import functools
import sys
import types
import warnings

import numpy as np

from .autograd import TensorBase, no_grad

__all__ = ["autocast", "GradScaler", "is_autocast_available", "custom_fwd", "custom_bwd"]


def _device_type(device_type, where):
    name = str(getattr(device_type, "type", device_type)).split(":")[0]
    if name not in ("cpu", "cuda"):
        raise ValueError(f"{where}: device_type must be 'cpu' or 'cuda' (tinyattn's devices), got "
                         f"{device_type!r}")
    return name


def _dtype_name(dtype):
    """A dtype's name as autocast reads it (ours, NumPy's, torch's, or the bfloat16 marker)."""
    name = getattr(dtype, "name", None) if not isinstance(dtype, str) else dtype
    if name is None:
        name = str(dtype)
    name = str(name).removeprefix("torch.").removeprefix("tinyattn.")
    return {"half": "float16", "float": "float32", "double": "float64"}.get(name, name)


# the autocast state torch's is_autocast_enabled(device) / get_autocast_dtype(device) report: an
# enabled autocast region sets it (as the setters of routines_torch_more.py do); ops never read it
STATE = {"cpu": {"enabled": False, "dtype": "bfloat16"},
         "cuda": {"enabled": False, "dtype": "float16"}, "cache": True, "nesting": 0}


def is_autocast_available(device_type):
    """Whether autocast can run on that device: False, tinyattn has none (see the module)."""
    return False


class autocast:  # noqa: N801 - torch's name
    """torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None): a no-op where
    disabled (or to float32/float64), refused where it would cast to float16 or bfloat16
    (see the module's doc). A context manager and a decorator, as torch's."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        self.device = _device_type(device_type, "autocast")
        if dtype is None:  # torch's defaults: float16 on CUDA, bfloat16 on the CPU
            dtype = "float16" if self.device == "cuda" else "bfloat16"
        self.fast_dtype = dtype
        self._enabled = bool(enabled)
        if self._enabled and _dtype_name(dtype) not in ("float32", "float64"):
            raise TypeError(
                f"autocast(device_type={self.device!r}, dtype={_dtype_name(dtype)}, "
                "enabled=True) is not supported: tinyattn computes each op in its inputs' dtype "
                "and does no automatic mixed precision. Cast the model and inputs yourself "
                "(model.half(), x.half()) or pass enabled=False (an exact no-op, as torch's)")

    def __enter__(self):  # (the state is_autocast_enabled() reports: routines_torch_more)
        slot = STATE[self.device]
        self._prev = (slot["enabled"], slot["dtype"])
        slot.update(enabled=self._enabled, dtype=self.fast_dtype)
        STATE["nesting"] += 1
        return self

    def __exit__(self, *exc):
        STATE["nesting"] -= 1
        STATE[self.device]["enabled"], STATE[self.device]["dtype"] = self._prev
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def run(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)

        return run

    def __repr__(self):
        return f"tinyattn.autocast(device_type={self.device!r}, enabled={self._enabled})"


def _decorator_device(device_type, where):
    if not isinstance(device_type, str):
        raise ValueError(f"{where}: Expected `device_type` of type `str`, got: "
                         f"`{type(device_type)}`")
    return _device_type(device_type, where)


def custom_fwd(fwd=None, *, device_type, cast_inputs=None):
    """torch.amp.custom_fwd for an autograd.Function's forward: it notes on ctx the autocast
    state backward must run in (ctx._dtype, ctx._fwd_used_autocast). tinyattn's autocast never
    casts (see the module's doc), so forward runs as it is and cast_inputs, which torch applies
    only inside an enabled autocast region, changes nothing."""
    device = _decorator_device(device_type, "custom_fwd")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = "float16" if device == "cuda" else "bfloat16"  # (torch's autocast dtypes)
        ctx._fwd_used_autocast = is_autocast_available(device)  # (False: never enabled)
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd=None, *, device_type):
    """torch.amp.custom_bwd for an autograd.Function's backward: it runs in the autocast state
    custom_fwd noted (disabled, in tinyattn)."""
    device = _decorator_device(device_type, "custom_bwd")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device, dtype=getattr(ctx, "_dtype", None),
                      enabled=getattr(ctx, "_fwd_used_autocast", False)):
            return bwd(*args, **kwargs)

    return decorate_bwd


_READY, _UNSCALED, _STEPPED = 0, 1, 2


class GradScaler:
    """torch.amp.GradScaler(device="cuda", init_scale=2.0**16, growth_factor=2.0,
    backoff_factor=0.5, growth_interval=2000, enabled=True); see the module's doc."""

    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = _device_type(device, "GradScaler")
        self._enabled = bool(enabled)
        if self._enabled and self._device == "cuda":
            from . import cuda

            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available."
                              "  Disabling.", UserWarning, stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise ValueError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise ValueError("The backoff factor must be < 1.0.")
        self._init_scale, self._growth_factor = init_scale, growth_factor
        self._backoff_factor, self._growth_interval = backoff_factor, growth_interval
        self._scale = None  # (a float32 number, made by the first scale(), as torch's tensor)
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage", "found_inf"}

    def is_enabled(self):
        return self._enabled

    def _scale_now(self):
        if self._scale is None:
            self._scale = np.float32(self._init_scale)
        return self._scale

    def scale(self, outputs):
        """outputs x the scale (a tensor, or lists/tuples of them); outputs itself where
        disabled."""
        if not self._enabled:
            return outputs
        scale = self._scale_now()
        if isinstance(outputs, TensorBase):
            return outputs * scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": _READY,
                                                              "found_inf": False})

    @no_grad()
    def unscale_(self, optimizer):
        """Divide the optimizer's gradients by the scale, in place (once per update())."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = np.float32(np.float64(1.0) / np.float64(self._scale_now()))
        found = False
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad._data
                if g.dtype == np.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                xp = p.grad.backend.xp
                found = found or not bool(xp.isfinite(g).all())
                g *= inv_scale
        state["found_inf"], state["stage"] = found, _UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless the unscaled gradients hold an inf or NaN
        (then skipped: None)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is "
                               "enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    def update(self, new_scale=None):
        """The next scale: new_scale if given, else backoff after a step that found an inf or
        NaN, growth after growth_interval steps without."""
        if not self._enabled:
            return
        if new_scale is not None:
            value = new_scale.item() if isinstance(new_scale, TensorBase) else new_scale
            self._scale = np.float32(value)
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            scale = self._scale_now()
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                self._scale = np.float32(scale * np.float32(self._backoff_factor))
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    self._scale = np.float32(scale * np.float32(self._growth_factor))
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer = {}

    def get_scale(self):
        """The scale as a Python float (1.0 where disabled)."""
        if not self._enabled:
            return 1.0
        return float(self._init_scale if self._scale is None else self._scale)

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def state_dict(self):
        """torch's: {} where disabled, else scale, growth_factor, backoff_factor,
        growth_interval, _growth_tracker."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        self._scale = np.float32(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _namespace(name, device, doc):
    """torch.cuda.amp / torch.cpu.amp: autocast and GradScaler with that device, as modules
    (an import line works)."""
    module = types.ModuleType(name, doc)

    class DeviceAutocast(autocast):
        def __init__(self, enabled=True, dtype=None, cache_enabled=True):
            super().__init__(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class DeviceGradScaler(GradScaler):
        def __init__(self, init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            super().__init__(device, init_scale, growth_factor, backoff_factor,
                             growth_interval, enabled)

    DeviceAutocast.__name__ = DeviceAutocast.__qualname__ = "autocast"
    DeviceGradScaler.__name__ = DeviceGradScaler.__qualname__ = "GradScaler"
    DeviceAutocast.__module__ = DeviceGradScaler.__module__ = name
    module.autocast, module.GradScaler = DeviceAutocast, DeviceGradScaler
    sys.modules[name] = module
    return module


cuda_amp = _namespace("tinyattn.cuda.amp", "cuda", "torch.cuda.amp's autocast and GradScaler "
                      "(device 'cuda'); see tinyattn.amp.")


def _attach():
    from . import cuda

    cuda.amp = cuda_amp  # ta.cuda.amp.GradScaler, as torch.cuda.amp's


_attach()
