"""Recurrent modules with torch's names, parameters and numbers: RNNCell, LSTMCell, GRUCell and
the layers RNN, LSTM, GRU (num_layers, bias, batch_first, dropout between layers, bidirectional,
LSTM's proj_size).

Each step is written with the differentiable ops (F.linear, sigmoid, tanh, relu, chunk, stack,
cat), so autograd does the backward; nothing here has a VJP of its own. The gates follow
torch's order and formulas: LSTM i, f, g, o; GRU r, z, n with
n = tanh(W_in x + b_in + r * (W_hn h + b_hn)). Parameters are named as torch's (weight_ih_l0,
bias_hh_l1_reverse, weight_hr_l0 ...), so a torch model's state dict (as NumPy arrays) loads
with load_state_dict, and every one starts U(-1/√hidden_size, 1/√hidden_size) from the
package's generator (ta.manual_seed makes it reproducible).

The layers also take a PackedSequence (nn.utils.rnn.pack_padded_sequence and its kin) as
torch's: forward(packed, h_0) -> (packed output, h_n). The time loop then runs over the
packed batch_sizes: at step t only the first batch_sizes[t] sequences (sorted longest first)
are active, so the state is sliced as sequences end (their final states kept) and, in the
reverse direction, grows as sequences begin at their own last step; no masking, so values
and gradients are exact. The output keeps the input's batch_sizes, sorted_indices and
unsorted_indices; a given h_0 is taken in the original batch order (index_select with
sorted_indices), and h_n (c_n) is returned in it (unsorted_indices); batch_first does not
apply to packed input. flatten_parameters() is a no-op (there is no cuDNN weight buffer to
compact).
"""

import math
import numbers
import warnings

from .. import functional as F
from ..errors import ShapeError, fmt_shape
from ..tensor import Tensor, zeros
from . import init
from .layers import _place
from .module import Module, Parameter
from .utils.rnn import PackedSequence

__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "RNNBase", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_NAMES = ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")


# ---- one step: x (N, I), state (N, H) or (h, c), weights (w_ih, w_hh, b_ih, b_hh, w_hr) ------


def _tanh_step(x, h, weights):
    w_ih, w_hh, b_ih, b_hh, _ = weights
    return F.tanh(F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh))


def _relu_step(x, h, weights):
    w_ih, w_hh, b_ih, b_hh, _ = weights
    return F.relu(F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh))


def _lstm_step(x, state, weights):
    w_ih, w_hh, b_ih, b_hh, w_hr = weights
    h, c = state
    i, f, g, o = (F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h = F.sigmoid(o) * F.tanh(c)
    return (h if w_hr is None else F.linear(h, w_hr)), c


def _gru_step(x, h, weights):
    w_ih, w_hh, b_ih, b_hh, _ = weights
    i_r, i_z, i_n = F.linear(x, w_ih, b_ih).chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = F.sigmoid(i_r + h_r)
    z = F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)
    return (1 - z) * n + z * h


_STEPS = {"RNN_TANH": _tanh_step, "RNN_RELU": _relu_step, "LSTM": _lstm_step, "GRU": _gru_step}


def _mode(nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


def _check_sizes(input_size, hidden_size, layers=False):
    """ints, hidden_size > 0; for RNN, LSTM and GRU (`layers`) input_size > 0 too (torch's
    checks: its cells take an input of no features)."""
    for name, size in (("input_size", input_size), ("hidden_size", hidden_size)):
        if isinstance(size, bool) or not isinstance(size, numbers.Integral):
            raise TypeError(f"{name} should be of type int, got: {type(size).__name__}")
    if layers and input_size <= 0:
        raise ValueError("input_size must be greater than zero")
    if hidden_size <= 0:
        raise ValueError("hidden_size must be greater than zero")


def _reset(module, hidden_size):
    """torch's reset_parameters: every parameter U(-1/√hidden_size, 1/√hidden_size)."""
    stdv = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0.0
    for weight in module.parameters():
        init.uniform_(weight, -stdv, stdv)


def _want(name, label, got, want, input):  # noqa: A002 - torch's argument name
    if tuple(got.shape) != tuple(want):
        raise ShapeError(f"{name}: {label} has shape {fmt_shape(got.shape)}, expected "
                         f"{fmt_shape(want)} for input of shape {fmt_shape(input.shape)}")


def _check_input(module, input, ndims, word):  # noqa: A002
    """input a tensor of ndims[0] (unbatched) or ndims[1] dims ending in module.input_size, or
    torch's error naming the module and the shape (`word`: torch's, "input" for a cell's,
    "tensor" for a layer's)."""
    name = type(module).__name__
    _tensor_input(name, input)
    if input.ndim not in ndims:
        raise ShapeError(f"{name}: Expected input to be {ndims[0]}D or {ndims[1]}D, got "
                         f"{input.ndim}D {word} instead (shape {fmt_shape(input.shape)})")
    if input.shape[-1] != module.input_size:
        raise ShapeError(f"{name}: input has shape {fmt_shape(input.shape)}, its last dim "
                         f"must be input_size={module.input_size}")


def _tensor_input(name, input, also=""):  # noqa: A002
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}: input must be a Tensor, got {type(input).__name__}{also}")


def _check_packed(module, data):
    """A PackedSequence's data: a tensor (sum of lengths, input_size), as torch's."""
    name = type(module).__name__
    _tensor_input(name, data)
    if data.ndim != 2 or data.shape[-1] != module.input_size:
        raise ShapeError(f"{name}: a PackedSequence's data has shape {fmt_shape(data.shape)}, "
                         f"expected (sum of lengths, input_size={module.input_size})")


# ---- a packed batch: rows sorted longest first, state (N, H) or (h, c) --------------------------


def _rows(state, start, stop):
    """Rows start:stop of a state (the state itself when that is all of it)."""
    if isinstance(state, tuple):
        return tuple(_rows(s, start, stop) for s in state)
    return state if start == 0 and stop >= state.shape[0] else state[start:stop]


def _join(parts):
    """States stacked row-wise, in order."""
    if isinstance(parts[0], tuple):
        return tuple(F.cat(list(p), 0) for p in zip(*parts, strict=True))
    return F.cat(parts, 0)


def _pick(state, order, dim):
    """A state (or (h, c)) with its batch dim put in `order` (an index tensor), as torch's
    index_select on hx with a PackedSequence's sorted / unsorted indices."""
    if isinstance(state, tuple):
        return tuple(_pick(s, order, dim) for s in state)
    return state.index_select(dim, order)


def _out(state):
    return state[0] if isinstance(state, tuple) else state


def _packed_forward(step, steps, sizes, state, weights):
    """Forward in time over a packed batch: at step t the first sizes[t] sequences run, and
    those that end keep their state. Returns each step's output and the final states."""
    outputs, ended = [], []
    for x_t, n in zip(steps, sizes, strict=True):
        if n < _out(state).shape[0]:
            ended.append(_rows(state, n, _out(state).shape[0]))
            state = _rows(state, 0, n)
        state = step(x_t, state, weights)
        outputs.append(_out(state))
    return outputs, (_join([state] + ended[::-1]) if ended else state)


def _packed_backward(step, steps, sizes, initial, weights):
    """Backward in time: each sequence starts from its own last step (with its row of
    `initial`) and runs to its first. Returns each step's output (in time order) and the final
    states."""
    outputs, state = [None] * len(steps), _rows(initial, 0, sizes[-1])
    for t in reversed(range(len(steps))):
        have = _out(state).shape[0]
        if sizes[t] > have:
            state = _join([state, _rows(initial, have, sizes[t])])
        state = step(steps[t], state, weights)
        outputs[t] = _out(state)
    return outputs, state


# ---- cells ---------------------------------------------------------------------------------------


class RNNCellBase(Module):
    """What the three cells share: weight_ih (gates*H, I), weight_hh (gates*H, H), bias_ih and
    bias_hh (gates*H,), or no biases with bias=False."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        _check_sizes(input_size, hidden_size)
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = num_chunks * hidden_size
        self.weight_ih = Parameter(zeros(rows, input_size, dtype=dtype))
        self.weight_hh = Parameter(zeros(rows, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(zeros(rows, dtype=dtype))
            self.bias_hh = Parameter(zeros(rows, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()
        _place(self, device)

    def reset_parameters(self):
        _reset(self, self.hidden_size)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _weights(self):
        return self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh, None

    def _input(self, input):  # noqa: A002
        """input as (N, I), and whether it came batched."""
        _check_input(self, input, (1, 2), "input")
        return (input, True) if input.ndim == 2 else (input.unsqueeze(0), False)

    def _state(self, hx, x, batched, input, label="hx"):  # noqa: A002
        """One state tensor as (N, H): zeros for None, else checked against the input."""
        if hx is None:
            return zeros(x.shape[0], self.hidden_size, dtype=x.dtype, backend=x.backend)
        want = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        _want(type(self).__name__, label, hx, want, input)
        return hx if batched else hx.unsqueeze(0)


def _unbatch(t, batched):
    return t if batched else t.squeeze(0)


class RNNCell(RNNCellBase):
    """h' = tanh(W_ih x + b_ih + W_hh h + b_hh) (or relu): torch's RNNCell."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        _mode(nonlinearity)  # (an unknown one refused first, as torch)
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):  # noqa: A002
        x, batched = self._input(input)
        h = self._state(hx, x, batched, input)
        step = _relu_step if self.nonlinearity == "relu" else _tanh_step
        return _unbatch(step(x, h, self._weights()), batched)


class LSTMCell(RNNCellBase):
    """torch's LSTMCell: gates i, f, g, o; forward(input, (h, c)) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        x, batched = self._input(input)
        h, c = (None, None) if hx is None else hx
        h = self._state(h, x, batched, input, "hx[0]")
        c = self._state(c, x, batched, input, "hx[1]")
        h, c = _lstm_step(x, (h, c), self._weights())
        return _unbatch(h, batched), _unbatch(c, batched)


class GRUCell(RNNCellBase):
    """torch's GRUCell: gates r, z, n; h' = (1 - z) * n + z * h."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):  # noqa: A002
        x, batched = self._input(input)
        h = self._state(hx, x, batched, input)
        return _unbatch(_gru_step(x, h, self._weights()), batched)


# ---- layers --------------------------------------------------------------------------------------


def _check_layer_settings(mode, num_layers, dropout, proj_size, hidden_size):
    if (isinstance(dropout, bool) or not isinstance(dropout, numbers.Number)
            or not 0 <= dropout <= 1):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         "probability of an element being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
    if isinstance(num_layers, bool) or not isinstance(num_layers, numbers.Integral):
        raise TypeError(f"num_layers should be of type int, got: {type(num_layers).__name__}")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size and proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")
    if proj_size and mode != "LSTM":
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the stack of layers (each one or two directions) and
    torch's parameter names, shapes and order."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0, device=None,
                 dtype=None):
        super().__init__()
        _check_sizes(input_size, hidden_size, layers=True)
        _check_layer_settings(mode, num_layers, dropout, proj_size, hidden_size)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(self._directions):
                self._add_weights(layer, direction, dtype)
        self.reset_parameters()
        _place(self, device)

    @property
    def _directions(self):
        return 2 if self.bidirectional else 1

    def _add_weights(self, layer, direction, dtype):
        rows = _GATES[self.mode] * self.hidden_size
        out = self.proj_size or self.hidden_size
        shapes = [(rows, self.input_size if layer == 0 else out * self._directions),
                  (rows, out)]
        if self.bias:
            shapes += [(rows,), (rows,)]
        names = list(_NAMES[:len(shapes)])
        if self.proj_size:
            shapes.append((self.proj_size, self.hidden_size))
            names.append("weight_hr")
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        for name, shape in zip(names, shapes, strict=True):
            setattr(self, name + suffix, Parameter(zeros(*shape, dtype=dtype)))
            self._flat_weights_names.append(name + suffix)

    def reset_parameters(self):
        _reset(self, self.hidden_size)

    def flatten_parameters(self):
        """torch's cuDNN weight compaction: nothing to do here."""

    @property
    def all_weights(self):
        """[[w_ih, w_hh, b_ih, b_hh(, w_hr)] for each layer and direction], as torch's."""
        per = len(self._flat_weights_names) // (self.num_layers * self._directions)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        for name, default in (("proj_size", 0), ("num_layers", 1), ("bias", True),
                              ("batch_first", False), ("dropout", 0.0),
                              ("bidirectional", False)):
            if getattr(self, name) != default:
                s += f", {name}={getattr(self, name)}"
        return s

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return tuple(getattr(self, n + suffix, None) for n in _NAMES)

    # -- forward ---------------------------------------------------------------------------------

    def forward(self, input, hx=None):  # noqa: A002
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, batched = self._time_major(input)
        states = self._initial_states(hx, x, batched, input)
        finals = []
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = F.dropout(x, self.dropout, training=True)
            x, done = self._run_layer(layer, x, states)
            finals += done
        if self.batch_first and batched:
            x = x.transpose(0, 1)
        output = x if batched else x.squeeze(1)
        if self.mode == "LSTM":
            h_n, c_n = (self._final([s[i] for s in finals], batched) for i in (0, 1))
            return output, (h_n, c_n)
        return output, self._final(finals, batched)

    @staticmethod
    def _final(states, batched):
        stacked = F.stack(states, 0)
        return stacked if batched else stacked.squeeze(1)

    def _forward_packed(self, packed, hx):
        """torch's forward on a PackedSequence: each sequence runs over its own steps; the
        output is packed as the input, h_n (and c_n) in the batch's original order."""
        x, sizes = packed.data, [int(n) for n in packed.batch_sizes.tolist()]
        _check_packed(self, x)
        states = self._initial_states(hx, x, True, x, batch=sizes[0])
        if hx is not None and packed.sorted_indices is not None:
            states = [_pick(s, packed.sorted_indices, 0) for s in states]
        finals = []
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = F.dropout(x, self.dropout, training=True)
            x, done = self._run_packed_layer(layer, x, sizes, states)
            finals += done
        output = PackedSequence(x, packed.batch_sizes, packed.sorted_indices,
                                packed.unsorted_indices)
        if self.mode == "LSTM":
            finals = tuple(F.stack([s[i] for s in finals], 0) for i in (0, 1))
        else:
            finals = F.stack(finals, 0)
        if packed.unsorted_indices is not None:
            finals = _pick(finals, packed.unsorted_indices, 1)
        return output, finals

    def _run_packed_layer(self, layer, x, sizes, states):
        """One layer over packed data x (sum of lengths, I): its packed output
        (sum of lengths, D*H_out) and the final state of each direction."""
        steps = x.split(sizes)
        outputs, finals = [], []
        for direction in range(self._directions):
            run = _packed_backward if direction else _packed_forward
            seq, final = run(_STEPS[self.mode], steps, sizes,
                             states[layer * self._directions + direction],
                             self._weights(layer, direction))
            outputs.append(F.cat(seq, 0))
            finals.append(final)
        return (outputs[0] if len(outputs) == 1 else F.cat(outputs, -1)), finals

    def _time_major(self, input):  # noqa: A002
        """input as (L, N, I), and whether it came batched."""
        _tensor_input(type(self).__name__, input, " (or a PackedSequence)")
        _check_input(self, input, (2, 3), "tensor")
        if input.ndim == 2:
            return input.unsqueeze(1), False
        return (input.transpose(0, 1) if self.batch_first else input), True

    def _initial_states(self, hx, x, batched, input, batch=None):  # noqa: A002
        """[state of each layer and direction]: h (N, H_out), or (h, c) for LSTM (N: x's
        dim 1, or `batch`)."""
        k, n = self.num_layers * self._directions, x.shape[1] if batch is None else batch
        out = self.proj_size or self.hidden_size
        if self.mode != "LSTM":
            return list(self._state(hx, "hx", (k, n, out), x, batched, input).unbind(0))
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"{type(self).__name__}: hx must be a tuple (h_0, c_0), got "
                            f"{type(hx).__name__}")
        h, c = (None, None) if hx is None else hx
        h = self._state(h, "hx[0]", (k, n, out), x, batched, input)
        c = self._state(c, "hx[1]", (k, n, self.hidden_size), x, batched, input)
        return list(zip(h.unbind(0), c.unbind(0), strict=True))

    def _state(self, hx, label, want, x, batched, input):  # noqa: A002
        if hx is None:
            return zeros(*want, dtype=x.dtype, backend=x.backend)
        _want(type(self).__name__, label, hx, want if batched else (want[0], want[2]), input)
        return hx if batched else hx.unsqueeze(1)

    def _run_layer(self, layer, x, states):
        """One layer over the sequence x (L, N, I): its output (L, N, D*H_out) and the final
        state of each direction."""
        step, steps = _STEPS[self.mode], x.unbind(0)
        outputs, finals = [], []
        for direction in range(self._directions):
            state = states[layer * self._directions + direction]
            weights = self._weights(layer, direction)
            seq = [None] * len(steps)
            order = reversed(range(len(steps))) if direction else range(len(steps))
            for t in order:
                state = step(steps[t], state, weights)
                seq[t] = state[0] if self.mode == "LSTM" else state
            outputs.append(F.stack(seq, 0))
            finals.append(state)
        return (outputs[0] if len(outputs) == 1 else F.cat(outputs, -1)), finals


class RNN(RNNBase):
    """torch's RNN: h_t = tanh(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh) (or relu), stacked
    num_layers deep, each layer one or two directions. forward(input, h_0) -> (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__(_mode(nonlinearity), input_size, hidden_size, num_layers, bias,
                         batch_first, dropout, bidirectional, 0, device, dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """torch's LSTM (gates i, f, g, o; proj_size > 0 projects h with weight_hr).
    forward(input, (h_0, c_0)) -> (output, (h_n, c_n))."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """torch's GRU (gates r, z, n). forward(input, h_0) -> (output, h_n)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, 0, device, dtype)
