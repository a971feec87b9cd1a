"""Ops whose output size is decided by the data: ``nonzero``, ``unique``, ``non_max_suppression``.

No size of the inputs says how many elements of ``x`` are nonzero.  Each of these ops
names a fresh symbol for that size in its ``count`` attribute (the frontend makes it
unique in the graph) and its output types carry it:

    %i = nonzero(%x) {count = "nonzero_3"} : i64[2, nonzero_3]        // x: f32[3, 4]

They have no compute rule: compiled code cannot size a buffer before the data is
known.  The interpreter runs them as any op and binds the symbol from the result;
a compiled model runs them on the host, between compiled parts of the graph, each
later part compiled for the symbol as for any symbolic input dim
(minic/runtime/split.py).  PyTorch's compiler calls such a size an "unbacked
symbol"; TVM Relax and IREE allocate the result at run time inside compiled code.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import numpy as np

from minic.errors import DataError
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import require
from minic.ir.types import DType, TensorType, dim_prod


@dataclass(frozen=True)
class CountAttrs:
    count: str                         # the symbol of the data-decided size

    def check(self) -> None:
        require(self.count.isidentifier(), f"the count symbol must be an identifier, got {self.count!r}")

    @property
    def decided(self) -> tuple[str, ...]:
        """The symbols of the sizes the data decides (``sized_outputs``)."""
        return (self.count,)


@dataclass(frozen=True)
class UniqueAttrs(CountAttrs):
    axis: int | None = None            # None: the flattened input
    sorted: bool = True                # False: in order of first occurrence


@dataclass(frozen=True)
class NmsAttrs(CountAttrs):
    center_point_box: bool = False     # boxes as [x_center, y_center, width, height], else two corners


def sized_outputs(decided: Collection[str | None], types: list[TensorType],
                  results: tuple[np.ndarray, ...]) -> dict[str, int]:
    """The data-decided sizes of a node's results: {symbol: its value} for each symbol of ``decided``
    (a count, an ``if``'s sizes) that a result carries (a loop without stacked outputs carries none)."""
    return {d: n for t, r in zip(types, results) for d, n in zip(t.shape, r.shape) if d in decided}


# --- nonzero ------------------------------------------------------------------------

def _nonzero(attrs: CountAttrs, x: np.ndarray) -> np.ndarray:
    found = np.nonzero(np.atleast_1d(x))
    return np.array(found, dtype=np.int64)[:x.ndim].reshape(x.ndim, len(found[0]))


define("nonzero", OpKind.LAYOUT, lambda attrs, ts: [TensorType((ts[0].rank, attrs.count), DType.i64)],
       _nonzero, None, CountAttrs,
       doc="nonzero(x) = the indices of x's nonzero elements, one column each, in row-major order",
       torch=lambda t, x: t.torch.nonzero(x).T,
       sized_by_data=True)


# --- unique ---------------------------------------------------------------------------

def _unique_infer(attrs: UniqueAttrs, ts: list[TensorType]) -> list[TensorType]:
    x, u = ts[0], attrs.count
    if attrs.axis is None:
        n, y = dim_prod(x.shape), (u,)
    else:
        require(-x.rank <= attrs.axis < x.rank, f"unique: axis {attrs.axis} is outside the rank {x.rank} of {x}")
        axis = attrs.axis % x.rank
        n, y = x.shape[axis], x.shape[:axis] + (u,) + x.shape[axis + 1:]
    return [TensorType(y, x.dtype), TensorType((u,), DType.i64), TensorType((n,), DType.i64), TensorType((u,), DType.i64)]


def _unique(attrs: UniqueAttrs, x: np.ndarray) -> tuple[np.ndarray, ...]:
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True,
                                          axis=attrs.axis)
    if not attrs.sorted:                                # in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        y = np.take(y, order, axis=0 if attrs.axis is None else attrs.axis)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return y, first.astype(np.int64), inverse.reshape(-1).astype(np.int64), counts.astype(np.int64)


define("unique", OpKind.LAYOUT, _unique_infer, _unique, None, UniqueAttrs,
       doc="unique(x) = (the distinct values or slices along axis, the index of each one's first "
           "occurrence, each element's index among them, how often each occurs)",
       sized_by_data=True)


# --- non_max_suppression -------------------------------------------------------------------

def _nms_infer(attrs: NmsAttrs, ts: list[TensorType]) -> list[TensorType]:
    boxes, scores = ts[0], ts[1]
    require(boxes.rank == 3 and boxes.shape[2] == 4, f"non_max_suppression: boxes must be [batch, boxes, 4], got {boxes}")
    require(scores.rank == 3 and scores.shape[0] == boxes.shape[0] and scores.shape[2] == boxes.shape[1],
            f"non_max_suppression: scores must be [batch, classes, boxes] for boxes {boxes}, got {scores}")
    for t, what in zip(ts[2:], ("max_output_boxes_per_class", "iou_threshold", "score_threshold")):
        require(t.rank <= 1 and t.shape in ((), (1,)), f"non_max_suppression: {what} must be one value, got {t}")
    return [TensorType((attrs.count, 3), DType.i64)]


def _corners(boxes: np.ndarray, center_point_box: bool) -> np.ndarray:
    """[n, 4] boxes as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2."""
    if center_point_box:
        xc, yc, w, h = boxes.T
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=1)
    return np.concatenate([np.minimum(boxes[:, :2], boxes[:, 2:]), np.maximum(boxes[:, :2], boxes[:, 2:])], axis=1)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    inter = np.prod(np.clip(np.minimum(a[2:], b[2:]) - np.maximum(a[:2], b[:2]), 0, None))
    union = np.prod(a[2:] - a[:2]) + np.prod(b[2:] - b[:2]) - inter
    return float(inter / union) if union > 0 else 0.0


def _nms(attrs: NmsAttrs, boxes: np.ndarray, scores: np.ndarray, max_per_class=None, iou_threshold=None,
         score_threshold=None) -> np.ndarray:
    """ONNX NonMaxSuppression: per batch and class, the boxes by falling score (ties: the lower
    index first), each kept unless it overlaps a kept one by IoU > iou_threshold; at most
    max_per_class kept (none when it is 0 or not given); scores <= score_threshold dropped."""
    limit = int(np.asarray(max_per_class).reshape(-1)[0]) if max_per_class is not None else 0
    if limit < 0:
        raise DataError(f"non_max_suppression: max_output_boxes_per_class is negative ({limit})")
    iou_max = float(np.asarray(iou_threshold).reshape(-1)[0]) if iou_threshold is not None else 0.0
    floor = float(np.asarray(score_threshold).reshape(-1)[0]) if score_threshold is not None else None
    selected = []
    for b in range(boxes.shape[0]):
        corners = _corners(boxes[b].astype(np.float64), attrs.center_point_box)
        for c in range(scores.shape[1]):
            s = scores[b, c]
            kept: list[int] = []
            for i in np.argsort(-s, kind="stable"):
                if len(kept) >= limit or (floor is not None and not s[i] > floor):
                    break
                if all(_iou(corners[i], corners[k]) <= iou_max for k in kept):
                    kept.append(int(i))
            selected += [(b, c, i) for i in kept]
    return np.array(selected, dtype=np.int64).reshape(len(selected), 3)


define("non_max_suppression", OpKind.LAYOUT, _nms_infer, _nms, None, NmsAttrs, arity=(2, 5),
       doc="non_max_suppression(boxes, scores[, max_per_class, iou_threshold, score_threshold]) = "
           "the [batch, class, box] index of each box kept, ONNX's NonMaxSuppression",
       sized_by_data=True)
