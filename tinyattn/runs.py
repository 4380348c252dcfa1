"""The run folder's safety gear: one training at a time, files that are never half written.

`RunLock` keeps a second `tinyattn train` out of a folder in use (an flock on a lock file that
names the holder's pid and host; a lock left by a dead process is stale and taken over).
`atomic_write` (files.py) replaces a file through a temporary file beside it, so a crash
leaves the old file or the new one, never a mix. `MetricsLog` appends one JSON row per step
and, on resume, repairs a log a crash tore (`repair_metrics`). `data_fingerprint` names the
data a run trains on.
"""

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import time

from .errors import TinyattnError
from .files import TMP_PREFIX, atomic_write, remove_temporaries  # noqa: F401 - (train's)

LOCK_NAME = ".tinyattn.lock"


class RunFolderError(TinyattnError, RuntimeError):
    """A run folder that cannot be used as asked: locked by another run, holding another run, or
    with nothing to resume."""


# ---- the lock ---------------------------------------------------------------------------------


class RunLock:
    """An exclusive lock on a run folder, held from `acquire()` to `release()`.

    The lock file holds {"pid", "host", "started"} so that a refusal names the holder. On one
    host the kernel's flock decides (it dies with its process, even after kill -9); a lock
    file written on another host is honoured unless its process is known dead.
    """

    def __init__(self, folder):
        self.folder = os.fspath(folder)
        self.path = os.path.join(self.folder, LOCK_NAME)
        self.fd = None
        self.stale = None  # the holder a stale lock named, when one was taken over

    def acquire(self):
        for _ in range(10):  # retried only when the file was replaced under us
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunFolderError(self._refusal(holder)) from None
            if _same_file(fd, self.path):
                return self._take(fd)
            os.close(fd)  # another run removed and re-created the file meanwhile
        raise RunFolderError(f"could not lock {self.path}: it keeps being replaced")

    def _take(self, fd):
        holder = _read_holder(fd)
        if holder and _holds(holder):
            os.close(fd)
            raise RunFolderError(self._refusal(holder) + f"; if that run is over, delete "
                                 f"{self.path}")
        self.stale = holder or None
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": time.strftime("%Y-%m-%d %H:%M:%S")}
        self.fd = fd
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
            os.fsync(fd)
        except OSError as e:  # a full disk: give the lock up again
            self.release()
            raise OSError(e.errno, e.strerror, self.path) from None
        return self

    def _refusal(self, holder):
        who = (f"pid {holder.get('pid')} on {holder.get('host')} (since {holder.get('started')})"
               if holder else "another process")
        return f"{self.folder} is in use by another training run: {who}"

    def release(self):
        if self.fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.remove(self.path)  # while still holding it: nobody can take the old file
        os.close(self.fd)
        self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _read_holder(fd):
    try:
        raw = os.pread(fd, 4096, 0)
        holder = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def _same_file(fd, path):
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


def _holds(holder):
    """Whether the process a lock file names may still hold it although its flock is free: one
    on another host (its pid cannot be asked from here), or a live process here other than us
    (a file system without flock). A dead pid on this host left a stale lock."""
    if holder.get("host") != socket.gethostname():
        return True
    return holder.get("pid") != os.getpid() and pid_alive(holder.get("pid"))


def pid_alive(pid):
    """Whether a process with this pid runs on this host."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, ValueError, TypeError, OverflowError):
        return True
    return True


# ---- the metrics log --------------------------------------------------------------------------


class MetricsLog:
    """metrics.jsonl, opened for appending: one JSON row per line, each written whole."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self.f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()

    def append(self, row):
        try:
            self.f.write(json.dumps(row) + "\n")
            self.f.flush()
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), self.path) from None

    def sync(self):
        """Flush the rows written so far to disk (before a checkpoint that counts them)."""
        try:
            self.f.flush()
            os.fsync(self.f.fileno())
        except OSError as e:
            raise OSError(e.errno, e.strerror or str(e), self.path) from None

    def close(self):
        with contextlib.suppress(OSError):  # a full disk was already reported
            self.f.close()


def read_metrics(path, upto):
    """(rows with step <= upto, whether the file needs rewriting) from a metrics.jsonl a crash
    may have torn: a last line cut short is dropped, and so are rows past step `upto` (written
    after the checkpoint a resume starts from). A bad line elsewhere is an error naming it."""
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    torn = lines.pop() != b""  # the text after the last newline: a line cut short
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = _parse_row(line)
        except ValueError as e:
            if number == len(lines):  # the last whole line may be torn too (disk full)
                torn = True
                continue
            raise RunFolderError(f"{path}, line {number}: not a metrics row ({e}); fix or delete "
                                 "that line, or start over with --force") from None
        rows.append(row)
    kept = [r for r in rows if r["step"] <= upto]
    return kept, torn or len(kept) != len(rows)


def _parse_row(line):
    row = json.loads(line)
    if not (isinstance(row, dict) and isinstance(row.get("step"), int)):
        raise ValueError("a row is a JSON object with an integer 'step'")
    return row


def repair_metrics(path, upto):
    """The rows of `path` up to step `upto`; if the file held a torn line or later rows, a
    cleaned copy replaces it (written beside it and renamed, never truncated in place)."""
    if not os.path.exists(path):
        return []
    rows, dirty = read_metrics(path, upto)
    if dirty:
        atomic_write(path, lambda f: f.writelines(json.dumps(r) + "\n" for r in rows), "w")
    return rows


# ---- what the run trains on -------------------------------------------------------------------


def data_fingerprint(task):
    """A hash of the data a task yields: its parameters and, for text, the text itself."""
    spec = {"task": task.name, "vocab": list(task.vocab), "seq_len": task.seq_len,
            "length": getattr(task, "length", None), "text": getattr(task, "text_sha256", None)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()

