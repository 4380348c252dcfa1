"""Generator: a random stream of its own (torch.Generator), for the functions that take
`generator=`: randn, rand, randint, randperm, normal, multinomial, bernoulli, Tensor.normal_ and
uniform_, and nn.init's random fills.

Without a generator, those draw from their backend's own stream, which `tinyattn.manual_seed`
seeds; `default_generator` is the NumPy backend's stream as a Generator (torch.default_generator),
which manual_seed returns. A Generator seeded with `manual_seed(s)` gives the same draws whatever
else the program draws in between, and its state can be saved and restored (`get_state`,
`set_state`).
Reseeding (manual_seed, seed, set_state) is told to the tracers as an effect (autograd's
side_effect, plugged in by tensor.py: this layer imports nothing of the graph's): a captured
step refuses it inside fn, where a replay would draw on without it.
"""

import numbers

import numpy as np

from . import backends
from .errors import BackendError
from .return_types import Device


def _no_one(what):
    """Where reseedings are told until tell_effects_to() plugs in the tracers' side_effect."""


_side_effect = _no_one


def tell_effects_to(side_effect):
    """Tell each reseeding to side_effect(what), what being "Generator.manual_seed()",
    "Generator.seed()" or "Generator.set_state()" (tensor.py passes autograd.side_effect)."""
    global _side_effect
    _side_effect = side_effect


class Generator:
    """A random stream on one backend (device "cpu" / "numpy", or "cuda" / "cupy"; the default
    backend when none is given), seeded from the operating system until manual_seed."""

    def __init__(self, device=None):
        self.backend = backends.get_backend() if device is None else backends.backend(device)
        self._start(_entropy())  # (not seed(): a generator being made is no reseeding)

    @property
    def device(self):
        """The device it draws on, as a tensor's .device (torch's): device(type='cpu') for the
        NumPy backend, device(type='cuda') for CuPy; equal to "cpu" / "cuda"."""
        return Device.of_backend(self.backend.name)

    def manual_seed(self, seed):
        """Start the stream again from `seed` (an int; a negative one wraps, -1 is 2**64 - 1,
        as torch's); returns the generator, as torch."""
        seed = seed_of("Generator.manual_seed", seed)
        _side_effect("Generator.manual_seed()")
        return self._start(seed)

    def seed(self):
        """Seed from the operating system's entropy (63 bits); returns the seed chosen."""
        _side_effect("Generator.seed()")
        return self._start(_entropy()).initial_seed()

    def _start(self, seed):
        """Start the stream from `seed` (an int in 0..2**64 - 1, checked), telling no tracer."""
        self._initial = seed
        self.rng = self.backend.xp.random.default_rng(seed)
        return self

    def initial_seed(self):
        """The seed the stream last started from."""
        return self._initial

    def get_state(self):
        """A copy of the stream's state, for set_state (the same draws follow it again)."""
        return {"device": self.backend.name, "initial_seed": self._initial,  # (a saved state's
                "bit_generator": self.backend.rng_state(self.rng)}  # "numpy", as before)

    def set_state(self, state):
        """Go back to a state get_state returned (of a generator on the same backend)."""
        if not isinstance(state, dict) or set(state) != {"device", "initial_seed",
                                                         "bit_generator"}:
            raise TypeError("Generator.set_state: takes what Generator.get_state() returned, "
                            f"got {type(state).__name__}")
        if Device.of_backend(state["device"]) != self.device:
            raise BackendError(f"Generator.set_state: the state is of a {state['device']} "
                               f"generator, this one draws on {self.backend.name}")
        try:
            rng = self.backend.rng_at(state["bit_generator"])
        except (TypeError, ValueError, KeyError) as e:
            raise TypeError(f"Generator.set_state: the state of a {self.backend.name} generator is "
                            f"what get_state returned; this one is not ({e})") from e
        _side_effect("Generator.set_state()")
        self.rng, self._initial = rng, state["initial_seed"]
        return self

    def __repr__(self):
        return f"<tinyattn.Generator on {self.backend.name}, initial seed {self._initial}>"


class _DefaultGenerator(Generator):
    """The NumPy backend's own stream as a Generator (torch.default_generator, the CPU's): the
    one draws without generator= take and tinyattn.manual_seed seeds, which returns it. Its
    manual_seed, seed and set_state move that stream itself (the CuPy backend's stays)."""

    def __init__(self):
        self._initial = None  # (the seed tinyattn.manual_seed or this one's methods last gave)

    @property
    def backend(self):  # (looked up when used: `import tinyattn` makes no backend)
        return backends.backend("numpy")

    @property
    def rng(self):
        return self.backend.rng

    @rng.setter
    def rng(self, rng):
        self.backend.rng = rng

    def initial_seed(self):
        """The seed the stream last started from (an unseeded one: its system entropy)."""
        if self._initial is None:
            return int(self.rng.bit_generator.seed_seq.entropy)
        return self._initial

    def _seeded(self, seed):
        """tinyattn.manual_seed(seed) has just seeded the stream: remember the seed."""
        self._initial = seed
        return self

    def __repr__(self):
        return f"<tinyattn.default_generator on numpy, initial seed {self.initial_seed()}>"


default_generator = _DefaultGenerator()


def _entropy():
    """A seed from the operating system's entropy: 63 bits, an int >= 0."""
    return int(np.random.SeedSequence().entropy) % 2**63


def seed_of(where, seed, cast=False):
    """`seed` as a stream's seed, read as torch reads it: an int in -2**63..2**64 - 1, a
    negative one wrapped into 0..2**64 - 1 (-1 is 2**64 - 1); with cast (tinyattn.manual_seed),
    anything int() takes first (1.5 is 1, "3" is 3, True is 1, as torch's)."""
    if cast and not isinstance(seed, numbers.Integral):
        try:
            seed = int(seed)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: the seed must be an int (or what int() takes), got "
                          f"{seed!r:.40} ({e})") from None
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) and not cast:
        raise ValueError(f"{where}: the seed must be an int, got {seed!r:.40}")
    if not -2**63 <= seed < 2**64:
        raise ValueError(f"{where}: the seed {seed} is past -2**63..2**64 - 1 (torch: Overflow "
                         "when unpacking long long)")
    return int(seed) % 2**64


def check(generator, be, where):
    """`generator` (None, or a Generator on backend `be`) checked for `where` (a function's
    name): a wrong type or backend is an error that names it."""
    if generator is None:
        return None
    if not isinstance(generator, Generator):
        raise TypeError(f"{where}: generator must be a tinyattn.Generator, got "
                        f"{type(generator).__name__}")
    if generator.backend is not be:
        raise BackendError(f"{where}: the generator draws on {generator.backend.name}, the "
                           f"tensor is made on {be.name}: make it with "
                           f"tinyattn.Generator('{be.name}')")
    return generator


def rng_of(be, generator):
    """The NumPy/CuPy random Generator to draw from: the generator's, else the backend's."""
    return be.rng if generator is None else generator.rng
