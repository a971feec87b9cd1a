"""The buffer plan: temporaries share one arena when their lifetimes do not overlap.

Each temporary lives from the kernel that writes it to the last kernel that
reads it.  Sizes depend on the symbols (B, T), so the plan is made per set of
symbol values (cheap: a few hundred buffers at most) and cached by the caller.
Greedy placement, largest first, at the lowest offset that does not collide
with an already placed buffer whose lifetime overlaps (as in TVM's and
XLA's simple planners).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from minic.ir.aligned import ALIGN
from minic.ir.types import DType, dim_eval


@dataclass(frozen=True)
class Temp:
    name: str
    shape: tuple
    dtype: DType
    first: int                            # first kernel that touches it
    last: int                             # last kernel that touches it


@dataclass(frozen=True)
class BufferPlan:
    offsets: dict[str, int]               # byte offset of each temporary in the arena
    arena_bytes: int                      # the planned peak
    naive_bytes: int                      # one buffer per value, for comparison


def _round_up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def plan(temps: list[Temp], env: dict[str, int]) -> BufferPlan:
    sizes = {t.name: _round_up(max(1, t.dtype.numpy.itemsize * math.prod(dim_eval(d, env) for d in t.shape)))
             for t in temps}
    offsets: dict[str, int] = {}           # of the buffers placed so far
    for t in sorted(temps, key=lambda t: (-sizes[t.name], t.first, t.name)):
        busy = sorted((offsets[o.name], offsets[o.name] + sizes[o.name]) for o in temps
                      if o.name in offsets and o.first <= t.last and t.first <= o.last)
        offset = 0
        for lo, hi in busy:                # first gap large enough
            if offset + sizes[t.name] <= lo:
                break
            offset = max(offset, hi)
        offsets[t.name] = offset
    arena = max((offsets[t.name] + sizes[t.name] for t in temps), default=0)
    return BufferPlan(offsets, arena, sum(sizes.values()))
