"""nn.utils.init, as torch's: skip_init, a module built with its parameters and buffers left
uninitialised (their values unspecified, torch.empty's) and no random draws taken from the
default generator. (torch builds it on its meta device and so also saves the initialisation's
time; there is no meta device here, so the constructor runs and its draws are given back.)"""

import inspect

from ... import runtime
from ...autograd import bump_version, no_grad
from ..module import Module

__all__ = ["skip_init"]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with its parameters and buffers left uninitialised (as
    torch's: the class must take a `device` argument). The default generator's stream is as
    before the call; the tensors' values are whatever their memory held (torch.empty's)."""
    if not isinstance(module_cls, type) or not issubclass(module_cls, Module):
        raise RuntimeError(f"skip_init: Expected a Module; got {module_cls}")
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError(f"skip_init: Module must support a 'device' arg to skip "
                           f"initialization ({module_cls.__name__} does not)")
    state = runtime.get_rng_state()
    try:
        module = module_cls(*args, **kwargs)
    finally:
        runtime.set_rng_state(state)
    with no_grad():
        for t in (*module.parameters(), *module.buffers()):
            t._data = t.backend.xp.empty_like(t._data)
            bump_version(t)
    return module
