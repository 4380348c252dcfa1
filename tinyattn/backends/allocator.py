"""Keeping freed array memory in the process (glibc's malloc settings), for CPU training loops.

A training step allocates the same arrays every step and frees them at its end. With glibc's
default settings much of that memory goes back to the operating system when it is freed (arrays
over the mmap threshold are unmapped; the top of the heap is trimmed), so the next step takes
fresh pages from the kernel, and the first write to each page is a page fault. On a virtual
machine a fault can cost microseconds: `tinyattn train` measured 1.7 million faults in a run,
which took 27.9 s against 21.5 s with the memory kept (docs/benchmarks.md, "The main job").

`keep_freed_memory()` asks malloc to keep that memory for reuse: arrays under `mmap_mib` come
from the heap, and the heap gives back only what exceeds `trim_mib` of free space at its top.
The process then holds its peak working set (up to `trim_mib` more) until it exits. This is a
setting of the whole process, so the library never makes it on import: the `tinyattn` command
makes it for its own process (`tinyattn train`), and a script may call it. It does nothing
where the C library is not glibc, and defers to the MALLOC_* / GLIBC_TUNABLES environment
variables where the user set malloc's options already.
"""

import ctypes
import os

# mallopt's parameter numbers (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

_USER_SETTINGS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_",
                  "MALLOC_MMAP_MAX_")


def _glibc():
    """The running C library if it is glibc (it has gnu_get_libc_version), else None."""
    try:
        libc = ctypes.CDLL(None)
    except (OSError, TypeError):  # (no C library loads by that name: not a POSIX process)
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "mallopt") else None


def user_set_malloc(environ=None):
    """The environment variable through which the user set malloc's options, or None."""
    environ = os.environ if environ is None else environ
    for name in _USER_SETTINGS:
        if name in environ:
            return name
    if "glibc.malloc." in environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES"
    return None


def keep_freed_memory(trim_mib=256, mmap_mib=32):
    """Have malloc keep freed memory for reuse instead of returning it to the OS.

    Arrays smaller than `mmap_mib` MiB are then carved from the heap (glibc's own dynamic
    threshold grows to 32 MiB too, but only after an array that size was freed), and the heap
    returns memory to the OS only when more than `trim_mib` MiB are free at its top.
    Returns True if the settings were made; False where the C library is not glibc or the
    user set malloc's options in the environment (those stay as they are)."""
    # (mallopt takes an int of bytes; glibc refuses an mmap threshold over 32 MiB)
    for name, value, most in (("trim_mib", trim_mib, 1024), ("mmap_mib", mmap_mib, 32)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= most:
            raise ValueError(f"keep_freed_memory: {name} must be a whole number of MiB in "
                             f"1..{most}, got {value!r}")
    libc = _glibc()
    if libc is None or user_set_malloc() is not None:
        return False
    ok = libc.mallopt(M_MMAP_THRESHOLD, mmap_mib << 20)
    return bool(ok and libc.mallopt(M_TRIM_THRESHOLD, trim_mib << 20))
