"""Ops that move data without arithmetic: reshape, flatten, squeeze, unsqueeze,
transpose, expand, concat, split, slice, gather, pad.  Each compute rule is one
input element at a remapped index (or, for concat and pad, a choice between inputs)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from minic.errors import UnsupportedError
from minic.ir.compute import DataCheck, Site, clamp, in_range, index_check, wrap_index, wrap_indices
from minic.ir.loops import BinOp, Expr, Select, const, dim_expr, fold
from minic.ir.graph import QUIET
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import identity
from minic.ir.ops.shapes import broadcast, norm_axes, norm_axis, require
from minic.ir.types import DType, Dim, TensorType, canon, dim_div, dim_floordiv, dim_mul, dim_prod, dim_sum

END = 2**63 - 1                          # a slice end meaning "to the end of the axis"


def _layout(name: str, infer, reference, compute, attrs: type, doc: str, torch, **more) -> None:
    define(name, OpKind.LAYOUT, infer, reference, compute, attrs, doc=doc, torch=torch, **more)


def _groups(src: tuple[Dim, ...], dst: tuple[Dim, ...]) -> list[tuple[list[int], list[int]]] | None:
    """Split two shapes of equal size into runs of axes with equal products, e.g.
    [B*T, 64] vs [B, T, 4, 16] -> ([0], [0, 1]), ([1], [2, 3]).  None if there is no such split."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(src) and j < len(dst):
        gi, gj, pi, pj = [i], [j], src[i], dst[j]
        i, j = i + 1, j + 1
        while canon(pi) != canon(pj):
            if dim_div(pj, pi) is not None and i < len(src):      # pi divides pj: take one more src axis
                pi = dim_mul(pi, src[i]); gi.append(i); i += 1
            elif dim_div(pi, pj) is not None and j < len(dst):
                pj = dim_mul(pj, dst[j]); gj.append(j); j += 1
            else:
                return None
        groups.append((gi, gj))
    rest_i, rest_j = list(range(i, len(src))), list(range(j, len(dst)))
    if any(src[k] != 1 for k in rest_i) or any(dst[k] != 1 for k in rest_j):
        return None
    if groups:                               # trailing size-1 axes join the last group
        groups[-1][0].extend(rest_i); groups[-1][1].extend(rest_j)
    elif rest_i or rest_j:
        groups.append((rest_i, rest_j))
    return groups


def linearize(index: list[Expr], shape: list[Dim]) -> Expr:
    flat: Expr = const(0)
    for i, d in zip(index, shape):
        flat = BinOp("add", BinOp("mul", flat, dim_expr(d)), i)
    return flat


def delinearize(flat: Expr, shape: list[Dim]) -> list[Expr]:
    """The index into ``shape`` at row-major position ``flat``: the last axis is the remainder
    by its size; the axes before it, the index of the quotient."""
    if len(shape) <= 1:
        return [flat] if shape else []
    last = dim_expr(shape[-1])
    return delinearize(BinOp("div", flat, last), shape[:-1]) + [BinOp("mod", flat, last)]


def reshape_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    """The input element of a row-major reshape (flatten, squeeze, unsqueeze, reshape_dynamic too:
    its shape tensor agrees with its declared type)."""
    x = site.inputs[0]
    out_shape, in_shape = site.out.shape, x.type.shape
    # No split into runs of equal products: one run of all axes, through the flat index.
    groups = _groups(out_shape, in_shape) or [(list(range(len(out_shape))), list(range(len(in_shape))))]
    source: list[Expr] = []
    for go, gi in groups:
        if [out_shape[k] for k in go] == [in_shape[k] for k in gi]:
            source += [index[k] for k in go]       # the same axes: no arithmetic
        else:
            flat = linearize([index[k] for k in go], [out_shape[k] for k in go])
            source += delinearize(flat, [in_shape[k] for k in gi])
    return x.at(tuple(source))


def to_out_shape(t, x):
    return x.reshape(t.out)


@dataclass(frozen=True)
class ShapeAttrs:
    shape: tuple[Dim, ...]


def reshape_infer(attrs: ShapeAttrs, ts: list[TensorType], op: str = "reshape") -> list[TensorType]:
    x = ts[0]
    shape = tuple(canon(d) for d in attrs.shape)
    require(canon(dim_prod(x.shape)) == canon(dim_prod(shape)),
            f"{op}: {x} has {dim_prod(x.shape)} elements, target {list(shape)} has {dim_prod(shape)}")
    return [TensorType(shape, x.dtype)]


_layout("reshape", reshape_infer, lambda attrs, x: x.reshape(attrs.shape), reshape_rule, ShapeAttrs,
        "reshape(x, shape): same elements in row-major order, another shape", to_out_shape)


def _expand_infer(attrs: ShapeAttrs, ts: list[TensorType]) -> list[TensorType]:
    return [TensorType(broadcast(ts[0].shape, attrs.shape), ts[0].dtype)]


_layout("expand", _expand_infer,
        lambda attrs, x: np.broadcast_to(x, broadcast(x.shape, attrs.shape)).copy(), identity, ShapeAttrs,
        "expand(x, shape): broadcast x to shape (numpy rules, both ways)", lambda t, x: x.expand(t.out))


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


_layout("flatten", _flatten_infer, _flatten, reshape_rule, AxisAttrs,
        "flatten(x, axis) = reshape(x, [prod(shape[:axis]), prod(shape[axis:])])", to_out_shape)


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


def _torch_squeeze(t, x):
    # One axis at a time, from the back: torch.onnx.export (TorchScript) fails on
    # torch.squeeze(x, dim=(0, 1)) -- docs/production-bugs.md#torch-onnx-squeeze-tuple.
    for axis in sorted((ax % x.dim() for ax in t.attrs.axes), reverse=True):
        x = t.torch.squeeze(x, axis)
    return x


def _torch_unsqueeze(t, x):
    for axis in sorted(ax % len(t.out) for ax in t.attrs.axes):
        x = x.unsqueeze(axis)
    return x


_layout("squeeze", _squeeze_infer, lambda attrs, x: np.squeeze(x, axis=tuple(attrs.axes)), reshape_rule, AxesAttrs,
        "squeeze(x, axes): drop the size-1 axes", _torch_squeeze)
_layout("unsqueeze", _unsqueeze_infer, lambda attrs, x: np.expand_dims(x, attrs.axes), reshape_rule,
        AxesAttrs, "unsqueeze(x, axes): insert size-1 axes at the given output positions", _torch_unsqueeze)


@dataclass(frozen=True)
class PermAttrs:
    perm: tuple[int, ...]


def _transpose_infer(attrs: PermAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(sorted(attrs.perm) == list(range(x.rank)), f"transpose: perm {list(attrs.perm)} is not a permutation of rank {x.rank}")
    return [TensorType(tuple(x.shape[p] for p in attrs.perm), x.dtype)]


def transpose_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    inverse = np.argsort(site.attrs.perm)          # input axis a is output axis inverse[a]
    return site.inputs[0].at(tuple(index[k] for k in inverse))


_layout("transpose", _transpose_infer, lambda attrs, x: np.transpose(x, attrs.perm), transpose_rule, PermAttrs,
        "transpose(x, perm)[i...] = x[i permuted]", lambda t, x: x.permute(t.attrs.perm))


def _concat_infer(attrs: AxisAttrs, ts: list[TensorType]) -> list[TensorType]:
    first = ts[0]
    axis = norm_axis(attrs.axis, first.rank)
    for t in ts[1:]:
        require(t.dtype == first.dtype and t.rank == first.rank
                and all(a == b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis),
                f"concat: {t} does not match {first} off axis {attrs.axis}")
    size = dim_sum((t.shape[axis], 1) for t in ts)                 # T + U: a derived dim "(T + U)"
    return [TensorType(first.shape[:axis] + (size,) + first.shape[axis + 1:], first.dtype)]


def concat_offsets(sizes: list[Dim]) -> list[Expr]:
    """Where each of the pieces of these sizes starts along the axis, and (last) where the last
    one ends: running sums kept as one int plus the symbolic sizes, so that an offset is a
    short expression however many pieces there are (a chain of n additions would be n deep)."""
    offsets, whole, symbolic = [], 0, []
    for d in [*sizes, 0]:
        offsets.append(fold("add", [const(whole), *map(dim_expr, symbolic)]))
        if isinstance(d, int):
            whole += d
        else:
            symbolic.append(d)
    return offsets


def concat_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    axis = norm_axis(site.attrs.axis, site.out.rank)
    pieces = [x for x in site.inputs if x.type.shape[axis] != 0]
    sizes = [x.type.shape[axis] for x in pieces]
    offsets = concat_offsets(sizes)

    def choose(lo: int, hi: int) -> Expr:
        """The element of pieces[lo:hi] at ``index``: a balanced tree of selects, log2(n) deep."""
        if hi - lo == 1:
            local = BinOp("sub", index[axis], offsets[lo])
            return pieces[lo].at(index[:axis] + (clamp(local, sizes[lo]),) + index[axis + 1:])
        mid = (lo + hi) // 2
        return Select(BinOp("lt", index[axis], offsets[mid]), choose(lo, mid), choose(mid, hi))
    return choose(0, len(pieces))


_layout("concat", _concat_infer, lambda attrs, *xs: np.concatenate(xs, axis=attrs.axis), concat_rule, AxisAttrs,
        "concat(x0, x1, ..., axis): join along axis", lambda t, *xs: t.torch.cat(xs, dim=t.attrs.axis),
        arity=(1, 1 << 16))


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


def split_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    start = sum(site.attrs.sizes[:site.output])
    return x.at(index[:axis] + (BinOp("add", index[axis], const(start)),) + index[axis + 1:])


_layout("split", _split_infer,
        lambda attrs, x: tuple(np.split(x, np.cumsum(attrs.sizes)[:-1], axis=attrs.axis)), split_rule, SplitAttrs,
        "split(x, axis, sizes) -> pieces of the given sizes along axis",
        lambda t, x: t.torch.split(x, list(t.attrs.sizes), dim=t.attrs.axis))


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


def _slice_range(d: Dim, start: Dim, end: Dim, step: int) -> tuple[int, Dim]:
    """(first index, length) of ``[start:end:step]`` along an axis of size ``d``."""
    if all(isinstance(v, int) for v in (d, start, end)):
        taken = range(*slice(start, end, step).indices(d))
        return taken.start, len(taken)
    # Symbolic dims: x[:T], and x[a:] or x[a:-b] with a step (a derived size, (d - b - a + step - 1)/step)
    if step == 1 and start == 0 and isinstance(end, str):
        return 0, canon(end)
    if step > 0 and isinstance(start, int) and start >= 0 and isinstance(end, int) and (end == END or end < 0):
        return start, dim_floordiv(d, (0 if end == END else end) - start + step - 1, step)
    raise UnsupportedError(f"slice [{start}:{end}:{step}] of a symbolic axis of size {d} is not supported")


def _slice_infer(attrs: SliceAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    shape = list(x.shape)
    for axis, start, end, step in zip(attrs.axes, attrs.starts, attrs.ends, attrs.steps):
        a = norm_axis(axis, x.rank)
        shape[a] = _slice_range(shape[a], start, end, step)[1]
    return [TensorType(tuple(shape), x.dtype)]


def _slice(attrs: SliceAttrs, x: np.ndarray) -> np.ndarray:
    index = [slice(None)] * x.ndim
    for axis, start, end, step in zip(attrs.axes, attrs.starts, attrs.ends, attrs.steps):
        index[axis] = slice(start, end, step)
    return x[tuple(index)].copy()


def slice_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    result = list(index)
    for axis, start, end, step in zip(site.attrs.axes, site.attrs.starts, site.attrs.ends, site.attrs.steps):
        a = norm_axis(axis, x.type.rank)
        first = _slice_range(x.type.shape[a], start, end, step)[0]     # inference accepted the slice
        result[a] = BinOp("add", const(first), BinOp("mul", index[a], const(step)))
    return x.at(tuple(result))


def _torch_slice(t, x):
    index = [slice(None)] * x.dim()
    for axis, start, end, step in zip(t.attrs.axes, t.attrs.starts, t.attrs.ends, t.attrs.steps):
        if step < 0:
            raise UnsupportedError("slice: torch has no negative steps")
        index[axis] = slice(t.size(start), None if end == END else t.size(end), step)
    return x[tuple(index)]


_layout("slice", _slice_infer, _slice, slice_rule, SliceAttrs,
        "slice(x)[...] = x[start:end:step] on the given axes (Python's clamping rules)", _torch_slice)


@dataclass(frozen=True)
class GatherAttrs:
    axis: int = 0
    # a negative index counts from the end (ONNX, numpy); false: out of range (torch)
    from_end: bool = field(default=True, metadata=QUIET)


def _gather_infer(attrs: GatherAttrs, ts: list[TensorType]) -> list[TensorType]:
    data, idx = ts
    require(idx.dtype in (DType.i64, DType.i32), f"gather: indices must be i64 or i32, got {idx.dtype.value}")
    axis = norm_axis(attrs.axis, data.rank)
    return [TensorType(data.shape[:axis] + idx.shape + data.shape[axis + 1:], data.dtype)]


def _gather(attrs: GatherAttrs, data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.take(data, wrap_indices(idx, data.shape[attrs.axis], "gather", f" on axis {attrs.axis}", attrs.from_end),
                   axis=attrs.axis)


def gather_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    data, idx = site.inputs
    axis = norm_axis(site.attrs.axis, data.type.rank)
    k = idx.type.rank
    i = wrap_index(idx.at(index[axis:axis + k]), data.type.shape[axis], site.attrs.from_end)
    return data.at(index[:axis] + (i,) + index[axis + k:])


def gather_checks(site: Site) -> list[DataCheck]:
    """Every index inside [-n, n) ([0, n) unless the node's ``from_end``): one test per index,
    not per element gathered (gather, gather_elements, scatter_elements)."""
    data, idx = site.inputs[:2]
    axis = norm_axis(site.attrs.axis, data.type.rank)
    return [index_check(idx.type.shape, idx.at, data.type.shape[axis], f" on axis {axis}", site.attrs.from_end)]


def _torch_gather(t, x, idx):
    if idx.dim() == 1:
        return t.torch.index_select(x, t.attrs.axis, idx)
    return t.torch.index_select(x, t.attrs.axis, idx.reshape(-1)).reshape(t.out)


_layout("gather", _gather_infer, _gather, gather_rule, GatherAttrs,
        "gather(data, idx, axis)[..., i..., ...] = data[..., idx[i...], ...] (embedding is axis 0)", _torch_gather,
        arity=(2, 2), checks=gather_checks)


@dataclass(frozen=True)
class PadAttrs:
    pads: tuple[int, ...]               # begin of each axis, then end of each axis
    mode: Literal["constant", "reflect", "edge"] = "constant"
    value: float = 0.0

    def check(self) -> None:
        require(len(self.pads) % 2 == 0 and min(self.pads, default=0) >= 0, f"pad: bad pads {self.pads}")


def _pad_infer(attrs: PadAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(len(attrs.pads) == 2 * x.rank, f"pad: {len(attrs.pads)} pads for rank {x.rank}")
    shape = []
    for i, (d, lo, hi) in enumerate(zip(x.shape, attrs.pads, attrs.pads[x.rank:])):     # begin, end of axis i
        # reflect's rule depends on whether a pad is wider than the axis: static axes only
        require(isinstance(d, int) or lo + hi == 0 or attrs.mode != "reflect",
                f"pad: reflect along axis {i} of {x}, which is symbolic")
        # numpy's pad (the reference, and ONNX's) cannot grow an empty axis by copying its elements.
        require(d != 0 or lo + hi == 0 or attrs.mode == "constant",
                f"pad: axis {i} of {x} is empty, so mode '{attrs.mode}' has no element to copy")
        shape.append(dim_sum([(d, 1)], lo + hi) if lo + hi else d)
    return [TensorType(tuple(shape), x.dtype)]


def _pad(attrs: PadAttrs, x: np.ndarray) -> np.ndarray:
    widths = list(zip(attrs.pads[:x.ndim], attrs.pads[x.ndim:]))
    value = {"constant_values": x.dtype.type(attrs.value)} if attrs.mode == "constant" else {}
    return np.pad(x, widths, mode=attrs.mode, **value)


def pad_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x, pads, mode = site.inputs[0], site.attrs.pads, site.attrs.mode
    inside: list[Expr] = []             # per padded axis: the source index lies in x, not in the padding
    source: list[Expr] = []
    for i, n, before, after in zip(index, x.type.shape, pads[:x.type.rank], pads[x.type.rank:]):
        i = BinOp("sub", i, const(before)) if before else i
        if mode == "reflect":       # ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
            wider = max(before, after)
            if wider and wider >= n > 1:        # only a padded axis, which is static, compares its size
                # Wider than the axis: numpy (ONNX's reference) reflects again and again, which
                # repeats with period 2(n - 1); shifted by whole periods to index from 0 first.
                period = 2 * (n - 1)
                i = BinOp("mod", BinOp("add", i, const(period * -(-before // period))), const(period))
            i = BinOp("max", i, BinOp("sub", const(0), i))
            last = BinOp("sub", dim_expr(n), const(1))
            i = BinOp("min", i, BinOp("sub", BinOp("mul", const(2), last), i))
        if mode == "constant" and (before or after):
            inside.append(in_range(i, const(0), dim_expr(n)))
        source.append(clamp(i, n))
    element = x.at(tuple(source))
    return Select(fold("and", inside), element, const(site.attrs.value, x.type.dtype)) if inside else element


def _torch_pad(t, x):
    rank = x.dim()
    # (begin, end) of each axis, the last axis first (torch's order)
    widths = [w for axis in reversed(range(rank)) for w in (t.attrs.pads[axis], t.attrs.pads[axis + rank])]
    mode = {"edge": "replicate"}.get(t.attrs.mode, t.attrs.mode)
    if mode != "constant":                            # torch pads all but N, C in these modes
        widths = widths[:2 * (rank - 2)]
    return t.F.pad(x, widths, mode=mode, value=t.attrs.value if mode == "constant" else None)


_layout("pad", _pad_infer, _pad, pad_rule, PadAttrs, "pad(x, pads): widen each axis by pads (constant, reflect or edge)",
        _torch_pad)

