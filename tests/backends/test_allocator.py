"""keep_freed_memory (tinyattn/backends/allocator.py): its checks, what it asks of glibc, when it
stands aside, that it really stops the page faults of a step's reallocation, and that
`tinyattn train` makes the setting unless told not to."""

import os
import platform
import subprocess
import sys
import textwrap
import types

import pytest

import tinyattn as ta
import tinyattn.train as train_mod
from tinyattn import cli
from tinyattn.backends import allocator


class FakeLibc:
    def __init__(self, answer=1):
        self.calls, self.answer = [], answer

    def mallopt(self, param, value):
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def libc(monkeypatch):
    fake = FakeLibc()
    monkeypatch.setattr(allocator, "_glibc", lambda: fake)
    for name in (*allocator._USER_SETTINGS, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_it_sets_the_mmap_then_the_trim_threshold_in_bytes(libc):
    assert ta.backends.keep_freed_memory() is True
    assert libc.calls == [(-3, 32 << 20), (-1, 256 << 20)]
    libc.calls.clear()
    assert ta.backends.keep_freed_memory(trim_mib=1024, mmap_mib=1) is True
    assert libc.calls == [(-3, 1 << 20), (-1, 1024 << 20)]


def test_a_refused_setting_is_reported(libc):
    libc.answer = 0  # mallopt's "no"
    assert ta.backends.keep_freed_memory() is False
    assert libc.calls == [(-3, 32 << 20)]  # nothing further once one is refused


@pytest.mark.parametrize("name", [*allocator._USER_SETTINGS, "GLIBC_TUNABLES"])
def test_the_users_own_malloc_settings_win(libc, monkeypatch, name):
    value = "glibc.malloc.trim_threshold=1000" if name == "GLIBC_TUNABLES" else "1000"
    monkeypatch.setenv(name, value)
    assert allocator.user_set_malloc() == name
    assert ta.backends.keep_freed_memory() is False
    assert libc.calls == []


def test_tunables_of_other_parts_of_glibc_are_not_malloc_settings():
    assert allocator.user_set_malloc({"GLIBC_TUNABLES": "glibc.pthread.rseq=0"}) is None
    assert allocator.user_set_malloc({}) is None


def test_the_environment_given_is_the_one_read(monkeypatch):
    for name in (*allocator._USER_SETTINGS, "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    assert allocator.user_set_malloc({"MALLOC_TOP_PAD_": "0"}) == "MALLOC_TOP_PAD_"
    assert allocator.user_set_malloc({"GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}) == \
        "GLIBC_TUNABLES"
    monkeypatch.setenv("MALLOC_MMAP_MAX_", "0")
    assert allocator.user_set_malloc() == "MALLOC_MMAP_MAX_"  # none given: the process's own


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the C library is not glibc")
def test_glibc_is_recognised_here():
    libc = allocator._glibc()
    assert libc is not None and libc.gnu_get_libc_version and libc.mallopt


@pytest.mark.parametrize("loaded", ["none", "no version", "no mallopt"])
def test_another_c_library_is_not_glibc(monkeypatch, loaded):
    def load(name):
        if loaded == "none":
            raise OSError("no such library")
        lib = types.SimpleNamespace(gnu_get_libc_version=lambda: b"2.36", mallopt=lambda p, v: 1)
        delattr(lib, "gnu_get_libc_version" if loaded == "no version" else "mallopt")
        return lib

    monkeypatch.setattr(allocator.ctypes, "CDLL", load)
    assert allocator._glibc() is None


def test_without_glibc_it_does_nothing(monkeypatch):
    monkeypatch.setattr(allocator, "_glibc", lambda: None)
    assert ta.backends.keep_freed_memory() is False


@pytest.mark.parametrize("kwargs", [{"trim_mib": 0}, {"trim_mib": 1025}, {"trim_mib": 2.5},
                                    {"trim_mib": True}, {"mmap_mib": 33}, {"mmap_mib": -1},
                                    {"mmap_mib": "32"}])
def test_bad_sizes_are_refused_with_the_argument_named(libc, kwargs):
    (name, value), = kwargs.items()
    with pytest.raises(ValueError, match=f"keep_freed_memory: {name} must be a whole number of "
                                         f"MiB in 1..{1024 if name == 'trim_mib' else 32}, "
                                         f"got {value!r}"):
        ta.backends.keep_freed_memory(**kwargs)
    assert libc.calls == []


# A step's worth of arrays, each over glibc's first mmap threshold (128 KiB), 80 MiB in all:
# more than glibc's own trim threshold can ever grow to (twice its largest mmap threshold,
# 2 x 32 MiB), whatever the process did before (an import that freed a big array raises it).
# By default each round hands the top of the heap back to the OS and faults it in again.
STEPS = """
import resource, sys
import numpy as np
from tinyattn.backends import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def step():
    arrays = [np.ones(512 * 256, dtype=np.float32) for _ in range(160)]  # 160 x 512 KiB
    return sum(float(a[-1]) for a in arrays)
step(); step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(allocator._glibc() is None, reason="the C library is not glibc")
def test_kept_memory_is_reused_without_page_faults():
    env = {k: v for k, v in os.environ.items()
           if k not in allocator._USER_SETTINGS and k != "GLIBC_TUNABLES"}

    def faults(mode):
        run = subprocess.run([sys.executable, "-c", textwrap.dedent(STEPS), mode], env=env,
                             capture_output=True, text=True, check=True)
        return int(run.stdout)

    default, kept = faults("default"), faults("keep")
    over = 5 * (80 - 64) * 2**20 // 4096  # the pages past glibc's largest trim threshold
    assert default >= over, (default, kept)
    assert kept < over // 20, (default, kept)


def test_train_keeps_memory_unless_told_not_to(monkeypatch):
    calls = []
    monkeypatch.setattr(ta.backends, "keep_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setattr(train_mod, "train", lambda cfg, **kw: {"signal": None})
    assert cli.main(["train", "--no-progress"]) == 0
    assert calls == [1]
    assert cli.main(["train", "--no-keep-memory", "--no-progress"]) == 0
    assert calls == [1]
