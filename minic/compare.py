"""How two paths' outputs are compared: max abs and max relative error (the tolerance
they are judged against is chosen in ``minic/verify/tolerance.py``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Errors:
    abs: float          # max |y - ref|
    rel: float          # max |y - ref| / max |ref|: relative to the output's scale

    def within(self, tol: float) -> bool:
        """'Within tol, abs or rel': either measure at most tol."""
        return self.abs <= tol or self.rel <= tol


def as_tuple(out) -> tuple[np.ndarray, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def errors(outputs, references) -> Errors:
    """Worst errors over all outputs; NaN/Inf must sit in the same places to count as equal."""
    worst_abs = worst_rel = 0.0
    outs, refs = as_tuple(outputs), as_tuple(references)
    if len(outs) != len(refs):
        return Errors(float("inf"), float("inf"))
    for y, r in zip(outs, refs):
        y = np.asarray(y, dtype=np.float64)
        r = np.asarray(r, dtype=np.float64)
        if y.shape != r.shape or not np.array_equal(np.isfinite(y), np.isfinite(r)):
            return Errors(float("inf"), float("inf"))
        finite = np.isfinite(r)
        if not np.array_equal(y[~finite], r[~finite], equal_nan=True):
            return Errors(float("inf"), float("inf"))
        if not finite.any():
            continue
        diff = float(np.max(np.abs(y[finite] - r[finite])))
        scale = float(np.max(np.abs(r[finite])))
        worst_abs = max(worst_abs, diff)
        worst_rel = max(worst_rel, diff / scale if scale > 0 else diff)
    return Errors(worst_abs, worst_rel)


def checksum(outputs: Sequence[np.ndarray]) -> str:
    """A short, order-sensitive fingerprint of outputs (sum and weighted sum)."""
    parts = []
    for y in as_tuple(outputs):
        flat = np.asarray(y, dtype=np.float64).ravel()
        weights = np.arange(1, flat.size + 1) % 97
        parts.append(f"{flat.sum():.6g}/{(flat * weights).sum():.6g}")
    return " ".join(parts)
