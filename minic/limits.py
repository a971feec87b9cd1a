"""Fail fast on absurd sizes: a dim of 10^12 is a clear error before any
allocation, not a MemoryError deep inside numpy (or a crash in native code).

Every path a file can reach checks here before it allocates: random example
inputs, constant folding and the ONNX importer's evaluation, the interpreter,
the compiled model's outputs and arena.  Sizes are Python ints (``math.prod``),
so a 2^40 x 2^40 value is 2^82 bytes, not an int64 that wrapped round to 0.
"""
from __future__ import annotations

import functools
import gc
import math
from typing import Callable, Iterable, Mapping, TypeVar

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
        raise UserError(f"{what} needs {human(nbytes)}, but only {human(available)} of memory is free")


def array_bytes(shape: Iterable[int], itemsize: int) -> int:
    """Bytes of an array of ``shape`` (exact, however large)."""
    return math.prod(int(d) for d in shape) * itemsize


def ensure_array_fits(shape: Iterable[int], dtype, what: str) -> None:
    """``ensure_fits`` for one array about to be made: the message names it, its type and size."""
    import numpy as np
    shape = tuple(int(d) for d in shape)
    dtype = np.dtype(dtype)
    ensure_fits(array_bytes(shape, dtype.itemsize), f"{what} ({dtype}{list(shape)})")


def check_dims(shape: Iterable, what: str) -> None:
    """Every static dim of a shape >= 0 (a value's type, an array about to be made).
    ``what`` starts the message: ``"expand gives f32[-1, 2]:"``."""
    for i, d in enumerate(shape):
        if isinstance(d, int) and d < 0:
            raise UserError(f"{what} dim {i} is {d}; a dim must be >= 0")


def check_size(shape: Iterable, dtype, what: str) -> None:
    """An array about to be made at compile time: its dims >= 0 and, all static, it fits
    in memory (symbolic dims are checked when bound)."""
    import numpy as np
    shape = tuple(int(d) if isinstance(d, np.integer) else d for d in shape)
    check_dims(shape, what)
    if all(isinstance(d, int) for d in shape):
        ensure_fits(array_bytes(shape, np.dtype(dtype).itemsize), what)


def ensure_values_fit(values, env: Mapping[str, int], what: str) -> None:
    """``ensure_fits`` for the arrays of several IR values at once (symbols bound by ``env``);
    the message names the largest of them."""
    from minic.ir.types import dim_eval
    sizes = [(array_bytes((dim_eval(d, env) for d in v.type.shape), v.type.dtype.numpy.itemsize), v)
             for v in values]
    total = sum(n for n, _ in sizes)
    if total < CHECK_ABOVE:
        return
    n, largest = max(sizes, key=lambda s: s[0])
    ensure_fits(total, f"{what} (the largest value: %{largest.name}: {largest.type}, {human(n)})")


def human(n: int) -> str:
    """Bytes for a person: ``512 B``, ``1.5 GiB``, ``4.0 ZiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} YiB"


# Young-generation allocations between two runs of Python's cyclic collector while
# compiling (the default is 700).
COMPILING_GC_THRESHOLD = 100_000
F = TypeVar("F", bound=Callable)


def fewer_collections(fn: F) -> F:
    """Run ``fn`` with the cyclic garbage collector running less often.

    Importing, optimizing and lowering a graph allocate many small objects
    (Values, Nodes, expressions) that live as long as the graph: the collector,
    run every 700 allocations, walks them again and again (80 % of the time of
    copying a 50,000-node graph).  Compilers written in Python do the same (mypy
    raises the threshold); the threshold is restored on return."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        old = gc.get_threshold()
        if old[0] >= COMPILING_GC_THRESHOLD:         # already raised by a caller
            return fn(*args, **kwargs)
        gc.set_threshold(COMPILING_GC_THRESHOLD, *old[1:])
        try:
            return fn(*args, **kwargs)
        finally:
            gc.set_threshold(*old)
    return wrapper  # type: ignore[return-value]


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
