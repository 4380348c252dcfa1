"""Run tinyattn's CUDA kernels on the CPU from their own source (tests only; needs g++).

`EmuModule(code)` takes the text CupyBackend hands to NVRTC (cupy_backend.kernel_source), puts
tests/support/cuda_emu_runtime.h in front of it, rewrites the two things a host compiler cannot take
(the float16 `cvt` PTX asm and `extern __shared__` arrays), adds one thunk per extern "C"
kernel, and builds a shared library with g++ (cached by the text's hash): compiled with
-fsanitize=thread, whose per-access hooks the runtime header defines itself (the race,
uninitialised-shared-memory and underrun checks), and -fsanitize=alignment,bounds where g++
has libubsan (misaligned vector loads, indices outside fixed-size arrays). `launch()` checks
the launch against CUDA's limits and the kernel's __launch_bounds__, the arguments against the
kernel's C signature (a NumPy scalar of exactly the parameter's type, a device array whose
dtype is the pointee's), copies every array into memory between two guard pages, runs the
grid in a forked child (see the runtime header for what it checks) and copies the results
back. Writing into a `const` argument is an error.

This is not a GPU: fibers run one at a time and switch only at barriers and shuffles, so it
checks indexing, masking, barriers, shuffles, bounds, alignment, races (by bookkeeping, not by
luck of timing) and the numbers; not speed, memory ordering or warps running out of step.
`reverse=True` runs blocks and threads in the opposite order as well.
"""

import ctypes
import functools
import hashlib
import mmap
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

RUNTIME = Path(__file__).with_name("cuda_emu_runtime.h")
CXX = shutil.which("g++")
CXXFLAGS = ("-O2", "-std=c++17", "-fPIC", "-w", "-U_FORTIFY_SOURCE", "-fdata-sections",
            "-fno-gnu-unique")
# every load and store calls __tsan_readN / __tsan_writeN, which cuda_emu_runtime.h defines
# (no ThreadSanitizer runtime is linked); -g1 lets a report's code address name a source line
HOOKS = ("-fsanitize=thread", "--param=tsan-instrument-func-entry-exit=0", "-g1")
# a load or store through a pointer less aligned than its type needs (a vector load of an
# alignas(16) struct from a 4-byte aligned address) stops the launch with UBSan's report, as
# the GPU would stop with "misaligned address"; so does an index outside a fixed-size array
SANITIZE = ("-fsanitize=alignment,bounds", "-fno-sanitize-recover=alignment,bounds")
# every function-level static (each `__shared__` array: the header makes them static) in one
# section whose bounds the runtime knows; -Bsymbolic keeps each library's statics its own
LINK_SCRIPT = """SECTIONS {
  emu_shared_section (NOLOAD) : ALIGN(64) {
    HIDDEN(emu_shared_start = .); *(.bss._ZZ*) HIDDEN(emu_shared_stop = .);
  }
} INSERT AFTER .bss;
"""
# CUDA's launch limits: grid x < 2^31, y and z <= 65535; block x, y <= 1024, z <= 64, and at
# most 1024 threads (or the kernel's __launch_bounds__)
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
TIMEOUT_S = 120
ALLOC_ALIGN = 256  # cudaMalloc (and CuPy's memory pool) start every allocation at such a multiple
ERROR_SIZE = 4096

# C parameter types -> the NumPy dtype an argument must have
SCALAR_TYPES = {"int": np.int32, "unsigned int": np.uint32, "unsigned": np.uint32,
                "long long": np.int64, "unsigned long long": np.uint64, "float": np.float32,
                "double": np.float64}
CTYPES = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.uint32): ctypes.c_uint32,
          np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint64): ctypes.c_uint64,
          np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}
POINTEE_TYPES = {"float": (np.float32,), "double": (np.float64,),
                 "tinyattn_half": (np.float16, np.uint16), "unsigned short": (np.uint16,),
                 "unsigned char": (np.uint8,), "int": (np.int32,), "long long": (np.int64,)}
# the PTX inline asm of tinyattn_common.cuh, as host code
ASM_REWRITES = (
    (re.compile(r'asm\("cvt\.f32\.f16 %0, %1;"\s*:\s*"=f"\((\w+)\)\s*:\s*"h"\(([^;]*?)\)\);'),
     r"\1 = emu_half_to_float(\2);"),
    (re.compile(r'asm\("cvt\.rn\.f16\.f32 %0, %1;"\s*:\s*"=h"\((\w+)\)\s*:\s*"f"\(([^;]*?)\)\);'),
     r"\1 = emu_float_to_half(\2);"),
)
EXTERN_SHARED = re.compile(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w ]+?)\s*(\w+)\[\];")
KERNEL_DECL = re.compile(r'extern\s+"C"\s+EMU_KERNEL\s+void\s+(?:EMU_BOUNDS\((\d+)\)\s+)?'
                         r'(\w+)\s*\(([^)]*)\)')


class EmuArgInfo(ctypes.Structure):
    """What emu_launch is told about each argument (cuda_emu_runtime.h's EmuArgInfo)."""
    _fields_ = [("ptr", ctypes.c_void_p), ("nbytes", ctypes.c_size_t),
                ("map_base", ctypes.c_void_p), ("itemsize", ctypes.c_int),
                ("is_const", ctypes.c_int)]


class EmuError(RuntimeError):
    """A kernel failed a check of the emulator (divergence, deadlock, out of bounds, ...)."""


def available():
    return CXX is not None


def device_offset(a):
    """Bytes from the start of the array that holds the NumPy view `a` to its element 0: on a
    device, where the view lies in its allocation (which starts at a multiple of ALLOC_ALIGN).
    The emulator places each argument so, and fake_cupy's `data.ptr` says so."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    return a.__array_interface__["data"][0] - root.__array_interface__["data"][0]


@functools.cache
def sanitizes_alignment():
    """Whether g++ here can build with -fsanitize=alignment (it needs libubsan); without it
    the emulator runs without that one check."""
    if CXX is None:
        return False
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "probe.cpp"
        src.write_text('extern "C" float probe(const float* p) { return p[1]; }\n')
        done = subprocess.run([CXX, *CXXFLAGS, *SANITIZE, "-shared", "-o",
                               str(Path(tmp) / "probe.so"),
                               str(src)], capture_output=True)
    return done.returncode == 0


def build_flags():
    return CXXFLAGS + (SANITIZE if sanitizes_alignment() else ())


def launch_error(grid, block, bounds=None):
    """Why CUDA would refuse a launch of (grid, block), or None: a dimension of 0 or over its
    limit, more than 1024 threads, or more than the kernel's __launch_bounds__."""
    for label, dims, limits in (("grid", grid, GRID_LIMITS), ("block", block, BLOCK_LIMITS)):
        if not (1 <= len(dims) <= 3 and all(isinstance(d, int) and 1 <= d <= lim
                                            for d, lim in zip(dims, limits, strict=False))):
            return (f"invalid {label} {tuple(dims)} (cudaErrorInvalidConfiguration: each "
                    f"dimension 1 to {limits})")
    threads = int(np.prod(block))
    if threads > min(1024, bounds or 1024):
        return (f"a block of {threads} threads, over {min(1024, bounds or 1024)} "
                f"({'__launch_bounds__' if bounds else 'CUDA'}'s limit)")
    return None


def cache_dir():
    path = Path(os.environ.get("TINYATTN_EMU_CACHE", Path(tempfile.gettempdir()) /
                               "tinyattn-cuda-emu"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def host_source(code):
    """The kernel text with PTX asm and `extern __shared__` rewritten for a host compiler."""
    for pattern, repl in ASM_REWRITES:
        code = pattern.sub(repl, code)
    if re.search(r"\basm\s*\(", code):
        raise EmuError("the kernel has PTX inline asm the emulator does not know: "
                       + re.search(r"\basm\s*\(.*", code).group(0))
    return EXTERN_SHARED.sub(r"\1* \2 = reinterpret_cast<\1*>(emu_dynamic_smem);", code)


def parse_param(decl):
    """'const float* __restrict__ x' -> ('float', pointer=True, const=True)."""
    decl = " ".join(decl.replace("*", " * ").split())
    words = decl.split(" ")[:-1]  # drop the parameter's name
    words = [w for w in words if w != "__restrict__"]
    const = "const" in words
    pointer = "*" in words
    base = " ".join(w for w in words if w not in ("const", "*"))
    return base, pointer, const


def kernel_signatures(code):
    """({name: [(base type, pointer, const), ...]}, {name: __launch_bounds__ or None}) of every
    extern "C" __global__ function, found in the preprocessed text (the kernels are made by
    macros)."""
    text = subprocess.run(
        [CXX, "-E", "-P", "-x", "c++", "-D__global__=EMU_KERNEL",
         "-D__launch_bounds__(x)=EMU_BOUNDS(x)", "-"], input=code, capture_output=True,
        text=True, check=True).stdout
    found = KERNEL_DECL.findall(text)
    return ({name: [parse_param(p) for p in params.split(",") if p.strip()]
             for _, name, params in found},
            {name: int(bounds) if bounds else None for bounds, name, _ in found})


def _build(text, hooks=True):
    """The shared library compiled from `text` (cached by the text's hash): compiled (with the
    memory hooks unless hooks=False), then linked without any sanitizer runtime but UBSan's."""
    flags = build_flags() + (HOOKS if hooks else ())
    key = hashlib.sha256((text + RUNTIME.read_text() + " ".join(flags) + LINK_SCRIPT).encode())
    lib = cache_dir() / f"emu-{key.hexdigest()[:20]}.so"
    if not lib.exists():
        src = lib.with_suffix(".cpp")
        src.write_text(text)
        obj, script = lib.with_suffix(f".{os.getpid()}.o"), lib.with_suffix(".ld")
        script.write_text(LINK_SCRIPT)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        ubsan = SANITIZE[:1] if sanitizes_alignment() else ()
        for cmd in ([CXX, *flags, f"-I{RUNTIME.parent}", "-c", "-o", str(obj), str(src)],
                    [CXX, "-shared", *ubsan, "-Wl,-Bsymbolic", f"-Wl,-T,{script}", "-o",
                     str(tmp), str(obj)]):
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                raise EmuError(f"g++ could not build the kernels:\n{done.stderr[-4000:]}")
        obj.unlink()
        os.replace(tmp, lib)
    return lib


class EmuModule:
    """The kernels of one source text, compiled for the CPU."""

    def __init__(self, code):
        if not available():
            raise EmuError("the CUDA emulator needs g++")
        self.signatures, self.bounds = kernel_signatures(code)
        thunks = []
        for name, params in self.signatures.items():
            ctypes_ = [f"{'const ' if c else ''}{b}{'*' if p else ''}" for b, p, c in params]
            call = ", ".join(f"*({t}*)a[{i}]" for i, t in enumerate(ctypes_))
            thunks.append(f'extern "C" void emu_thunk_{name}(void** a) {{ {name}({call}); }}')
        text = "\n".join(['#include "cuda_emu_runtime.h"', "#line 1", host_source(code)]
                         + thunks) + "\n"
        self.path = _build(text)
        self.lib = ctypes.CDLL(str(self.path))
        self.lib.emu_alloc.restype = ctypes.c_void_p
        self.lib.emu_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_size_t,
                                       ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(ctypes.c_size_t)]
        self.lib.emu_free.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        self.lib.emu_launch.restype = ctypes.c_int
        self.lib.emu_launch.argtypes = ([ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 6
                                        + [ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                                           ctypes.c_void_p, ctypes.c_size_t,
                                           ctypes.POINTER(EmuArgInfo), ctypes.c_int])

    def _alloc(self, size, align, offset=0):
        """size bytes between guard pages, starting at offset modulo align."""
        base, total = ctypes.c_void_p(), ctypes.c_size_t()
        ptr = self.lib.emu_alloc(size, align, offset, ctypes.byref(base), ctypes.byref(total))
        if not ptr:
            raise MemoryError("emu_alloc failed")
        return ptr, (base.value, total.value)

    def launch(self, name, grid, block, args, shared_mem=0, reverse=False):
        """Run kernel `name`; `args` are NumPy arrays (the device arrays' memory, any strides)
        and NumPy scalars, as the kernel takes them. Arrays are updated in place."""
        if name not in self.signatures:
            raise EmuError(f"no kernel named {name}")
        params = self.signatures[name]
        if len(args) != len(params):
            raise TypeError(f"{name}: {len(args)} arguments for {len(params)} parameters")
        why = launch_error(tuple(grid), tuple(block), self.bounds.get(name))
        if why:
            raise EmuError(f"{name}: cannot launch: {why}")
        grid = tuple(grid) + (1,) * (3 - len(grid))
        block = tuple(block) + (1,) * (3 - len(block))
        holders, buffers, copies, infos = [], [], [], []
        try:
            for i, (arg, (base, pointer, const)) in enumerate(zip(args, params, strict=True)):
                holders.append(self._argument(name, i, arg, base, pointer, const, buffers,
                                              copies, infos))
            argv = (ctypes.c_void_p * len(holders))(*[ctypes.addressof(h) for h in holders])
            err_ptr, err_map = self._alloc(ERROR_SIZE, 1)
            buffers.append((err_map, None))
            rc = self.lib.emu_launch(ctypes.cast(self.lib[f"emu_thunk_{name}"],
                                                 ctypes.c_void_p), argv, *grid, *block,
                                     shared_mem, int(reverse), TIMEOUT_S, err_ptr, ERROR_SIZE,
                                     (EmuArgInfo * len(infos))(*infos), len(infos))
            if rc:
                message = ctypes.string_at(err_ptr).decode(errors="replace")
                raise EmuError(f"{name}: {self._source_lines(self._explain(rc, message, buffers))}")
            for i, src, dst, nbytes, const in copies:
                if const and ctypes.string_at(src, nbytes) != ctypes.string_at(dst, nbytes):
                    raise EmuError(f"{name}: argument {i} is const but the kernel wrote into it")
                if not const:
                    ctypes.memmove(dst, src, nbytes)
        finally:
            for (base, total), _ in buffers:
                self.lib.emu_free(base, total)

    def _argument(self, name, i, arg, base, pointer, const, buffers, copies, infos):
        if not pointer:
            want = SCALAR_TYPES.get(base)
            if want is None:
                raise EmuError(f"{name}: parameter {i} has type {base!r}, unknown to the emulator")
            if not (isinstance(arg, np.generic) and arg.dtype == want):
                raise TypeError(f"{name}: argument {i} must be a numpy.{np.dtype(want).name} "
                                f"for the C parameter type {base!r}, got {type(arg).__name__}")
            return CTYPES[np.dtype(want)](arg.item())
        if isinstance(arg, np.uint64) and arg == 0:
            infos.append(EmuArgInfo(None, 0, None, 1, 1))
            return ctypes.c_void_p(0)  # a null pointer
        if not isinstance(arg, np.ndarray):
            raise TypeError(f"{name}: argument {i} is a {base}* and takes a device array, got "
                            f"{type(arg).__name__}")
        allowed = POINTEE_TYPES.get(base)
        if allowed is None or arg.dtype not in [np.dtype(t) for t in allowed]:
            raise TypeError(f"{name}: argument {i} is a {base}* but the array is {arg.dtype}")
        # the bytes the view spans (broadcast and strided views are passed as they lie)
        lo = sum(min(0, (n - 1) * s) for n, s in zip(arg.shape, arg.strides, strict=True))
        hi = sum(max(0, (n - 1) * s) for n, s in zip(arg.shape, arg.strides, strict=True))
        nbytes = 0 if arg.size == 0 else hi - lo + arg.itemsize
        # placed as on the device: element 0 as far from a multiple of ALLOC_ALIGN as the view
        # lies from the start of its array (a vector load from a misaligned view fails)
        ptr, mapping = self._alloc(nbytes, ALLOC_ALIGN, (device_offset(arg) + lo) % ALLOC_ALIGN)
        buffers.append((mapping, (i, ptr, nbytes)))
        start = arg.__array_interface__["data"][0] + lo
        ctypes.memmove(ptr, start, nbytes)
        copies.append((i, ptr, start, nbytes, const))
        infos.append(EmuArgInfo(ptr, nbytes, mapping[0], arg.itemsize, int(const)))
        return ctypes.c_void_p(ptr - lo)

    def _source_lines(self, message):
        """Each [pc 0x...] of a message of the hooks as the kernel source line it is in, each
        [addr 0x...] as the __shared__ array it is in (addr2line and nm on the library; lines
        count from the kernel text's first line)."""
        starts = [int(line.split("-", 1)[0], 16) for line in Path("/proc/self/maps").read_text()
                  .splitlines() if line.endswith(str(self.path))]
        if not shutil.which("addr2line") or not shutil.which("nm") or not starts:
            return message
        base = min(starts)

        def line(m):
            out = subprocess.run(["addr2line", "-e", str(self.path), "-i",
                                  hex(int(m.group(1), 16) - 1 - base)],
                                 capture_output=True, text=True).stdout.split("\n")[0]
            return f"[kernel source line {out.rsplit(':', 1)[-1].split()[0]}]"

        def array(m):
            offset = int(m.group(1), 16) - base
            for addr, size, name in self._statics():
                if addr <= offset < addr + size:
                    return f" ({name}, its byte {offset - addr})"
            return m.group(0)
        message = re.sub(r" \[addr (0x[0-9a-f]+)\]", array, message)
        return re.sub(r"\[pc (0x[0-9a-f]+)\]", line, message)

    @functools.cache  # noqa: B019 (one per module, kept as long as it)
    def _statics(self):
        """(offset, size, demangled name) of the library's function-level statics."""
        out = subprocess.run(["nm", "-C", "-S", "--defined-only", str(self.path)],
                             capture_output=True, text=True).stdout
        return [(int(a, 16), int(n, 16), name) for a, n, _, name in
                (line.split(None, 3) for line in out.splitlines() if line.count(" ") >= 3)
                if "::" in name or "(" in name]

    @staticmethod
    def _explain(rc, message, buffers):
        if rc == 4:
            addr = int(message.rsplit("0x", 1)[1], 16)
            for (base, total), info in buffers:
                if info and base + total - mmap.PAGESIZE <= addr < base + total:
                    i, ptr, nbytes = info
                    return (f"{message}: {addr - ptr - nbytes} bytes past the end of argument "
                            f"{i} ({nbytes} bytes)")
                if info and base <= addr < base + mmap.PAGESIZE:
                    i, ptr, nbytes = info
                    return f"{message}: {ptr - addr} bytes before the start of argument {i}"
            return f"{message} (not an argument's guard page: shared memory or a wild pointer)"
        if rc == 128 + 14:
            return f"timed out after {TIMEOUT_S} s (an endless loop?)"
        return message or f"the child exited with status {rc}"


# ---- cupy.ElementwiseKernel -----------------------------------------------------------------

EW_TYPES = {"float16": "emu_float16", "float32": "float", "float64": "double", "int32": "int",
            "int64": "long long", "uint8": "unsigned char", "bool": "bool"}
EW_DTYPES = {np.dtype(np.float16): "emu_float16", np.dtype(np.float32): "float",
             np.dtype(np.float64): "double"}


def parse_ew_params(text):
    """'T x, float64 lr' -> [('T', 'x'), ('float64', 'lr')]."""
    return [tuple(p.split()) for p in text.split(",") if p.strip()]


class EmuElementwise:
    """A cupy.ElementwiseKernel compiled for the CPU the way CuPy builds it: `typedef <dtype> T;`
    before the preamble, every array parameter bound by reference per element (inputs const),
    then the operation, which may use the element index `i`. Parameters typed T are arrays of
    one shape; the others are scalars of their declared type. One library holds the
    float16/float32/float64 versions."""

    def __init__(self, in_params, out_params, operation, name, preamble=""):
        if not available():
            raise EmuError("the CUDA emulator needs g++")
        self.name = name
        self.ins, self.outs = parse_ew_params(in_params), parse_ew_params(out_params)
        blocks = []
        for dtype, ctype in EW_DTYPES.items():
            binds = []
            for k, (typ, var) in enumerate(self.ins + self.outs):
                const = "const " if k < len(self.ins) else ""
                if typ == "T":
                    binds.append(f"{const}T& {var} = (({const}T*)_emu_args[{k}])[i];")
                else:
                    c = EW_TYPES[typ]
                    binds.append(f"const {c} {var} = *(const {c}*)_emu_args[{k}];")
            body = "\n        ".join(binds + [operation + ";"])
            blocks.append(f"namespace ew_{dtype.name} {{\ntypedef {ctype} T;\n{preamble}\n"
                          f'extern "C" void emu_ew_{dtype.name}(long long _emu_n, '
                          f"void** _emu_args) {{\n"
                          f"    for (long long i = 0; i < _emu_n; ++i) {{\n        {body}\n"
                          f"    }}\n}}\n}}")
        text = "\n".join(['#include "cuda_emu_runtime.h"', *blocks]) + "\n"
        self.lib = ctypes.CDLL(str(_build(text, hooks=False)))

    def __call__(self, *args):
        """args: NumPy arrays (the T parameters, one shape and dtype) and NumPy or Python
        scalars, inputs then outputs; outputs not given are made. Returns the outputs."""
        n_in = len(self.ins)
        if len(args) not in (n_in, n_in + len(self.outs)):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        if not arrays or len({(a.shape, a.dtype) for a in arrays}) != 1:
            raise TypeError(f"{self.name}: the T arguments must share one shape and dtype")
        shape, dtype = arrays[0].shape, arrays[0].dtype
        if dtype not in EW_DTYPES:
            raise TypeError(f"{self.name}: no {dtype} version")
        params = self.ins + self.outs
        given = list(args) + [np.empty(shape, dtype) for _ in params[len(args):]]
        work, holders = [], []
        for (typ, var), a in zip(params, given, strict=True):
            if typ == "T":
                if not isinstance(a, np.ndarray):
                    raise TypeError(f"{self.name}: {var} is an array parameter")
                w = np.ascontiguousarray(a)
                work.append(w)
                holders.append(ctypes.c_void_p(w.ctypes.data))
            else:
                if isinstance(a, np.ndarray):
                    raise TypeError(f"{self.name}: {var} is a scalar parameter")
                value = np.array(a, dtype=typ)
                work.append(value)
                holders.append(ctypes.c_void_p(value.ctypes.data))
        argv = (ctypes.c_void_p * len(holders))(*[h.value for h in holders])
        getattr(self.lib, f"emu_ew_{dtype.name}")(ctypes.c_longlong(int(np.prod(shape))), argv)
        outs = []
        for k in range(n_in, len(params)):
            if given[k] is not work[k]:
                given[k][...] = work[k]
            outs.append(given[k])
        return outs[0] if len(outs) == 1 else tuple(outs)
