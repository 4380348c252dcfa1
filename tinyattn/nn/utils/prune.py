"""nn.utils.prune, as torch's: pruning a module's tensor by a mask.

Pruning `module.weight` moves the Parameter to `weight_orig`, keeps the mask (1 = kept, 0 =
pruned) as the buffer `weight_mask`, and registers the pruning method as a forward pre-hook
that recomputes the plain tensor `module.weight = weight_orig * weight_mask` before each
forward, so gradients reach `weight_orig` only where the mask keeps it; the state dict holds
torch's keys (`weight_orig`, `weight_mask`). remove() makes it permanent: `weight` is the
Parameter again, holding the pruned values.

The methods (BasePruningMethod subclasses): Identity, RandomUnstructured, L1Unstructured
(the `amount` smallest |entries|, torch's topk), RandomStructured and LnStructured (whole
slices along `dim`, the smallest by their L_n norm), CustomFromMask. `amount` is a count (int)
or a fraction of the entries (or slices) to prune, with torch's validation. Pruning a tensor
that is pruned already makes a PruningContainer: the new method computes its mask on the
entries (unstructured) or the slices (structured) that the old mask keeps, as torch's.
The functions identity, random_unstructured, l1_unstructured, random_structured,
ln_structured, custom_from_mask and global_unstructured (one threshold over several tensors)
apply them; remove and is_pruned as torch's. The masks are computed on the arrays: they take
no part in the graph.
"""

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable

from ...errors import DimError, ShapeError, fmt_shape
from ...tensor import Tensor, as_tensor, ones_like, rand

__all__ = ["BasePruningMethod", "PruningContainer", "Identity", "RandomUnstructured",
           "L1Unstructured", "RandomStructured", "LnStructured", "CustomFromMask", "identity",
           "random_unstructured", "l1_unstructured", "random_structured", "ln_structured",
           "global_unstructured", "custom_from_mask", "remove", "is_pruned"]


class _ShapeAssertionError(ShapeError, AssertionError):
    """A shape that does not match: torch raises AssertionError here."""


def _new(array, like):
    """A tensor (no graph) holding `array`, on `like`'s backend."""
    return Tensor._wrap(array, like.backend)


def _check_scores(where, scores, shape):
    if tuple(scores.shape) != tuple(shape):
        raise _ShapeAssertionError(f"{where}: importance_scores should have the same shape "
                                   f"as the tensor to prune, got {fmt_shape(scores.shape)} vs "
                                   f"{fmt_shape(shape)}")


class BasePruningMethod(ABC):
    """A pruning method: compute_mask(t, default_mask) says which entries to keep; apply()
    prunes a module's tensor with it (see the module's docstring). Its instance is the forward
    pre-hook that recomputes the pruned tensor."""

    _tensor_name = None

    def __call__(self, module, inputs):
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t, default_mask):
        """The new mask (a tensor of t's shape): default_mask with more entries set to 0."""

    def apply_mask(self, module):
        """<name>_orig * <name>_mask, on the graph (the gradient reaches <name>_orig)."""
        if self._tensor_name is None:
            raise AssertionError(f"Module {type(module).__name__} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(orig.dtype) * orig

    @classmethod
    def apply(cls, module, name, *args, importance_scores=None, **kwargs):
        """Prune module.<name> with cls(*args, **kwargs) (in a PruningContainer after the
        methods already on it); the mask is computed on importance_scores (default: the
        tensor itself). Returns the method that is now the hook."""
        orig = getattr(module, name)
        if importance_scores is not None:
            _check_scores(f"{cls.__name__}.apply", importance_scores, orig.shape)
        else:
            importance_scores = orig
        method, old_method = _composite_method(cls, module, name, *args, **kwargs)
        if old_method is not None:
            default_mask = getattr(module, name + "_mask").detach().clone()
        else:
            module.register_parameter(name + "_orig", orig)
            del module._parameters[name]
            default_mask = ones_like(orig)
        try:
            mask = method.compute_mask(importance_scores, default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
            module.register_forward_pre_hook(method)
        except Exception:
            _put_back(module, name, old_method)
            raise
        return method

    def prune(self, t, default_mask=None, importance_scores=None):
        """t * the mask computed on importance_scores (default t) from default_mask (default
        all ones): on the graph, so the gradient reaches t where the mask keeps it."""
        if importance_scores is not None:
            _check_scores(f"{type(self).__name__}.prune", importance_scores, t.shape)
        else:
            importance_scores = t
        default_mask = ones_like(t) if default_mask is None else default_mask
        return t * self.compute_mask(importance_scores, default_mask=default_mask)

    def remove(self, module):
        """Make the pruning permanent: <name> becomes the Parameter <name>_orig holding the
        pruned values; <name>_orig and <name>_mask go. (The caller takes the hook off.)"""
        if self._tensor_name is None:
            raise AssertionError(f"Module {type(module).__name__} has to be pruned before "
                                 "pruning can be removed")
        weight = self.apply_mask(module)
        if hasattr(module, self._tensor_name):
            delattr(module, self._tensor_name)
        orig = module._parameters[self._tensor_name + "_orig"]
        orig.data = weight.data
        del module._parameters[self._tensor_name + "_orig"]
        del module._buffers[self._tensor_name + "_mask"]
        setattr(module, self._tensor_name, orig)


def _put_back(module, name, old_method):
    """After a pruning that failed: the module as it was. (torch's leaves a pruned tensor
    without its hook, and the failed method in the container; here the old hook, as it was,
    goes on recomputing the pruned tensor.)"""
    if old_method is None:
        orig = getattr(module, name + "_orig")
        module.register_parameter(name, orig)
        del module._parameters[name + "_orig"]
        return
    if isinstance(old_method, PruningContainer):  # (the failed method is its last)
        old_method._pruning_methods = old_method._pruning_methods[:-1]
    module.register_forward_pre_hook(old_method)


def _composite_method(cls, module, name, *args, **kwargs):
    """(the new method, or the PruningContainer of the method(s) already on module.<name> with
    it added; the method that was the hook, or None); the old hook is taken off (apply
    registers the new one)."""
    old_method, keys = None, []
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            old_method = hook
            keys.append(key)
    if len(keys) > 1:
        raise AssertionError(f"Avoid adding multiple pruning hooks to the same tensor {name} of "
                             f"module {type(module).__name__}. Use a PruningContainer.")
    method = cls(*args, **kwargs)  # (first: a refused amount leaves the hook on)
    method._tensor_name = name
    for key in keys:
        del module._forward_pre_hooks[key]
    if isinstance(old_method, PruningContainer):
        old_method.add_pruning_method(method)
        return old_method, old_method
    if old_method is not None:
        container = PruningContainer(old_method)
        container.add_pruning_method(method)
        return container, old_method
    return method, None


class PruningContainer(BasePruningMethod):
    """The pruning methods applied one after another to one tensor (iterative pruning): the
    last one's mask is computed on what the mask so far keeps."""

    def __init__(self, *args):
        self._pruning_methods = ()
        if len(args) == 1:
            self._tensor_name = args[0]._tensor_name
            self.add_pruning_method(args[0])
        else:
            for method in args:
                self.add_pruning_method(method)

    def add_pruning_method(self, method):
        """Add `method` (a BasePruningMethod on the same tensor name) at the end."""
        if not isinstance(method, BasePruningMethod) and method is not None:
            raise TypeError(f"PruningContainer.add_pruning_method: {type(method)} is not a "
                            "BasePruningMethod subclass")
        if method is not None and self._tensor_name != method._tensor_name:
            raise ValueError("PruningContainer.add_pruning_method: Can only add pruning methods "
                             f"acting on the parameter named '{self._tensor_name}' to "
                             f"PruningContainer. Found '{method._tensor_name}'")
        self._pruning_methods += (method,)

    def __len__(self):
        return len(self._pruning_methods)

    def __iter__(self):
        return iter(self._pruning_methods)

    def __getitem__(self, idx):
        return self._pruning_methods[idx]

    def compute_mask(self, t, default_mask):
        """default_mask with the last method's mask, computed on the entries (unstructured) or
        slices (structured) of t that default_mask keeps (all of t for a "global" method),
        written into it."""
        method = self._pruning_methods[-1]
        slc = _kept_part(method, t, default_mask)
        new = default_mask._data.astype(t._data.dtype, copy=True)
        part = method.compute_mask(_new(t._data[slc], t),
                                   default_mask=_new(default_mask._data[slc], default_mask))
        new[slc] = part._data.astype(new.dtype)
        return _new(new, default_mask)


def _kept_part(method, t, mask):
    """The index of the part of t that `method` prunes within a PruningContainer."""
    kind = method.PRUNING_TYPE
    if kind == "unstructured":
        return mask._data == 1
    if kind == "global":
        return (slice(None),) * t.ndim
    if kind != "structured":
        raise ValueError(f"PruningContainer: Unrecognized PRUNING_TYPE {kind}")
    if not hasattr(method, "dim"):
        raise AttributeError('PruningContainer: Pruning methods of PRUNING_TYPE "structured" '
                             "need to have the attribute `dim` defined.")
    dim = method.dim + t.ndim if method.dim < 0 else method.dim
    if not 0 <= dim < t.ndim:
        raise DimError(f"PruningContainer: dim {method.dim} is out of bounds for a tensor of "
                       f"shape {fmt_shape(t.shape)}")
    others = tuple(d for d in range(t.ndim) if d != dim)
    slc = [slice(None)] * t.ndim
    slc[dim] = mask._data.sum(axis=others) != 0
    return tuple(slc)


class Identity(BasePruningMethod):
    """Prunes nothing: the mask is all ones (torch's)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t, default_mask):
        return default_mask

    @classmethod
    def apply(cls, module, name):
        return super().apply(module, name)


def _unstructured_count(where, amount, t):
    size = t.numel()
    k = _compute_nparams_toprune(amount, size)
    _validate_pruning_amount(where, k, size)
    return k


def _pruned_at(default_mask, flat_indices):
    """A copy of default_mask with the entries at flat_indices set to 0."""
    xp = default_mask.backend.xp
    mask = xp.array(default_mask._data, order="C", copy=True)
    if len(flat_indices):
        mask.reshape(-1)[flat_indices] = 0
    return _new(mask, default_mask)


class RandomUnstructured(BasePruningMethod):
    """Prunes `amount` entries chosen at random (the default generator's stream)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init("RandomUnstructured", amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _unstructured_count("RandomUnstructured", self.amount, t)
        if k == 0:
            return _pruned_at(default_mask, [])
        xp = t.backend.xp
        prob = rand(*t.shape, backend=t.backend)._data.reshape(-1)
        return _pruned_at(default_mask, xp.argsort(-prob, kind="stable")[:k])

    @classmethod
    def apply(cls, module, name, amount):
        return super().apply(module, name, amount=amount)


class L1Unstructured(BasePruningMethod):
    """Prunes the `amount` entries of smallest absolute value (torch's topk of |t|)."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount):
        _validate_pruning_amount_init("L1Unstructured", amount)
        self.amount = amount

    def compute_mask(self, t, default_mask):
        k = _unstructured_count("L1Unstructured", self.amount, t)
        if k == 0:
            return _pruned_at(default_mask, [])
        xp = t.backend.xp
        importance = xp.abs(t._data).reshape(-1)
        return _pruned_at(default_mask, xp.argsort(importance, kind="stable")[:k])

    @classmethod
    def apply(cls, module, name, amount, importance_scores=None):
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


def _structured_count(where, amount, t, dim):
    _validate_structured_pruning(where, t)
    _validate_pruning_dim(where, t, dim)
    size = t.shape[dim]
    k = _compute_nparams_toprune(amount, size)
    _validate_pruning_amount(where, k, size)
    return size, k


def _slices_mask(t, dim, keep, default_mask):
    """Zeros of t's shape and dtype with the slices `keep` (along dim) set to 1, times
    default_mask (torch's make_mask)."""
    xp = t.backend.xp
    mask = xp.zeros(tuple(t.shape), dtype=t._data.dtype)
    slc = [slice(None)] * t.ndim
    slc[dim] = keep
    mask[tuple(slc)] = 1
    mask *= default_mask._data.astype(mask.dtype)
    return _new(mask, t)


class RandomStructured(BasePruningMethod):
    """Prunes `amount` whole slices along `dim`, chosen at random."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, dim=-1):
        _validate_pruning_amount_init("RandomStructured", amount)
        self.amount, self.dim = amount, dim

    def compute_mask(self, t, default_mask):
        size, k = _structured_count("RandomStructured", self.amount, t, self.dim)
        if k == 0:
            return default_mask
        prob = rand(size, backend=t.backend)._data
        threshold = t.backend.xp.sort(prob)[k - 1]  # (torch's kthvalue)
        return _slices_mask(t, self.dim, prob > threshold, default_mask)

    @classmethod
    def apply(cls, module, name, amount, dim=-1):
        return super().apply(module, name, amount=amount, dim=dim)


def _slice_norms(t, n, dim):
    """The L_n norm of each slice of t along dim (torch.norm over the other dims)."""
    xp = t.backend.xp
    moved = xp.moveaxis(t._data, dim, 0)
    if n in ("fro", "nuc") and t.ndim > 3:  # (torch's matrix norms: two dims to reduce)
        raise ShapeError(f"LnStructured: the {n!r} norm reduces 2 dims, but a slice of the "
                         f"tensor of shape {fmt_shape(t.shape)} along dim {dim} has "
                         f"{t.ndim - 1}")
    if n == "nuc":
        return xp.linalg.svd(moved, compute_uv=False).sum(axis=-1)
    a = xp.abs(moved.reshape(t.shape[dim], -1))
    if n == "fro":
        n = 2
    if isinstance(n, str) or not isinstance(n, numbers.Real):
        raise ValueError(f"LnStructured: n must be a number, inf, -inf, 'fro' or 'nuc', got "
                         f"{n!r}")
    if n == float("inf"):
        return a.max(axis=1)
    if n == -float("inf"):
        return a.min(axis=1)
    if n == 0:
        return (a != 0).sum(axis=1).astype(a.dtype)
    return (a ** n).sum(axis=1) ** (1.0 / n)


class LnStructured(BasePruningMethod):
    """Prunes the `amount` slices along `dim` of smallest L_n norm (n: as torch.norm's p)."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount, n, dim=-1):
        _validate_pruning_amount_init("LnStructured", amount)
        self.amount, self.n, self.dim = amount, n, dim

    def compute_mask(self, t, default_mask):
        size, k = _structured_count("LnStructured", self.amount, t, self.dim)
        norms = _slice_norms(t, self.n, self.dim)
        if k == 0:
            return default_mask
        keep = t.backend.xp.argsort(-norms, kind="stable")[:size - k]  # (torch's topk)
        return _slices_mask(t, self.dim, keep, default_mask)

    @classmethod
    def apply(cls, module, name, amount, n, dim, importance_scores=None):
        return super().apply(module, name, amount=amount, n=n, dim=dim,
                             importance_scores=importance_scores)


class CustomFromMask(BasePruningMethod):
    """Prunes where the given mask is 0."""

    PRUNING_TYPE = "global"

    def __init__(self, mask):
        self.mask = mask

    def compute_mask(self, t, default_mask):
        mask = self.mask if isinstance(self.mask, Tensor) else as_tensor(self.mask)
        if tuple(default_mask.shape) != tuple(mask.shape):
            raise _ShapeAssertionError(f"CustomFromMask: default_mask shape "
                                       f"{fmt_shape(default_mask.shape)} must match the mask's "
                                       f"shape {fmt_shape(mask.shape)}")
        xp = default_mask.backend.xp
        values = xp.asarray(mask._data).astype(default_mask._data.dtype)
        return _new(default_mask._data * values, default_mask)

    @classmethod
    def apply(cls, module, name, mask):
        return super().apply(module, name, mask=mask)


def identity(module, name):
    """Prune nothing, but with pruning's layout (<name>_orig, <name>_mask). Returns module."""
    Identity.apply(module, name)
    return module


def random_unstructured(module, name, amount):
    """Prune `amount` random entries of module.<name>. Returns module."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(module, name, amount, importance_scores=None):
    """Prune the `amount` entries of module.<name> of smallest |importance_scores| (default:
    the tensor's own). Returns module."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module, name, amount, dim):
    """Prune `amount` random slices of module.<name> along dim. Returns module."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(module, name, amount, n, dim, importance_scores=None):
    """Prune the `amount` slices of module.<name> along dim of smallest L_n norm (of
    importance_scores, default the tensor's own). Returns module."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def _flat(tensors):
    """The tensors' values (arrays) joined into one vector tensor (no graph)."""
    first = tensors[0]
    xp = first.backend.xp
    return _new(xp.concatenate([xp.asarray(t._data).reshape(-1) for t in tensors]), first)


def _mask_so_far(module, name):
    mask = getattr(module, name + "_mask", None)
    return ones_like(getattr(module, name)) if mask is None else mask


def global_unstructured(parameters, pruning_method, importance_scores=None, **kwargs):
    """Prune the (module, name) pairs of `parameters` together: pruning_method(**kwargs), an
    unstructured method, computes one mask over all their entries (importance_scores: a dict
    {(module, name): tensor}, default the tensors' own), and each tensor gets its part by
    custom_from_mask (on top of its mask so far)."""
    if not isinstance(parameters, Iterable):
        raise TypeError("global_unstructured(): parameters is not an Iterable")
    parameters = list(parameters)
    importance_scores = importance_scores if importance_scores is not None else {}
    if not isinstance(importance_scores, dict):
        raise TypeError("global_unstructured(): importance_scores must be of type dict, got "
                        f"{type(importance_scores).__name__}")
    if not parameters:
        raise ValueError("global_unstructured(): got no (module, name) pairs to prune")
    scores = _flat([importance_scores.get((m, n), getattr(m, n)) for m, n in parameters])
    default_mask = _flat([_mask_so_far(m, n) for m, n in parameters])
    container = PruningContainer()
    container._tensor_name = "temp"
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"
    if method.PRUNING_TYPE != "unstructured":
        raise TypeError('global_unstructured(): Only "unstructured" PRUNING_TYPE supported for '
                        f"the `pruning_method`. Found method {pruning_method} of type "
                        f"{method.PRUNING_TYPE}")
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    pointer = 0
    for module, name in parameters:
        param = getattr(module, name)
        n = param.numel()
        custom_from_mask(module, name, mask=final_mask[pointer:pointer + n].view_as(param))
        pointer += n


def custom_from_mask(module, name, mask):
    """Prune module.<name> where `mask` is 0. Returns module."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module, name):
    """Make the pruning of module.<name> permanent (see BasePruningMethod.remove) and take
    its hook off. Returns module."""
    for key, hook in module._forward_pre_hooks.items():
        if isinstance(hook, BasePruningMethod) and hook._tensor_name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"remove: Parameter '{name}' of module {type(module).__name__} has to be "
                     "pruned before pruning can be removed")


def is_pruned(module):
    """Whether module or a module inside it has a pruning hook."""
    for _, submodule in module.named_modules():
        for hook in submodule._forward_pre_hooks.values():
            if isinstance(hook, BasePruningMethod):
                return True
    return False


def _validate_pruning_amount_init(where, amount):
    """amount: an int >= 0 or a float in [0, 1] (torch's TypeError and ValueError)."""
    if not isinstance(amount, numbers.Real):
        raise TypeError(f"{where}: Invalid type for amount: {amount!r}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
            not isinstance(amount, numbers.Integral)
            and (float(amount) > 1.0 or float(amount) < 0.0)):
        raise ValueError(f"{where}: amount={amount} should either be a float in the range "
                         "[0, 1] or a non-negative integer")


def _validate_pruning_amount(where, amount, tensor_size):
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise ValueError(f"{where}: amount={amount} should be smaller than the number of "
                         f"parameters to prune={tensor_size}")


def _validate_structured_pruning(where, t):
    if t.ndim <= 1:
        raise ValueError(f"{where}: Structured pruning can only be applied to multidimensional "
                         f"tensors. Found tensor of shape {fmt_shape(t.shape)} with {t.ndim} "
                         "dims")


def _compute_nparams_toprune(amount, tensor_size):
    if isinstance(amount, numbers.Integral):
        return amount
    return round(amount * tensor_size)


def _validate_pruning_dim(where, t, dim):
    if not -t.ndim <= dim < t.ndim:
        raise DimError(f"{where}: Invalid index {dim} for tensor of size {fmt_shape(t.shape)}")
