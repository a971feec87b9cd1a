"""Fail fast on absurd sizes: a dim of 10^12 is a clear error before any
allocation, not a MemoryError deep inside numpy (or a crash in native code)."""
from __future__ import annotations

import psutil

from minic.errors import UserError


# Below this, asking the OS how much memory is free costs more than it could save:
# the check runs on every inference, so small requests skip it.
CHECK_ABOVE = 1 << 30


def ensure_fits(nbytes: int, what: str) -> None:
    """Raise UserError when ``nbytes`` exceed the memory this machine has free."""
    if nbytes < CHECK_ABOVE:
        return
    available = psutil.virtual_memory().available
    if nbytes > available:
        raise UserError(f"{what} needs {_human(nbytes)}, but only {_human(available)} of memory is free")


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def contiguous(arrays, what: str = "input") -> list:
    """The arrays in row-major order (0-d arrays stay 0-d).  A strided view is
    copied — after checking the copy fits, since a view can claim any size."""
    import numpy as np
    out = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            ensure_fits(a.nbytes, f"a contiguous copy of {what} {i} (shape {list(a.shape)})")
        out.append(np.asarray(a, order="C"))
    return out
