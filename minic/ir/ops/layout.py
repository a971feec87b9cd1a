"""Ops that move data without arithmetic: reshape, flatten, squeeze, unsqueeze,
transpose, expand, concat, split, slice, gather, pad."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.errors import UnsupportedError
from minic.ir.ops import OpDef, OpKind, register
from minic.ir.ops.shapes import broadcast, norm_axes, norm_axis, require
from minic.ir.types import DType, Dim, TensorType, canon, dim_prod

END = 2**63 - 1                          # a slice end meaning "to the end of the axis"


def _layout(name: str, infer, reference, attrs: type, doc: str, arity=(1, 1)) -> None:
    register(OpDef(name, OpKind.LAYOUT, infer, reference, attrs, arity=arity, doc=doc))


@dataclass(frozen=True)
class ShapeAttrs:
    shape: tuple[Dim, ...]


def _reshape_infer(attrs: ShapeAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    shape = tuple(canon(d) for d in attrs.shape)
    require(canon(dim_prod(x.shape)) == canon(dim_prod(shape)),
            f"reshape: {x} has {dim_prod(x.shape)} elements, target {list(shape)} has {dim_prod(shape)}")
    return [TensorType(shape, x.dtype)]


_layout("reshape", _reshape_infer, lambda attrs, x: x.reshape(attrs.shape), ShapeAttrs,
        "reshape(x, shape): same elements in row-major order, another shape")


def _expand_infer(attrs: ShapeAttrs, ts: list[TensorType]) -> list[TensorType]:
    return [TensorType(broadcast(ts[0].shape, attrs.shape), ts[0].dtype)]


_layout("expand", _expand_infer,
        lambda attrs, x: np.broadcast_to(x, np.broadcast_shapes(x.shape, attrs.shape)).copy(), ShapeAttrs,
        "expand(x, shape): broadcast x to shape (numpy rules, both ways)")


@dataclass(frozen=True)
class AxisAttrs:
    axis: int = 1


def flatten_axis(axis: int, rank: int) -> int:
    """flatten's axis lies in [-rank, rank]; a negative one counts from the end."""
    require(-rank <= axis <= rank, f"flatten: axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _flatten_infer(attrs: AxisAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    axis = flatten_axis(attrs.axis, x.rank)
    return [TensorType((dim_prod(x.shape[:axis]), dim_prod(x.shape[axis:])), x.dtype)]


def _flatten(attrs: AxisAttrs, x: np.ndarray) -> np.ndarray:
    axis = flatten_axis(attrs.axis, x.ndim)
    return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))


_layout("flatten", _flatten_infer, _flatten, AxisAttrs,
        "flatten(x, axis) = reshape(x, [prod(shape[:axis]), prod(shape[axis:])])")


@dataclass(frozen=True)
class AxesAttrs:
    axes: tuple[int, ...]


def _squeeze_infer(attrs: AxesAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    axes = norm_axes(attrs.axes, x.rank)
    require(all(x.shape[a] == 1 for a in axes), f"squeeze: axes {attrs.axes} of {x} are not all 1")
    return [TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)]


def _unsqueeze_infer(attrs: AxesAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    axes = norm_axes(attrs.axes, x.rank + len(attrs.axes))
    dims = iter(x.shape)
    return [TensorType(tuple(1 if i in axes else next(dims) for i in range(x.rank + len(axes))), x.dtype)]


_layout("squeeze", _squeeze_infer, lambda attrs, x: np.squeeze(x, axis=tuple(attrs.axes)), AxesAttrs,
        "squeeze(x, axes): drop the size-1 axes")
_layout("unsqueeze", _unsqueeze_infer,
        lambda attrs, x: np.expand_dims(x, tuple(a % (x.ndim + len(attrs.axes)) for a in attrs.axes)), AxesAttrs,
        "unsqueeze(x, axes): insert size-1 axes at the given output positions")


@dataclass(frozen=True)
class PermAttrs:
    perm: tuple[int, ...]


def _transpose_infer(attrs: PermAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(sorted(attrs.perm) == list(range(x.rank)), f"transpose: perm {list(attrs.perm)} is not a permutation of rank {x.rank}")
    return [TensorType(tuple(x.shape[p] for p in attrs.perm), x.dtype)]


_layout("transpose", _transpose_infer, lambda attrs, x: np.transpose(x, attrs.perm).copy(), PermAttrs,
        "transpose(x, perm)[i...] = x[i permuted]")


def _concat_infer(attrs: AxisAttrs, ts: list[TensorType]) -> list[TensorType]:
    first = ts[0]
    axis = norm_axis(attrs.axis, first.rank)
    for t in ts[1:]:
        require(t.dtype == first.dtype and t.rank == first.rank
                and all(a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis),
                f"concat: {t} does not match {first} off axis {attrs.axis}")
    total = [t.shape[axis] for t in ts]
    if all(isinstance(d, int) for d in total):
        size: Dim = sum(total)
    else:
        nonzero = [d for d in total if d != 0]
        if len(nonzero) != 1:
            raise UnsupportedError(f"concat: symbolic sizes {total} along axis {axis} cannot be added")
        size = nonzero[0]
    return [TensorType(first.shape[:axis] + (size,) + first.shape[axis + 1:], first.dtype)]


_layout("concat", _concat_infer, lambda attrs, *xs: np.concatenate(xs, axis=attrs.axis), AxisAttrs,
        "concat(x0, x1, ..., axis): join along axis", arity=(1, 1 << 16))


@dataclass(frozen=True)
class SplitAttrs:
    axis: int
    sizes: tuple[int, ...]

    def check(self) -> None:
        require(len(self.sizes) >= 1 and min(self.sizes) >= 0, f"split: bad sizes {self.sizes}")


def _split_infer(attrs: SplitAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    axis = norm_axis(attrs.axis, x.rank)
    require(x.shape[axis] == sum(attrs.sizes), f"split: sizes {list(attrs.sizes)} do not add up to {x.shape[axis]}")
    return [TensorType(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in attrs.sizes]


_layout("split", _split_infer,
        lambda attrs, x: tuple(np.split(x, np.cumsum(attrs.sizes)[:-1], axis=attrs.axis)), SplitAttrs,
        "split(x, axis, sizes) -> pieces of the given sizes along axis")


@dataclass(frozen=True)
class SliceAttrs:
    axes: tuple[int, ...]
    starts: tuple[Dim, ...]
    ends: tuple[Dim, ...]
    steps: tuple[int, ...]

    def check(self) -> None:
        require(len(self.axes) == len(self.starts) == len(self.ends) == len(self.steps),
                "slice: axes, starts, ends and steps must have one entry each")
        require(all(s != 0 for s in self.steps), "slice: a step must not be 0")


def _slice_len(d: Dim, start: Dim, end: Dim, step: int) -> Dim:
    if all(isinstance(v, int) for v in (d, start, end)):
        return len(range(*slice(start, end, step).indices(d)))
    # Symbolic dims: the forms the zoo needs, x[:T] and x[s:] over a symbolic axis.
    if step == 1 and start == 0 and isinstance(end, str):
        return canon(end)
    if step == 1 and isinstance(start, int) and start >= 0 and end == END and isinstance(d, str):
        return d if start == 0 else _unsupported_slice(d, start, end, step)
    return _unsupported_slice(d, start, end, step)


def _unsupported_slice(d, start, end, step):
    raise UnsupportedError(f"slice [{start}:{end}:{step}] of a symbolic axis of size {d} is not supported")


def _slice_infer(attrs: SliceAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    shape = list(x.shape)
    for axis, start, end, step in zip(attrs.axes, attrs.starts, attrs.ends, attrs.steps):
        a = norm_axis(axis, x.rank)
        shape[a] = _slice_len(shape[a], start, end, step)
    return [TensorType(tuple(shape), x.dtype)]


def _slice(attrs: SliceAttrs, x: np.ndarray) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(attrs.axes, attrs.starts, attrs.ends, attrs.steps):
        index[axis] = slice(start, end, step)
    return x[tuple(index)].copy()


_layout("slice", _slice_infer, _slice, SliceAttrs,
        "slice(x)[...] = x[start:end:step] on the given axes (Python's clamping rules)")


def _gather_infer(attrs: AxisAttrs, ts: list[TensorType]) -> list[TensorType]:
    data, idx = ts
    require(idx.dtype in (DType.i64, DType.i32), f"gather: indices must be i64 or i32, got {idx.dtype.value}")
    axis = norm_axis(attrs.axis, data.rank)
    return [TensorType(data.shape[:axis] + idx.shape + data.shape[axis + 1:], data.dtype)]


def _gather(attrs: AxisAttrs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    n = data.shape[attrs.axis]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"gather: index out of range [{-n}, {n}) on axis {attrs.axis}")
    return np.take(data, idx, axis=attrs.axis)


_layout("gather", _gather_infer, _gather, AxisAttrs,
        "gather(data, idx, axis)[..., i..., ...] = data[..., idx[i...], ...] (embedding is axis 0)", arity=(2, 2))


@dataclass(frozen=True)
class PadAttrs:
    pads: tuple[int, ...]               # begin of each axis, then end of each axis
    mode: str = "constant"              # constant | reflect | edge
    value: float = 0.0

    def check(self) -> None:
        require(self.mode in ("constant", "reflect", "edge"), f"pad: unknown mode '{self.mode}'")
        require(len(self.pads) % 2 == 0 and min(self.pads, default=0) >= 0, f"pad: bad pads {self.pads}")


def _pad_infer(attrs: PadAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(len(attrs.pads) == 2 * x.rank, f"pad: {len(attrs.pads)} pads for rank {x.rank}")
    shape = []
    for i, d in enumerate(x.shape):
        extra = attrs.pads[i] + attrs.pads[i + x.rank]
        require(isinstance(d, int) or extra == 0, f"pad: axis {i} of {x} is symbolic")
        shape.append(d + extra if extra else d)
    return [TensorType(tuple(shape), x.dtype)]


def _pad(attrs: PadAttrs, x: np.ndarray) -> np.ndarray:
    widths = list(zip(attrs.pads[:x.ndim], attrs.pads[x.ndim:]))
    if attrs.mode == "constant":
        return np.pad(x, widths, constant_values=x.dtype.type(attrs.value))
    return np.pad(x, widths, mode=attrs.mode)


_layout("pad", _pad_infer, _pad, PadAttrs, "pad(x, pads): widen each axis by pads (constant, reflect or edge)")
