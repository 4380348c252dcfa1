"""torch.nn.modules' path, for code ported from torch: Module and the containers, and
`nn.modules.module` (which is tinyattn.nn.module itself: Module, and the global hooks
register_module_forward_pre_hook and register_module_forward_hook)."""

import sys

from .. import module
from ..module import (
    Module,
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)

__all__ = ["module", "Module", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict"]

sys.modules[__name__ + ".module"] = module  # the module, not a copy: one set of global hooks
