"""Where buffers start: every buffer the runtime gives a kernel (outputs, constants, the arena's
temporaries, the schedule's prepacked panels) and every local one (an ``alloca`` with its
``align``) starts on a cache line, ``ALIGN`` bytes.  A tile row or a 64-byte vector then never
straddles two lines, which costs two loads: numpy promises 16 bytes, and an int8 conv on AMX
tiles whose packed weights sat 16 bytes off a line ran 2.5x slower, at random from one run to
the next (docs/int8.md).  Inputs are the caller's arrays, as they are.
"""
from __future__ import annotations

import math

import numpy as np

ALIGN = 64


def aligned_empty(shape: tuple[int, ...], dtype) -> np.ndarray:
    """An uninitialised row-major array whose first byte is on an ``ALIGN``-byte boundary."""
    dtype = np.dtype(dtype)
    size = math.prod(shape) * dtype.itemsize
    raw = np.empty(size + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + size].view(dtype).reshape(shape)


def aligned_zeros(shape: tuple[int, ...], dtype) -> np.ndarray:
    """``aligned_empty``, filled with zeros."""
    out = aligned_empty(shape, dtype)
    out[...] = 0
    return out
