"""Where buffers start: the constants the runtime gives a kernel (the schedule's prepacked panels
among them), the arena of its temporaries, and every local buffer (an ``alloca`` with its
``align``) start on a cache line, ``ALIGN`` bytes.  A tile row or a 64-byte vector then never
straddles two lines, which costs two loads: numpy promises 16 bytes, and an int8 conv on AMX
tiles whose packed weights sat 16 bytes off a line ran 2.5x slower, at random from one run to
the next (docs/int8.md).  Inputs are the caller's arrays, as they are; outputs are numpy's own
(each call makes them, and an aligned array costs 2 us to make where ``np.empty`` costs 0.2: a
third of a small model's call), written once by the last kernel.
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
