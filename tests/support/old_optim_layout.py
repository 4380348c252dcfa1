"""An optimizer's state dict as tinyattn wrote it before it followed torch's layout, for the
tests that old checkpoints (`tinyattn train --resume` on an old run folder) still load:
{"steps": the optimizer's step() calls, "groups": settings and "params" positions,
"state": {"<position>.<name>": array}}, with the names and value types of then: Adam's m, v,
v_max and a Python int step, Adamax's u, SGD's momentum, NAdam's Python-float mu_product,
Adagrad's float64 step, RMSprop without a step."""

import numpy as np

_SWITCHES = ("foreach", "fused", "capturable", "differentiable")
_ADAMS = {"exp_avg": "m", "exp_avg_sq": "v", "max_exp_avg_sq": "v_max", "exp_inf": "u"}
_OLD_NAMES = {"SGD": {"momentum_buffer": "momentum"}, "RMSprop": {"step": None},
              "Adagrad": {}}


def old_layout(kind, saved, steps, with_step=True):
    """`saved` (a state dict in torch's layout, tinyattn's tensors or arrays) in the old layout
    of optimizer `kind` ("Adam", "SGD", ...), `steps` its step() calls; without `with_step`,
    as still older versions wrote Adam's (no per-parameter step count)."""
    names = _OLD_NAMES.get(kind, _ADAMS)
    groups = [{k: v for k, v in g.items() if k not in _SWITCHES} for g in saved["param_groups"]]
    state = {}
    for i, entry in saved["state"].items():
        for name, value in entry.items():
            old = names.get(name, name)
            if old is None or (name == "step" and not with_step):
                continue
            a = np.array(value.numpy() if hasattr(value, "numpy") else value)
            if name == "step":  # a Python int then (Adagrad: a float64 0-d array)
                a = a.astype(np.float64 if kind == "Adagrad" else np.int64)
            elif name == "mu_product":  # a Python float, of float32 precision
                a = a.astype(np.float64)
            state[f"{i}.{old}"] = a
    return {"steps": steps, "groups": groups, "state": state}
