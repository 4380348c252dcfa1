"""Files that are never half written: `atomic_write` replaces a file through a temporary file
beside it, so a crash leaves the old file or the new one, never a mix (checkpoints, metrics,
figures, graph pictures); `remove_temporaries` clears what a killed write left behind;
`refuse_folder_path` refuses a path that names a folder ("runs/"), as open() does.
"""

import contextlib
import errno
import os
import tempfile

TMP_PREFIX = ".tmp-"


def atomic_write(path, write, mode="wb"):
    """Call `write(f)` on a temporary file beside `path`, flush it to disk, and rename it over
    `path`. On any failure (a full disk, a folder that takes no new files, an exception,
    Ctrl-C) the temporary file is removed, the old `path` is untouched, and the error names
    `path`: an OSError as the same type with `path` as its filename (the original chained),
    any other exception with a note. A symlink is written through, as open() would: the file
    it points to is replaced (the temporary file beside that one), the link stays. A path that
    ends in a separator is refused, as open() refuses it (see refuse_folder_path)."""
    path = os.fspath(path)
    refuse_folder_path(path)
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=os.path.splitext(target)[1],
                                   dir=folder)
        with os.fdopen(fd, mode) as f:
            os.fchmod(f.fileno(), _mode_for(target))
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException as e:
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
        if isinstance(e, OSError):
            raise _naming(e, path) from e
        if isinstance(e, Exception):
            e.add_note(f"atomic_write: {path} was not written (the old file, if any, is kept)")
        raise
    _fsync_folder(folder)


def refuse_folder_path(path):
    """Refuse a path that ends in a separator ("runs/"), as open(path, "w") does (an
    IsADirectoryError naming it): realpath drops the separator, so the write would make or
    replace a file of the folder's name."""
    path = os.fspath(path)
    seps = (os.sep, os.altsep) if os.altsep else (os.sep,)
    if path.endswith(tuple(os.fsencode(c) for c in seps) if isinstance(path, bytes) else seps):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)


def _naming(e, path):
    """OSError `e` again, of its type, naming `path` (not the temporary file, or nothing)."""
    args = (e.errno, e.strerror or str(e), path)
    try:
        named = type(e)(*args)
    except Exception:  # a subclass built otherwise
        named = None
    return named if isinstance(named, type(e)) else OSError(*args)


def _mode_for(path):
    """The permissions a plain open() would give `path` (or those it has): not mkstemp's 0600."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0o022)
        os.umask(umask)
        return 0o666 & ~umask


def _fsync_folder(folder):
    """Make a rename in `folder` durable (where the platform allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_temporaries(folder):
    """Delete the temporary files a killed save left in `folder` (only ours: `.tmp-*`)."""
    for name in os.listdir(folder):
        if name.startswith(TMP_PREFIX):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, name))
