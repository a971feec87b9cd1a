"""How one intermediate tensor of path A is compared with the same tensor of path B.

The policy is verify's (``minic.verify.tolerance``: within the bound in
absolute *or* relative terms, relative to the reference's largest magnitude),
with one addition that matters here: a value that is finite on one side and
inf/NaN on the other is always a divergence, however small the finite errors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Side:
    """What one path computed for a value: its range and its non-finite elements."""
    lo: float                 # smallest finite element (nan when none is finite)
    hi: float
    nan: int
    inf: int

    @classmethod
    def of(cls, a: np.ndarray) -> Side:
        a = np.asarray(a, np.float64)
        finite = a[np.isfinite(a)]
        return cls(float(finite.min()) if finite.size else float("nan"),
                   float(finite.max()) if finite.size else float("nan"),
                   int(np.isnan(a).sum()), int(np.isinf(a).sum()))

    def text(self) -> str:
        extra = "".join(f", {n} {k}" for n, k in ((self.nan, "NaN"), (self.inf, "Inf")) if n)
        span = f"[{self.lo:.4g}, {self.hi:.4g}]" if self.lo == self.lo else "no finite element"
        return span + extra


@dataclass(frozen=True)
class Diff:
    """Path B against path A (the reference) on one value."""
    max_abs: float            # over the elements finite on both sides
    max_rel: float            # max_abs / the reference's largest finite magnitude
    lost: int                 # elements finite in A but inf/NaN in B (or the reverse)
    a: Side
    b: Side
    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]

    def within(self, tol: float) -> bool:
        if self.shape_a != self.shape_b or self.lost:
            return False
        return self.max_abs <= tol or self.max_rel <= tol

    def text(self) -> str:
        if self.shape_a != self.shape_b:
            return f"shape {list(self.shape_a)} vs {list(self.shape_b)}"
        lost = f", {self.lost} elements non-finite on one side only" if self.lost else ""
        return f"max abs {self.max_abs:.3g}, max rel {self.max_rel:.3g}{lost}"


def diff(a: np.ndarray, b: np.ndarray) -> Diff:
    """Compare ``b`` with the reference ``a`` (any dtypes; compared as float64)."""
    a, b = np.asarray(a), np.asarray(b)
    sa, sb = Side.of(a), Side.of(b)
    if a.shape != b.shape:
        return Diff(float("inf"), float("inf"), 0, sa, sb, a.shape, b.shape)
    x, y = a.astype(np.float64), b.astype(np.float64)
    fa, fb = np.isfinite(x), np.isfinite(y)
    # NaN where the other has NaN, or the same inf, is agreement.
    same_nonfinite = ~fa & ~fb & ((np.isnan(x) & np.isnan(y)) | (x == y))
    lost = int((fa != fb).sum() + (~fa & ~fb & ~same_nonfinite).sum())
    both = fa & fb
    if not both.any():
        return Diff(0.0, 0.0, lost, sa, sb, a.shape, b.shape)
    err = float(np.max(np.abs(x[both] - y[both])))
    scale = float(np.max(np.abs(x[both])))
    return Diff(err, err / scale if scale > 0 else err, lost, sa, sb, a.shape, b.shape)
