"""Ops whose element depends on nothing but its index: ``range`` (start + i·step,
the size possibly symbolic: ``torch.arange(T)``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import math
from fractions import Fraction

from minic.ir.compute import DataCheck, Site
from minic.ir.loops import BinOp, Cast, Expr, const, dim_expr
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import require
from minic.ir.types import Dim, DType, TensorType


@dataclass(frozen=True)
class RangeAttrs:
    shape: tuple[Dim]                   # (n,): the number of elements, an int or a symbol (T)
    dtype: DType
    start: float = 0.0
    step: float = 1.0


def _range_infer(attrs: RangeAttrs, ts: list[TensorType]) -> list[TensorType]:
    require(attrs.dtype != DType.bool, "range: the dtype must be a number type")
    return [TensorType(attrs.shape, attrs.dtype)]


def _range(attrs: RangeAttrs) -> np.ndarray:
    wide = np.float64 if attrs.dtype.is_float else np.int64
    return (attrs.start + np.arange(attrs.shape[0], dtype=wide) * attrs.step).astype(wide).astype(attrs.dtype.numpy)


def range_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    d = site.attrs.dtype
    wide = DType.f64 if d == DType.f64 else DType.f32 if d.is_float else DType.i64    # computed in, cast to d
    i = Cast(wide, index[0]) if d.is_float else index[0]
    value = BinOp("add", const(site.attrs.start, wide), BinOp("mul", i, const(site.attrs.step, wide)))
    return value if wide == d else Cast(d, value)


def last_that_fits(attrs: RangeAttrs) -> int | None:
    """The largest i whose start + i·step an integer dtype holds (-1: not even the start);
    None for floats, which overflow to inf as PyTorch's do."""
    if attrs.dtype.is_float:
        return None
    low, high = (int(v) for v in (np.iinfo(attrs.dtype.numpy).min, np.iinfo(attrs.dtype.numpy).max))
    start, step = math.floor(attrs.start), attrs.step
    if not low <= start <= high:
        return -1
    if step == 0:
        return 2**62
    return math.floor(Fraction((high if step > 0 else low) - start) / Fraction(step))     # exact: no float rounding


def _range_checks(site: Site) -> list[DataCheck]:
    """An integer range whose last element would leave its dtype is refused, not wrapped (torch
    cannot even state one: its end would not fit)."""
    last = last_that_fits(site.attrs)
    if last is None or last >= 2**62:
        return []
    final = lambda at: BinOp("sub", dim_expr(site.out.shape[0]), const(1))        # noqa: E731
    return [DataCheck((), lambda at: BinOp("gt", final(at), const(last)), final,
                      f"start + i·step leaves {site.attrs.dtype.value} past i = {last}, and the range runs to "
                      "i = {value}")]


define("range", OpKind.ELEMENTWISE, _range_infer, lambda attrs: _range(attrs), range_rule, RangeAttrs,
       arity=(0, 0), checks=_range_checks,
       doc="range {shape=[n], dtype, start, step}[i] = start + i·step (torch.arange); an integer element "
           "the dtype cannot hold is a DataError",
       torch=lambda t: t.torch.arange(t.out[0], dtype=t.dtype(t.attrs.dtype)) * t.attrs.step + t.attrs.start)
