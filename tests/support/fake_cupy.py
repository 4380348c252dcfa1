"""A stand-in for CuPy on NumPy, strict where CuPy is strict, so CupyBackend runs on the CPU.

`make_fake()` returns {module name: module} for "cupy", "cupyx", "cupyx.scipy" and
"cupyx.scipy.special", to be put in sys.modules by a test. Device arrays are `FakeArray`s: a
wrapper around a NumPy array (not a subclass), so the mistakes that break on a real GPU break
here too: `np.asarray(device_array)` raises TypeError (implicit device-to-host copy), mixing a
NumPy ndarray into a device op raises TypeError, `isinstance(a, np.ndarray)` is False, and
reductions and indexing give 0-d device arrays, never NumPy scalars. NumPy scalars and Python
numbers mix freely, NumPy arrays inside an index are converted, as in CuPy.

Kernels: `RawModule(...).get_function(name)` gives a `FakeRawKernel` that checks its launch
arguments (device arrays and NumPy scalars only) and records the launch in `module.launches`.
With `make_fake(emulate=True)` it then runs the kernel's own CUDA source on the CPU
(tests/support/cuda_emu.py), and `empty`/`empty_like` give NaN garbage as a GPU would, so an
element a kernel forgets to write shows; otherwise it runs nothing (outputs are left as they were,
zeros). `ElementwiseKernel` runs the NumPy
replay of its body from tests/support/kernel_refs.py, so the kernels-on GELU and Adam host
code can run end to end. The random generator offers only the methods and dtypes CuPy's has.
"""

import threading
import types

import kernel_refs  # tests/support
import numpy as np

from tinyattn.backends import cuda_launch as cl
from tinyattn.backends.numpy_backend import NumpyBackend

IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
            "construct a NumPy array explicitly.")


DEVICE_BASE = 2**40  # where the fake device's memory starts (any multiple of 256 would do)


class _Flags:
    """cupy.ndarray.flags (CuPy 13): three read-only flags, also by their NumPy key."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, c_contiguous, f_contiguous, owndata):
        self.c_contiguous, self.f_contiguous, self.owndata = c_contiguous, f_contiguous, owndata

    def __getitem__(self, key):
        names = {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                 "OWNDATA": "owndata"}
        if key not in names:
            raise KeyError(f"{key} is not defined for cupy.ndarray.flags")
        return getattr(self, names[key])


class FakeArray:
    """A device array: a NumPy array that refuses to leave the device without `.get()`."""

    __slots__ = ("_a",)
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, a):
        assert isinstance(a, np.ndarray)
        object.__setattr__(self, "_a", a)

    @property
    def data(self):
        """CuPy's MemoryPointer, as far as a kernel launch cares: `ptr`, the device address of
        element 0 (allocations start at multiples of 256 bytes; a view lies where it lies in
        its array, tests/support/cuda_emu.py places it there too)."""
        import cuda_emu

        return types.SimpleNamespace(ptr=DEVICE_BASE + cuda_emu.device_offset(self._a))

    @property
    def flags(self):
        """CuPy's flags as CuPy 13 and before have them: c_contiguous, f_contiguous and owndata,
        no writeable (newer CuPy adds it), so code must read that one with a default."""
        return _Flags(self._a.flags.c_contiguous, self._a.flags.f_contiguous, self._a.base is None)

    # -- leaving the device: only explicitly --------------------------------------------------
    def __array__(self, *args, **kwargs):
        raise TypeError(IMPLICIT)

    def get(self, stream=None, order="C", out=None):
        return np.array(self._a, order=order)

    @property
    def __cuda_array_interface__(self):
        """What marks a CuPy array as device memory (the CUDA array interface, version 3)."""
        i = self._a.__array_interface__
        return {"shape": i["shape"], "typestr": i["typestr"], "data": i["data"],
                "strides": i["strides"], "version": 3}

    def __repr__(self):
        return repr(self._a)

    __str__ = __repr__

    def __format__(self, spec):
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __complex__(self):
        return complex(self._a)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (wrap(a) for a in self._a)

    def __setattr__(self, name, value):
        setattr(self._a, name, value)  # shape = ..., strides are NumPy's rules

    # -- attributes and methods: NumPy's, with device arrays in and out ----------------------
    def __getattr__(self, name):
        if name.startswith("__"):  # __array_interface__ & co. would let NumPy copy implicitly
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if name in ("base",):
            return None if attr is None else wrap(attr)
        if name in ("T", "mT", "real", "imag", "flat"):
            return wrap(attr)
        if not callable(attr):
            return attr

        def method(*args, **kwargs):
            out = attr(*unwrap(args), **unwrap(kwargs))
            if name == "diagonal" and self._a.flags.writeable:
                out.flags.writeable = True  # (NumPy's is read-only, CuPy's a writable view)
            return self if out is self._a else wrap(out)

        return method

    def __getitem__(self, index):
        return wrap(self._a[unwrap(index, host_ok=True)])

    def __setitem__(self, index, value):
        self._a[unwrap(index, host_ok=True)] = unwrap(value, host_ok=True)

    # -- NumPy's protocols: np.exp(device) and np.sum(device) dispatch, as CuPy does --------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        result = getattr(ufunc, method)(*unwrap(inputs), **unwrap(kwargs))
        if out is not None:
            return out[0] if len(out) == 1 else out
        return wrap(result)

    def __array_function__(self, func, types_, args, kwargs):
        return wrap(func(*unwrap(args), **unwrap(kwargs)))

    def __matmul__(self, other):
        return _call(np.matmul, self, other)

    def __rmatmul__(self, other):
        return _call(np.matmul, other, self)

    def __imatmul__(self, other):
        self._a[...] = _call(np.matmul, self, other)._a
        return self

    def __neg__(self):
        return _call(np.negative, self)

    def __pos__(self):
        return _call(np.positive, self)

    def __abs__(self):
        return _call(np.absolute, self)

    def __invert__(self):
        return _call(np.invert, self)


def _binary(ufunc):
    def forward(self, other):
        return _call(ufunc, self, other)

    def backward(self, other):
        return _call(ufunc, other, self)

    def inplace(self, other):
        ufunc(self._a, unwrap(other), out=self._a)
        return self

    return forward, backward, inplace


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("and", np.bitwise_and),
                      ("or", np.bitwise_or), ("xor", np.bitwise_xor)]:
    _f, _b, _i = _binary(_ufunc)
    setattr(FakeArray, f"__{_name}__", _f)
    setattr(FakeArray, f"__r{_name}__", _b)
    setattr(FakeArray, f"__i{_name}__", _i)
for _name, _ufunc in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less),
                      ("le", np.less_equal), ("gt", np.greater), ("ge", np.greater_equal)]:
    setattr(FakeArray, f"__{_name}__", _binary(_ufunc)[0])


def unwrap(obj, host_ok=False):
    """Device arrays -> their NumPy arrays, inside tuples, lists and dicts too. A NumPy ndarray
    is a host array: a TypeError, as in CuPy, unless `host_ok` (an index, a copy to device)."""
    if isinstance(obj, FakeArray):
        return obj._a
    if isinstance(obj, np.ndarray):
        if host_ok:
            return obj
        raise TypeError(f"Unsupported type {type(obj)} (a NumPy array in a CuPy operation: "
                        "move it to the device with cupy.asarray first)")
    if isinstance(obj, tuple):
        return tuple(unwrap(o, host_ok) for o in obj)
    if isinstance(obj, list):
        return [unwrap(o, host_ok) for o in obj]
    if isinstance(obj, dict):
        return {k: unwrap(v, host_ok) for k, v in obj.items()}
    return obj


def wrap(obj):
    """NumPy arrays and scalars -> device arrays (CuPy has no scalars: 0-d arrays instead)."""
    if isinstance(obj, np.ndarray):
        return FakeArray(obj)
    if isinstance(obj, np.generic):
        return FakeArray(np.asarray(obj))
    if isinstance(obj, tuple):
        return tuple(wrap(o) for o in obj)
    if isinstance(obj, list):
        return [wrap(o) for o in obj]
    return obj


def _call(fn, *args, **kwargs):
    return wrap(fn(*unwrap(args), **unwrap(kwargs)))


class _Ufunc:
    """cupy.exp and friends: callable, with out= returning the device array given."""

    def __init__(self, ufunc):
        self._ufunc = ufunc

    def __call__(self, *args, out=None, **kwargs):
        if out is not None:
            self._ufunc(*unwrap(args), out=unwrap(out), **unwrap(kwargs))
            return out
        return _call(self._ufunc, *args, **kwargs)

    def at(self, a, indices, b=None):
        args = (unwrap(a), unwrap(indices, host_ok=True)) + (() if b is None else (unwrap(b),))
        if self._ufunc in (np.maximum, np.minimum):
            args = _extreme_at_as_cupy(self._ufunc, *args)
        self._ufunc.at(*args)

    def __getattr__(self, name):
        attr = getattr(self._ufunc, name)
        return (lambda *a, **k: _call(attr, *a, **k)) if callable(attr) else attr


AT_TYPES = ("int32", "int64", "float32", "float64", "uint32", "uint64")


def _extreme_at_as_cupy(ufunc, a, indices, b):
    """maximum.at/minimum.at as CuPy 14.2 did them on an H200: only the dtypes it lists
    (float16 is a TypeError), and float64 values sent rounded to float32 (0.7 came back
    0.699999988), so code that needs exact maxima cannot lean on them."""
    if a.dtype.name not in AT_TYPES:
        raise TypeError(f"cupy.{ufunc.__name__}.at only supports {', '.join(AT_TYPES)} as "
                        "data type")
    if a.dtype == np.float64:
        b = np.asarray(b).astype(np.float32).astype(np.float64)
    return a, indices, b


# ---- array creation: the only doors from the host to the device --------------------------------

def asarray(a, dtype=None, order=None, *, blocking=False):
    if isinstance(a, FakeArray) and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    return FakeArray(np.array(unwrap(a, host_ok=True), dtype=dtype, order=order or "K"))


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    if copy is False and isinstance(obj, FakeArray):
        return asarray(obj, dtype)
    return FakeArray(np.array(unwrap(obj, host_ok=True), dtype=dtype, copy=True, order=order,
                              ndmin=ndmin))


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if isinstance(a, FakeArray):
        return a.get(order=order)
    return np.asarray(a, order=order)


def ascontiguousarray(a, dtype=None):
    if not isinstance(a, FakeArray):
        raise TypeError(f"cupy.ascontiguousarray needs a cupy.ndarray, got {type(a)}")
    return FakeArray(np.ascontiguousarray(a._a, dtype=dtype))


def _garbage(a):
    """Zeros when kernels are not run (NaN would warn later); all-ones bytes (NaN) when they are."""
    if EMULATION["on"]:
        a.view(np.uint8).fill(0xFF)
    return FakeArray(a)


def empty(shape, dtype=float, order="C"):
    return _garbage(np.zeros(shape, dtype=dtype, order=order))


def empty_like(a, dtype=None, order="K", subok=None, shape=None):
    return _garbage(np.zeros_like(unwrap(a), dtype=dtype, order=order, shape=shape))


# ---- random: CuPy's Generator has fewer methods than NumPy's -------------------------------------

class FakeXORWOW:
    """cupy.random.XORWOW as CuPy builds it: the stream's state lives in a device array
    (`_state`, bytes) that every draw reads and writes; the object holds a threading.Lock, so
    copy.deepcopy and pickle fail on it (CuPy: "random states cannot be serialized"); state()
    is a method giving the state's device pointer, not NumPy's state dict."""

    def __init__(self, seed=None):
        self.lock = threading.Lock()
        self._state = wrap(np.zeros(6 * 8, np.int8))  # PCG64's state in six 64-bit words
        self._store(np.random.PCG64(seed))

    def state(self):
        return id(self._state)  # (an address)

    def _store(self, bits):
        s = bits.state
        words = [s["state"]["state"] >> 64, s["state"]["state"], s["state"]["inc"] >> 64,
                 s["state"]["inc"], s["has_uint32"], s["uinteger"]]
        unwrap(self._state)[:] = np.array([w % 2**64 for w in words], np.uint64).view(np.int8)

    def draw(self, how):
        """how(a NumPy Generator at this stream's state); the state moves on as it drew."""
        w = [int(v) for v in unwrap(self._state).view(np.uint64)]
        bits = np.random.PCG64()
        bits.state = {"bit_generator": "PCG64", "state": {"state": w[0] << 64 | w[1],
                                                          "inc": w[2] << 64 | w[3]},
                      "has_uint32": w[4], "uinteger": w[5]}
        out = how(np.random.Generator(bits))
        self._store(bits)
        return out


class FakeGenerator:
    """cupy.random.Generator(bit_generator): standard_normal/random/uniform/integers... no
    choice, no shuffle; its draws go through the bit generator's device state."""

    FLOAT_ONLY = (np.dtype(np.float32), np.dtype(np.float64))

    def __init__(self, bit_generator):
        self.bit_generator = bit_generator
        self._binomial_state = None

    def _dtype(self, dtype):
        if np.dtype(dtype) not in self.FLOAT_ONLY:
            raise TypeError(f"cupy.random.Generator: dtype must be float32 or float64, got {dtype}")
        return dtype

    def standard_normal(self, size=None, dtype=np.float64, out=None):
        dtype = self._dtype(dtype)
        return wrap(self.bit_generator.draw(lambda r: r.standard_normal(size, dtype=dtype)))

    def random(self, size=None, dtype=np.float64, out=None):
        dtype = self._dtype(dtype)
        return wrap(self.bit_generator.draw(lambda r: r.random(size, dtype=dtype)))

    def uniform(self, low=0.0, high=1.0, size=None, dtype=np.float64):
        dtype = self._dtype(dtype)
        return wrap(self.bit_generator.draw(lambda r: r.uniform(low, high, size)).astype(dtype))

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return wrap(self.bit_generator.draw(
            lambda r: r.integers(low, high, size, dtype=dtype, endpoint=endpoint)))


def default_rng(seed=None):
    """cupy.random.default_rng: a Generator is returned as it is, a bit generator wrapped."""
    if isinstance(seed, FakeGenerator):
        return seed
    return FakeGenerator(seed if isinstance(seed, FakeXORWOW) else FakeXORWOW(seed))


# ---- kernels ---------------------------------------------------------------------------------

EMULATION = {"on": False, "reverse": False}  # set by make_fake(emulate=..., reverse=...)


class FakeRawKernel:
    """A compiled kernel: checks and records its launches; runs them when emulating."""

    def __init__(self, module, name):
        self.module, self.name = module, name
        self._max_smem = {}  # per device, as CUDA keeps the attribute

    @property
    def max_dynamic_shared_size_bytes(self):
        return self._max_smem.get(DEVICE["current"], 0)

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, nbytes):
        if nbytes > DEVICE["smem_optin"]:  # CUDA: cudaErrorInvalidValue
            raise ValueError(f"{self.name}: {nbytes} bytes of shared memory; this device "
                             f"gives a block at most {DEVICE['smem_optin']}")
        self._max_smem[DEVICE["current"]] = nbytes

    def __call__(self, grid, block, args, *, shared_mem=0, enable_cooperative_groups=False):
        import cuda_emu  # CUDA's launch limits, written down once for the fake and the emulator

        for label, dims in (("grid", grid), ("block", block)):
            if not isinstance(dims, tuple):
                raise ValueError(f"{self.name}: bad {label} {dims!r}")
        why = cuda_emu.launch_error(grid, block)
        if why:  # CUDA: cudaErrorInvalidConfiguration
            raise ValueError(f"{self.name}: {why}")
        if not isinstance(args, tuple):
            raise TypeError(f"{self.name}: args must be a tuple, got {type(args)}")
        for i, a in enumerate(args):
            if not isinstance(a, (FakeArray, np.generic)):
                raise TypeError(f"{self.name}: argument {i} is {type(a)}; a kernel takes device "
                                "arrays and NumPy scalars (a Python number has no C type)")
        if shared_mem > max(self.max_dynamic_shared_size_bytes, 48 * 1024):
            raise ValueError(f"{self.name}: {shared_mem} bytes of shared memory without "
                             "max_dynamic_shared_size_bytes")
        self.module.launches.append((self.name, grid, block, args, shared_mem))
        if EMULATION["on"]:
            self.module.emulated().launch(
                self.name, grid, block, [a._a if isinstance(a, FakeArray) else a for a in args],
                shared_mem, reverse=EMULATION["reverse"])


class FakeRawModule:
    def __init__(self, code=None, *, path=None, options=(), backend="nvrtc", **kwargs):
        assert isinstance(code, str) and isinstance(options, tuple)
        self.code, self.options = code, options
        self.launches = []
        self._emu = None
        RAW_MODULES.append(self)

    def emulated(self):
        """The module's kernels compiled for the CPU (tests/support/cuda_emu.py), built on
        first use."""
        if self._emu is None:
            import cuda_emu

            self._emu = cuda_emu.EmuModule(self.code)
        return self._emu

    def compile(self, log_stream=None):
        pass

    def get_function(self, name):
        # the entry points are macro-made; tests/backends/test_kernels.py holds these lists to
        # the PTX
        if name not in cl.softmax_kernel_names() + cl.flash_kernel_names():
            raise RuntimeError(f"CUDA_ERROR_NOT_FOUND: named symbol not found: {name}")
        return FakeRawKernel(self, name)


RAW_MODULES = []  # every FakeRawModule made, for tests to read the launches


def _elementwise_replays():
    """The NumPy replay of each cupy.ElementwiseKernel body, by kernel name."""
    def adam(g, lr, beta1, beta2, eps, wd, mode, bc1, sqrt_bc2, p, m, v):
        kernel_refs.adam_step(p, g, m, v, lr, beta1, beta2, eps, wd, mode, bc1, sqrt_bc2)
        return p, m, v

    return {
        "tinyattn_gelu_erf_forward": lambda x: kernel_refs.gelu_forward(x, "none"),
        "tinyattn_gelu_tanh_forward": lambda x: kernel_refs.gelu_forward(x, "tanh"),
        "tinyattn_gelu_erf_backward": lambda g, x, c: kernel_refs.gelu_backward(g, x, c, "none"),
        "tinyattn_gelu_tanh_backward": lambda g, x, t: kernel_refs.gelu_backward(g, x, t, "tanh"),
        "tinyattn_adam_update": adam,
    }


class FakeElementwiseKernel:
    """cupy.ElementwiseKernel: parses its parameter lists and runs the kernel_refs replay, or,
    when emulating, the kernel's own CUDA code compiled for the CPU."""

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True,
                 preamble="", no_return=False, return_tuple=False, loop_prep="",
                 after_loop="", options=()):
        self.n_in = len(in_params.split(","))
        self.n_out = len(out_params.split(","))
        self.name, self.preamble, self.operation = name, preamble, operation
        self.in_params, self.out_params = in_params, out_params
        self.calls = 0
        self.emu = None

    def __call__(self, *args, size=None, block_size=None):
        if len(args) not in (self.n_in, self.n_in + self.n_out):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        for a in args:
            if isinstance(a, np.ndarray):
                raise TypeError(f"Unsupported type {type(a)}")
        self.calls += 1
        host = [a._a if isinstance(a, FakeArray) else a for a in args]
        if EMULATION["on"]:  # the operation and preamble compiled as CuPy would build them
            if self.emu is None:
                import cuda_emu

                self.emu = cuda_emu.EmuElementwise(self.in_params, self.out_params,
                                                   self.operation, self.name, self.preamble)
            out = self.emu(*host)
            return wrap(out) if len(args) == self.n_in else (
                args[self.n_in] if self.n_out == 1 else tuple(args[self.n_in:]))
        dtypes = {a.dtype for a in host if isinstance(a, np.ndarray)}
        if len(dtypes) != 1:
            raise TypeError(f"{self.name}: the T arguments have different dtypes {dtypes}")
        out = _elementwise_replays()[self.name](*host)
        if len(args) > self.n_in:  # outputs given: written in place, returned
            given = args[self.n_in:]
            for dst, src in zip(given, out, strict=True):
                if src is not dst._a:
                    dst._a[...] = src
            return given[0] if self.n_out == 1 else tuple(given)
        return wrap(out)


# ---- the modules ---------------------------------------------------------------------------

# an H100's shared memory (tests set less to play an older GPU); the current device's id
DEVICE = {"smem_optin": 227 * 1024, "current": 0}


def _device_properties(device=0):
    return {"name": b"Fake GPU (NumPy)", "totalGlobalMem": 80 * 2**30, "major": 9, "minor": 0,
            "multiProcessorCount": 132, "sharedMemPerBlock": 48 * 1024,
            "sharedMemPerBlockOptin": DEVICE["smem_optin"], "warpSize": 32,
            "clockRate": 1_980_000, "memoryClockRate": 2_619_000, "memoryBusWidth": 5120}


class _Device:
    def __init__(self, device=None):
        self.id = DEVICE["current"] if device is None else int(device)
        self.compute_capability = "90"

    def synchronize(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Event:
    def record(self, stream=None):
        pass

    def synchronize(self):
        pass


class _MemoryPool:
    def free_all_blocks(self):
        pass

    def used_bytes(self):
        return 0

    def total_bytes(self):
        return 0


_POOL = _MemoryPool()
_NOT_IN_CUPY = {"errstate", "seterr", "geterr", "broadcast_shapes", "lib", "testing", "ma",
                "rec", "char", "ctypeslib", "add_newdoc", "random", "linalg", "fft"}


def _module_getattr(name):
    """Everything else: NumPy's function of that name, on device arrays only."""
    if name.startswith("__") or name in _NOT_IN_CUPY:
        raise AttributeError(f"module 'cupy' has no attribute {name!r}")
    attr = getattr(np, name)
    if isinstance(attr, np.ufunc):
        return _Ufunc(attr)
    if isinstance(attr, type) or not callable(attr):
        return attr  # dtypes (cupy.float32 is numpy.float32), constants
    return lambda *args, **kwargs: _call(attr, *args, **kwargs)


def install(monkeypatch, kernels, emulate=False, reverse=False):
    """Put the fake in sys.modules and return a fresh "cupy" backend made on it; monkeypatch
    takes everything back afterwards (modules, the backend cache, the default backend)."""
    import sys

    import tinyattn.backends as B

    monkeypatch.setitem(EMULATION, "on", emulate)  # both restored after the test
    monkeypatch.setitem(EMULATION, "reverse", reverse)
    for name, module in make_fake(emulate, reverse).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("TINYATTN_CUPY_KERNELS", "1" if kernels else "0")
    monkeypatch.setattr(B, "_made", {k: v for k, v in B._made.items() if k != "cupy"})
    monkeypatch.setattr(B, "_default", B._default)
    monkeypatch.setattr(B, "_seed", B._seed)
    monkeypatch.delenv("TINYATTN_BACKEND", raising=False)
    return B.backend("cupy")


def make_fake(emulate=False, reverse=False):
    """{name: module} for "cupy", "cupyx", "cupyx.scipy", "cupyx.scipy.special". emulate: run
    the raw kernels' CUDA source on the CPU; reverse: with blocks and threads in reverse order."""
    EMULATION.update(on=emulate, reverse=reverse)
    cupy = types.ModuleType("cupy", "A NumPy stand-in for CuPy (tests/support/fake_cupy.py).")
    cupy.__getattr__ = _module_getattr
    cupy.ndarray = FakeArray
    cupy.__version__ = "0+fake"
    cupy.is_available = lambda: True
    cupy.asarray, cupy.array, cupy.asnumpy = asarray, array, asnumpy
    cupy.ascontiguousarray = ascontiguousarray
    cupy.empty, cupy.empty_like = empty, empty_like
    cupy.RawModule, cupy.RawKernel = FakeRawModule, FakeRawKernel
    cupy.ElementwiseKernel = FakeElementwiseKernel
    cupy.get_default_memory_pool = lambda: _POOL
    cupy.random = types.SimpleNamespace(default_rng=default_rng, Generator=FakeGenerator,
                                        XORWOW=FakeXORWOW)
    # cupy.linalg: the routines tinyattn's ops/linalg.py calls (NumPy's, on device arrays)
    cupy.linalg = types.SimpleNamespace(**{
        name: (lambda fn: lambda *args, **kwargs: _call(fn, *args, **kwargs))(
            getattr(np.linalg, name))
        for name in ("inv", "det", "slogdet", "solve", "cholesky", "svd")})
    runtime = types.SimpleNamespace(getDeviceCount=lambda: 2, getDevice=lambda: DEVICE["current"],
                                    getDeviceProperties=_device_properties,
                                    runtimeGetVersion=lambda: 12040,
                                    driverGetVersion=lambda: 12040)
    cupy.cuda = types.SimpleNamespace(runtime=runtime, Device=_Device, Event=_Event,
                                      get_elapsed_time=lambda start, end: 1.0,
                                      is_available=lambda: True)

    special = types.ModuleType("cupyx.scipy.special")
    reference = NumpyBackend()

    def erf(x):
        """cupyx.scipy.special.erf: a ufunc with loops e->d, f->f, d->d (float16 gives
        float64, as in CuPy; integers take the d->d loop)."""
        if not isinstance(x, FakeArray):
            raise TypeError(f"Unsupported type {type(x)}")
        out = np.float32 if x.dtype == np.float32 else np.float64
        return FakeArray(np.asarray(reference.erf_reference(x._a.astype(np.float64)), out))

    special.erf = erf
    scipy = types.ModuleType("cupyx.scipy")
    scipy.special = special
    cupyx = types.ModuleType("cupyx")
    cupyx.scipy = scipy

    def scatter_add(a, slices, value):
        if not isinstance(a, FakeArray):
            raise TypeError(f"cupyx.scatter_add needs a cupy.ndarray, got {type(a)}")
        np.add.at(a._a, unwrap(slices, host_ok=True), unwrap(value))

    cupyx.scatter_add = scatter_add

    def scatter_reducer(ufunc, name):
        def scatter(a, slices, value):
            if not isinstance(a, FakeArray):
                raise TypeError(f"cupyx.{name} needs a cupy.ndarray, got {type(a)}")
            ufunc.at(*_extreme_at_as_cupy(ufunc, a._a, unwrap(slices, host_ok=True),
                                          unwrap(value)))
        return scatter

    cupyx.scatter_max = scatter_reducer(np.maximum, "scatter_max")
    cupyx.scatter_min = scatter_reducer(np.minimum, "scatter_min")
    return {"cupy": cupy, "cupyx": cupyx, "cupyx.scipy": scipy, "cupyx.scipy.special": special}


