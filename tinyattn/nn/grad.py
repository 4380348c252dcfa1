"""torch.nn.grad's functions: the gradients of a convolution with respect to its input
(conv1d_input, conv2d_input, conv3d_input) and its weight (conv1d_weight, conv2d_weight,
conv3d_weight), given the gradient of its output. tinyattn.functional.grad is this module, as
torch.nn.functional.grad is torch.nn.grad.

Each is the gradient of tinyattn's own conv, taken with autograd.grad: with create_graph when
a tensor given needs grad (and grad mode is on), so the results are differentiable in turn.
"""

from .. import functional as F
from ..autograd import enable_grad, grad, is_grad_enabled
from ..errors import ShapeError, fmt_shape
from ..tensor import zeros

__all__ = ["conv1d_input", "conv1d_weight", "conv2d_input", "conv2d_weight", "conv3d_input",
           "conv3d_weight"]


def conv1d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv1d(input, weight) for an input of `input_size` (N, C_in, L)."""
    return _input_grad("conv1d_input", F.conv1d, input_size, weight, grad_output,
                       (stride, padding, dilation, groups))


def conv1d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1,  # noqa: A002
                  groups=1):
    """The gradient of conv1d(input, weight) for a weight of `weight_size` (C_out, C_in/g, k)."""
    return _weight_grad("conv1d_weight", F.conv1d, input, weight_size, grad_output,
                        (stride, padding, dilation, groups))


def conv2d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv2d(input, weight) for an input of `input_size` (N, C_in, H, W)."""
    return _input_grad("conv2d_input", F.conv2d, input_size, weight, grad_output,
                       (stride, padding, dilation, groups))


def conv2d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1,  # noqa: A002
                  groups=1):
    """The gradient of conv2d(input, weight) for a weight of `weight_size`."""
    return _weight_grad("conv2d_weight", F.conv2d, input, weight_size, grad_output,
                        (stride, padding, dilation, groups))


def conv3d_input(input_size, weight, grad_output, stride=1, padding=0, dilation=1, groups=1):
    """The gradient of conv3d(input, weight) for an input of `input_size` (N, C_in, D, H, W)."""
    return _input_grad("conv3d_input", F.conv3d, input_size, weight, grad_output,
                       (stride, padding, dilation, groups))


def conv3d_weight(input, weight_size, grad_output, stride=1, padding=0, dilation=1,  # noqa: A002
                  groups=1):
    """The gradient of conv3d(input, weight) for a weight of `weight_size`."""
    return _weight_grad("conv3d_weight", F.conv3d, input, weight_size, grad_output,
                        (stride, padding, dilation, groups))


def _input_grad(name, conv, input_size, weight, grad_output, opts):
    w = F._t(weight)
    g = F._t(grad_output, w)
    x = zeros(*_size(input_size), dtype=w.dtype, backend=w.backend, requires_grad=True)
    return _grad_of(name, conv, x, w, g, x, opts, w.requires_grad or g.requires_grad)


def _weight_grad(name, conv, input, weight_size, grad_output, opts):  # noqa: A002
    x = F._t(input)
    g = F._t(grad_output, x)
    w = zeros(*_size(weight_size), dtype=x.dtype, backend=x.backend, requires_grad=True)
    return _grad_of(name, conv, x, w, g, w, opts, x.requires_grad or g.requires_grad)


def _size(size):
    return tuple(int(n) for n in size)


def _grad_of(name, conv, x, w, g, wrt, opts, needs_graph):
    """d<conv(x, w), g>/d wrt: with a graph of its own when a given tensor needs grad."""
    graph = needs_graph and is_grad_enabled()
    with enable_grad():
        y = conv(x, w, None, *opts)
    if y.shape != g.shape:
        raise ShapeError(f"{name}: grad_output {fmt_shape(g.shape)} must have the shape of the "
                         f"convolution's output, {fmt_shape(y.shape)} (input "
                         f"{fmt_shape(x.shape)}, weight {fmt_shape(w.shape)}, stride, padding, "
                         f"dilation, groups = {opts})")
    (result,) = grad(y, wrt, g, create_graph=graph)
    return result
