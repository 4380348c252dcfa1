"""NVRTC, the compiler CuPy's RawModule runs, called through ctypes (tests only; no GPU needed).

`nvcc -ptx` is close to what happens on a GPU machine but not the same program: CuPy hands the
kernel text to NVRTC, which has no host headers, its own defaults and its own version. This
finds libnvrtc (the CUDA toolkit's, or the `nvidia-cuda-nvrtc` wheel's under site-packages)
and compiles a source with given options for a given architecture, as RawModule does.
"""

import ctypes
import glob
import os
import site
from functools import cache


@cache
def library():
    """The loaded libnvrtc, or None when there is none."""
    roots = site.getsitepackages() + [site.getusersitepackages()]
    candidates = [p for root in roots
                  for p in sorted(glob.glob(os.path.join(root, "nvidia", "*", "lib",
                                                         "libnvrtc.so.*")), reverse=True)]
    cuda = os.environ.get("CUDA_PATH", "/usr/local/cuda")
    candidates += sorted(glob.glob(os.path.join(cuda, "lib64", "libnvrtc.so*")), reverse=True)
    for path in candidates + ["libnvrtc.so"]:
        if "builtins" in path or ".alt." in path:
            continue
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def version():
    major, minor = ctypes.c_int(), ctypes.c_int()
    library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def compile_ptx(source, name, options):
    """(ok, log, ptx) of compiling `source` with `options` (a list of str)."""
    lib = library()
    prog = ctypes.c_void_p()
    rc = lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None,
                                None)
    if rc:
        raise RuntimeError(f"nvrtcCreateProgram failed ({rc})")
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        ok = lib.nvrtcCompileProgram(prog, len(options), opts) == 0
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        ptx = b""
        if ok:
            lib.nvrtcGetPTXSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            lib.nvrtcGetPTX(prog, buf)
            ptx = buf.value
        return ok, log.value.decode(errors="replace"), ptx.decode(errors="replace")
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
