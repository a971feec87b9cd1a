"""Data checks of compiled bridge code, one mechanism for every bridge that has them
(``mlir``: ``bridges/mlir/emit.py``; ``tvm``: ``bridges/tvm/checks.py``).

Some ops are undefined for some data: an index out of range reads wild memory, an
integer division by zero (or ``INT_MIN / -1``) traps with SIGFPE.  minic's own
paths report such data as a ``DataError`` naming the node; a bridge does the same
this way:

* at compile time, each such op gets a *check*: a message, and a flag the kernel
  computes (1 when any element is bad);
* the op itself computes on a safe substitute (index 0, divisor 1), so no load
  strays and no division traps, whatever the data;
* the compiled function returns its flags after its outputs, in the order of the
  messages; after each call ``raise_flagged`` raises the first flag set.

So a bad input never kills the process and never comes back as a silent answer.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from minic.errors import DataError

DIVISION_BY_ZERO = "integer division by zero"


def index_out_of_range(low: int, n: int, axis: int) -> str:
    """The message of an index check: indices must lie in [low, n) on ``axis``."""
    return f"index out of range [{low}, {n}) on axis {axis}"


def raise_flagged(model: str, path: str, messages: Sequence[str], flags: Sequence,
                  values: Sequence = ()) -> None:
    """Raise ``DataError`` for the first flag that is set (flags come in the messages' order);
    a message's ``{value}`` is filled from ``values`` (the first offending value, where the
    path returns it: the mlir bridge does)."""
    for k, (message, flag) in enumerate(zip(messages, flags)):
        if np.any(np.asarray(flag)):
            if k < len(values):
                message = message.replace("{value}", str(int(np.asarray(values[k]))))
            raise DataError(f"{model}: {path} path: {message}")
