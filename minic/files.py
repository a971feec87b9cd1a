"""Writing files so that nothing is lost or half-written: every file minic writes
(IR text, .npz side files, pictures, cache entries, tuning records) goes to a
temporary file in the same folder first and is renamed over the target, which
POSIX makes atomic — a reader sees the old file or the new one, never a mix."""
from __future__ import annotations

import fcntl
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from minic.errors import UserError


def write_atomic(path: str | os.PathLike, data: bytes) -> Path:
    """Replace ``path`` with ``data`` in one step; create its folder if needed.  A write
    the system refuses (a full disk, no permission) is a UserError naming the file, and
    leaves the file as it was."""
    path = Path(path)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise UserError(f"cannot write {path}: {e.strerror or e}") from e
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def locked(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on ``path``'s sibling ``.lock`` file: for read-modify-write
    of a shared file (tuning records) by several processes at once."""
    lock = Path(path).with_name(Path(path).name + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
