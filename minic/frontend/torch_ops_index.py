"""Sorting, advanced indexing and scatters of views for the torch frontend, each
spelled in minic ops that exist:

* ``sort`` and ``topk`` by ranks (``compose.sorted_along``, shared with ONNX's TopK).
* ``index.Tensor`` / ``index_put`` with several index tensors: the indexed axes
  moved to the front, the indices stacked on a last axis, one ``gather_nd`` /
  ``scatter_nd``, and torch's placement of the broadcast index axes.
* ``select_scatter``, ``slice_scatter``, ``diagonal``, ``as_strided``,
  ``masked_scatter``, ``cdist``/``pdist``: concatenations, masks and gathers of
  constant indices, and broadcasting arithmetic.

The conventions are ``torch_ops``'s (one handler per overload, ``cx.emit``).
"""
from __future__ import annotations

import numpy as np

from minic.errors import UserError
from minic.frontend import compose
from minic.frontend.torch_ops import aten, axis_of, out_dtype, wanted, handler_table
from minic.ir.ops.layout import END
from minic.ir.ops.shapes import broadcast
from minic.ir.types import DType, dim_prod

HANDLERS = handler_table()
handles = HANDLERS.add


def _transpose(cx, x, perm):
    perm = tuple(perm)
    return x if perm == tuple(range(len(perm))) else cx.emit("transpose", [x], cx.attrs("transpose", perm=perm))


def _inverse(perm) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(perm))


def _reshape(cx, x, shape):
    return cx.emit("reshape", [x], cx.attrs("reshape", shape=tuple(shape)))


def _unsqueeze(cx, x, axis: int):
    return cx.emit("unsqueeze", [x], cx.attrs("unsqueeze", axes=(axis % (x.type.rank + 1),)))


def _const(cx, name: str, data) -> object:
    return cx.add_constant(f"{cx.current.name}_{name}", np.asarray(data))


# --- sort and topk by ranks (compose.sorted_along) -------------------------------------------

@handles(aten.sort.default, aten.sort.stable)
def _sort(cx, node, a):
    x = cx.value(a["self"])
    return compose.sorted_along(cx, x, axis_of(int(a["dim"]), x.type.rank), bool(a["descending"]))   # stable either way


@handles(aten.topk.default)
def _topk(cx, node, a):
    """The k largest (smallest) in order; with sorted=False torch leaves the order open, this keeps it."""
    x = cx.value(a["self"])
    return compose.sorted_along(cx, x, axis_of(int(a["dim"]), x.type.rank), bool(a["largest"]), int(a["k"]))


# --- advanced indexing -------------------------------------------------------------------

def _advanced(cx, x, indices):
    """x with its indexed axes first, the index tensors broadcast and stacked on a last axis,
    and where torch puts the broadcast index axes in the result (``lead``: after that many
    plain axes when the indexed axes are adjacent, else first)."""
    picked = [i for i, t in enumerate(indices) if t is not None]
    rest = [i for i in range(x.type.rank) if i not in picked]
    idx = [cx.value(indices[i]) for i in picked]
    if any(v.type.dtype == DType.bool for v in idx):
        raise UserError("indexing with a bool mask is not supported (its size depends on the data)")
    shapes = [tuple(v.type.shape) for v in idx]
    if all(isinstance(d, int) for s in shapes for d in s):
        shape = tuple(np.broadcast_shapes(*shapes))
    elif len(set(shapes)) == 1:
        shape = shapes[0]
    else:
        raise UserError(f"index tensors of symbolic shapes {shapes} that differ are not supported")
    parts = []
    for v in idx:
        v = cx.cast(v, DType.i64)
        if v.type.shape != shape:
            v = cx.emit("expand", [v], cx.attrs("expand", shape=shape))
        parts.append(_unsqueeze(cx, v, -1))
    stacked = parts[0] if len(parts) == 1 else cx.emit("concat", parts, cx.attrs("concat", axis=len(shape)))
    adjacent = picked == list(range(picked[0], picked[-1] + 1))
    lead = sum(1 for r in rest if r < picked[0]) if adjacent else 0
    return _transpose(cx, x, picked + rest), stacked, len(shape), lead


def _place(rank: int, nb: int, lead: int) -> tuple[int, ...]:
    """From [*broadcast (nb), *plain] to torch's order: plain[:lead], broadcast, plain[lead:]."""
    plain = list(range(nb, rank))
    return tuple(plain[:lead] + list(range(nb)) + plain[lead:])


@handles(aten.index.Tensor)
def _index(cx, node, a):
    x, indices = cx.value(a["self"]), list(a["indices"])
    picked = [i for i, t in enumerate(indices) if t is not None]
    if len(picked) == 1:                                  # one index tensor: a gather on that axis
        idx = cx.value(indices[picked[0]])
        if idx.type.dtype == DType.bool:                  # x[mask]: the cells the mask keeps, in order
            return _masked(cx, x, idx, picked[0])
        return cx.emit("gather", [x, idx], cx.attrs("gather", axis=picked[0]))
    xt, stacked, nb, lead = _advanced(cx, x, indices)
    out = cx.emit("gather_nd", [xt, stacked])
    return _transpose(cx, out, _place(out.type.rank, nb, lead))


def _masked(cx, x, mask, axis: int):
    """x[..., mask] with the mask over x's axes from ``axis`` on: those axes flattened into one,
    then the positions the mask keeps (``compose.compress``), a count the data decides."""
    k = mask.type.rank
    lead, covered, rest = x.type.shape[:axis], x.type.shape[axis:axis + k], x.type.shape[axis + k:]
    if tuple(mask.type.shape) != tuple(covered):
        raise UserError(f"a bool mask {list(mask.type.shape)} over axes of sizes {list(covered)}")
    flat = _reshape(cx, x, (*lead, dim_prod(covered), *rest))
    return compose.compress(cx, flat, _reshape(cx, mask, (dim_prod(covered),)), axis)


@handles(aten.nonzero.default)
def _nonzero(cx, node, a):
    """The indices of x's nonzero cells, one row each ([count, rank]; minic's nonzero gives columns)."""
    found = cx.one("nonzero", cx.value(a["self"]), count=cx.fresh_symbol("count"))
    return cx.one("transpose", found, perm=(1, 0))


@handles(aten.masked_select.default)
def _masked_select(cx, node, a):
    """x's cells where mask is true, in row-major order (x and mask broadcast together)."""
    x, mask = cx.value(a["self"]), cx.value(a["mask"])
    shape = tuple(broadcast(x.type.shape, mask.type.shape))
    x, mask = (v if v.type.shape == shape else cx.one("expand", v, shape=shape) for v in (x, mask))
    return _masked(cx, x, mask, 0)


@handles(aten.index_put.default, aten._index_put_impl.default, aten._unsafe_index_put.default)
def _index_put(cx, node, a):
    """x[indices] = values (accumulate: +=) as one scatter_nd; one bool mask with values that do
    not depend on how many it selects is a where."""
    x, indices = cx.value(a["self"]), list(a["indices"])
    values = cx.cast(cx.value(a["values"]), x.type.dtype)
    masks = [cx.value(t) for t in indices if t is not None and cx.value(t).type.dtype == DType.bool]
    if masks:
        return _masked_put(cx, x, indices, masks, values, bool(a["accumulate"]))
    xt, stacked, nb, lead = _advanced(cx, x, indices)
    target = tuple(stacked.type.shape[:-1]) + tuple(xt.type.shape[stacked.type.shape[-1]:])
    torch_order = _place(len(target), nb, lead)
    as_torch = tuple(target[i] for i in torch_order)       # the shape of x[indices] as torch lays it out
    if values.type.shape != as_torch:
        values = cx.emit("expand", [values], cx.attrs("expand", shape=as_torch))
    values = _transpose(cx, values, _inverse(torch_order))
    out = cx.emit("scatter_nd", [xt, stacked, values],
                  cx.attrs("scatter_nd", reduction="add" if a["accumulate"] else "none"))
    picked = [i for i, t in enumerate(indices) if t is not None]
    return _transpose(cx, out, _inverse(picked + [i for i in range(x.type.rank) if i not in picked]))


def _masked_put(cx, x, indices, masks, values, accumulate: bool):
    if len(masks) != 1 or indices[0] is None or len([t for t in indices if t is not None]) != 1:
        raise UserError("index_put with a bool mask among other indices is not supported")
    mask = masks[0]
    rest = tuple(x.type.shape[mask.type.rank:])
    if values.type.rank > len(rest) and values.type.shape[0] != 1:
        raise UserError("index_put of one value per selected element (x[mask] = v) is not supported "
                        "(that count depends on the data); masked_scatter is")
    if values.type.rank > len(rest):
        values = _reshape(cx, values, values.type.shape[1:])
    m = _reshape(cx, mask, tuple(mask.type.shape) + (1,) * len(rest))
    new = cx.emit("add", [x, values]) if accumulate else values
    new = new if new.type.shape == x.type.shape else cx.emit("expand", [new], cx.attrs("expand", shape=x.type.shape))
    return cx.emit("where", [m, new, x])


@handles(aten.masked_scatter.default)
def _masked_scatter(cx, node, a):
    """out = x where not mask; where mask, source's elements in order: source.flat[cumsum(mask) - 1]."""
    x, mask, source = cx.value(a["self"]), cx.value(a["mask"]), cx.cast(cx.value(a["source"]), out_dtype(cx, node))
    shape = cx.shape(node.meta["val"].shape)             # self and mask broadcast together
    x, mask = (v if v.type.shape == shape else cx.emit("expand", [v], cx.attrs("expand", shape=shape)) for v in (x, mask))
    flat = (dim_prod(x.type.shape),)
    taken = cx.emit("cumsum", [cx.cast(_reshape(cx, mask, flat), DType.i64)], cx.attrs("cumsum", axis=0))
    one = cx.scalar(1, DType.i64, f"{node.name}_one")
    slot = cx.emit("max", [cx.emit("sub", [taken, one]), cx.scalar(0, DType.i64, f"{node.name}_zero")])
    picked = cx.emit("gather", [_reshape(cx, source, (dim_prod(source.type.shape),)), slot], cx.attrs("gather", axis=0))
    return cx.emit("where", [mask, _reshape(cx, picked, x.type.shape), x])


@handles(aten.unfold.default)
def _unfold(cx, node, a):
    """x.unfold(dim, size, step): windows of ``size`` every ``step`` along dim, the window's
    cells on a new last axis (a gather of constant [windows, size] indices, moved last)."""
    x = cx.value(a["self"])
    if x.type.rank == 0:
        return _reshape(cx, x, (1,))
    axis, size, step = axis_of(int(a["dimension"]), x.type.rank), int(a["size"]), int(a["step"])
    n = compose.static(cx, x, axis, "unfold")
    starts = np.arange(0, n - size + 1, step, dtype=np.int64)
    windows = cx.emit("gather", [x, _const(cx, "cells", starts[:, None] + np.arange(size, dtype=np.int64))],
                      cx.attrs("gather", axis=axis))                      # [.., windows, size, ..]
    rank = windows.type.rank
    return _transpose(cx, windows, [k for k in range(rank) if k != axis + 1] + [axis + 1])


# --- scatters into views, and strided views ----------------------------------------------

def _slice(cx, x, axis: int, start, end, step: int = 1):
    return cx.emit("slice", [x], cx.attrs("slice", axes=(axis,), starts=(start,), ends=(end,), steps=(step,)))


def _spliced(cx, x, src, axis: int, start: int, end: int):
    """x with x[start:end] along axis replaced by src (a concatenation of up to three parts)."""
    parts = ([_slice(cx, x, axis, 0, start)] if start > 0 else []) + [src]
    size = x.type.shape[axis]
    if not (isinstance(size, int) and end >= size):
        parts.append(_slice(cx, x, axis, end, END))
    return parts[0] if len(parts) == 1 else cx.emit("concat", parts, cx.attrs("concat", axis=axis))


@handles(aten.select_scatter.default)
def _select_scatter(cx, node, a):
    x, src = cx.value(a["self"]), cx.cast(cx.value(a["src"]), out_dtype(cx, node))
    axis, index = axis_of(int(a["dim"]), x.type.rank), int(a["index"])
    if index < 0:
        index += compose.static(cx, x, axis, "select_scatter with a negative index")
    return _spliced(cx, x, _unsqueeze(cx, src, axis), axis, index, index + 1)


@handles(aten.slice_scatter.default)
def _slice_scatter(cx, node, a):
    x, src = cx.value(a["self"]), cx.cast(cx.value(a["src"]), out_dtype(cx, node))
    axis, step = axis_of(int(a["dim"]), x.type.rank), int(a["step"])
    n = compose.static(cx, x, axis, "slice_scatter")
    start, end, _ = slice(a["start"], a["end"], step).indices(n)
    if step == 1:
        return _spliced(cx, x, src, axis, start, max(end, start))
    # Every step-th position from start: a mask along the axis and src gathered to full length.
    positions = np.arange(n)
    hit = (positions >= start) & (positions < end) & ((positions - start) % step == 0)
    source = np.clip((positions - start) // step, 0, max(src.type.shape[axis] - 1, 0))
    gathered = cx.emit("gather", [src, _const(cx, "source", source.astype(np.int64))], cx.attrs("gather", axis=axis))
    mask = _const(cx, "mask", hit.reshape((n,) + (1,) * (x.type.rank - 1 - axis)))
    return cx.emit("where", [mask, gathered, x])


@handles(aten.diagonal.default)
def _diagonal(cx, node, a):
    """x's (dim1, dim2) diagonal as a last axis: both moved last, flattened, a gather of i·(n2+1) + offset."""
    x = cx.value(a["self"])
    d1, d2, offset = axis_of(int(a["dim1"]), x.type.rank), axis_of(int(a["dim2"]), x.type.rank), int(a["offset"])
    n1, n2 = compose.static(cx, x, d1, "diagonal"), compose.static(cx, x, d2, "diagonal")
    rest = [i for i in range(x.type.rank) if i not in (d1, d2)]
    flat = _reshape(cx, _transpose(cx, x, rest + [d1, d2]), tuple(x.type.shape[i] for i in rest) + (n1 * n2,))
    rows = np.arange(max(0, -offset), min(n1, n2 - offset)) if n2 - offset > 0 else np.arange(0)
    if rows.size == 0:
        raise UserError("diagonal: an empty diagonal is not supported")
    return cx.emit("gather", [flat, _const(cx, "cells", rows * n2 + rows + offset)], cx.attrs("gather", axis=len(rest)))


@handles(aten.as_strided.default)
def _as_strided(cx, node, a):
    """out[i] = storage[offset + Σ i_k·stride_k], where the storage is the one x views: x's own
    strides and storage offset, as torch.export traced them (a transpose, a slice, a
    channels-last input...), say which element of x sits in each storage cell.  A gather of
    constant indices into x, flattened."""
    x = cx.value(a["self"])
    traced = a["self"].meta["val"]
    sizes = [compose.static(cx, x, k, "as_strided") for k in range(x.type.rank)]
    held = _cells(sizes, [int(s) for s in traced.stride()], int(traced.storage_offset()))
    size, stride = [int(s) for s in a["size"]], [int(s) for s in a["stride"]]
    wanted = _cells(size, stride, int(a.get("storage_offset") or 0))
    owner = np.full(max(int(held.max(initial=0)), int(wanted.max(initial=0))) + 1, -1, np.int64)
    owner[held.reshape(-1)] = np.arange(held.size)              # (cells x repeats hold one value)
    picked = owner[wanted]
    if (picked < 0).any():
        cell = int(wanted[picked < 0].reshape(-1)[0])
        raise UserError(f"as_strided reads storage cell {cell}, which its input (a view of {list(traced.shape)} "
                        f"with strides {list(traced.stride())}, offset {traced.storage_offset()}) does not hold")
    flat = _reshape(cx, x, (held.size,))
    return cx.emit("gather", [flat, _const(cx, "cells", picked)], cx.attrs("gather", axis=0))


def _cells(size: list[int], stride: list[int], offset: int) -> np.ndarray:
    """The storage cell of each element of a strided view: offset + Σ i_k·stride_k."""
    cells = np.full(size, offset, np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        cells = cells + (np.arange(n, dtype=np.int64) * s).reshape([-1 if j == k else 1 for j in range(len(size))])
    return cells


# --- distances ---------------------------------------------------------------------------

def _distances(cx, node, x1, x2, p: float):
    """‖x1[.., i, :] - x2[.., j, :]‖_p for every (i, j): broadcasting differences, one reduction."""
    d = cx.emit("sub", [_unsqueeze(cx, x1, -2), _unsqueeze(cx, x2, -3)])
    last = (d.type.rank - 1,)
    if p == 0:
        ne = cx.emit("not", [cx.emit("eq", [d, cx.scalar(0.0, d.type.dtype, f"{node.name}_zero")])])
        return cx.emit("reduce_sum", [cx.cast(ne, d.type.dtype)], cx.attrs("reduce_sum", axes=last, keepdims=False))
    mag = cx.emit("abs", [d])
    if p == float("inf"):
        return cx.emit("reduce_max", [mag], cx.attrs("reduce_max", axes=last, keepdims=False))
    if p == 2:
        total = cx.emit("reduce_sum", [cx.emit("mul", [d, d])], cx.attrs("reduce_sum", axes=last, keepdims=False))
        return cx.emit("sqrt", [total])
    powered = mag if p == 1 else cx.emit("pow", [mag, cx.scalar(p, d.type.dtype, f"{node.name}_p")])
    total = cx.emit("reduce_sum", [powered], cx.attrs("reduce_sum", axes=last, keepdims=False))
    return total if p == 1 else cx.emit("pow", [total, cx.scalar(1.0 / p, d.type.dtype, f"{node.name}_inv_p")])


@handles(aten._cdist_forward.default)
def _cdist(cx, node, a):
    return _distances(cx, node, cx.value(a["x1"]), cx.value(a["x2"]), float(a["p"]))


@handles(aten._pdist_forward.default)
def _pdist(cx, node, a):
    """The distances of rows i < j, in row-major order: the full matrix's upper triangle, gathered."""
    x = cx.value(a["self"])
    n = compose.static(cx, x, 0, "pdist")
    full = _reshape(cx, _distances(cx, node, x, x, float(a["p"])), (n * n,))
    i, j = np.triu_indices(n, 1)
    if i.size == 0:
        raise UserError("pdist of fewer than two rows is empty, which is not supported")
    return cx.emit("gather", [full, _const(cx, "pairs", (i * n + j).astype(np.int64))], cx.attrs("gather", axis=0))


@handles(aten._embedding_bag.default, aten._embedding_bag_forward_only.default)   # the latter: under no_grad
def _embedding_bag(cx, node, a):
    """Each bag's rows of weight (sum, mean or max): bag b holds indices offsets[b] .. offsets[b+1]-1;
    a [bags, L] membership mask (times per_sample_weights) matmul the gathered rows, or masks a max."""
    weight, ids, offsets = cx.value(a["weight"]), cx.value(a["indices"]), cx.value(a["offsets"])
    mode, dtype = int(a["mode"]), weight.type.dtype
    if ids.type.rank != 1:
        raise UserError("embedding_bag with 2-D indices and offsets is not supported")
    bags = offsets.type.shape[0] - (1 if a["include_last_offset"] else 0)
    length = ids.type.shape[0]
    pos = cx.emit("range", [], cx.attrs("range", shape=(length,), dtype=DType.i64))
    started = cx.emit("not", [cx.emit("gt", [_unsqueeze(cx, cx.cast(offsets, DType.i64), 1), _unsqueeze(cx, pos, 0)])])
    bag = cx.emit("sub", [cx.emit("reduce_sum", [cx.cast(started, DType.i64)], cx.attrs("reduce_sum", axes=(0,),
                                                                                         keepdims=False)),
                          cx.scalar(1, DType.i64, f"{node.name}_one")])                  # [L]: the bag of each index
    member = cx.emit("eq", [_unsqueeze(cx, bag, 0),
                            _unsqueeze(cx, cx.emit("range", [], cx.attrs("range", shape=(bags,), dtype=DType.i64)), 1)])
    padding = int(a["padding_idx"]) if a["padding_idx"] is not None else -1
    if padding >= 0:
        kept = cx.emit("not", [cx.emit("eq", [cx.cast(ids, DType.i64), cx.scalar(padding, DType.i64, f"{node.name}_pad")])])
        member = cx.emit("and", [member, _unsqueeze(cx, kept, 0)])
    rows = cx.emit("gather", [weight, ids], cx.attrs("gather", axis=0, from_end=False))  # [L, D]
    weights = cx.cast(member, dtype)
    if a["per_sample_weights"] is not None:
        weights = cx.emit("mul", [weights, _unsqueeze(cx, cx.value(a["per_sample_weights"]), 0)])
    if mode == 2:
        lowest = cx.scalar(-np.inf, dtype, f"{node.name}_lowest")
        best = cx.emit("reduce_max", [cx.emit("where", [_unsqueeze(cx, member, 2), _unsqueeze(cx, rows, 0), lowest])],
                       cx.attrs("reduce_max", axes=(1,), keepdims=False))
        any_row = cx.emit("reduce_max", [cx.cast(member, DType.i64)], cx.attrs("reduce_max", axes=(1,), keepdims=True))
        found = cx.emit("gt", [any_row, cx.scalar(0, DType.i64, f"{node.name}_none")])
        out = cx.emit("where", [found, best, cx.scalar(0, dtype, f"{node.name}_empty")])   # an empty bag is 0
    else:
        out = cx.emit("matmul", [weights, rows])
        if mode == 1:
            count = cx.emit("reduce_sum", [cx.cast(member, dtype)], cx.attrs("reduce_sum", axes=(1,), keepdims=True))
            out = cx.emit("div", [out, cx.emit("max", [count, cx.scalar(1, dtype, f"{node.name}_least")])])
    if not any(wanted(node, i) for i in (1, 2, 3)):
        return (out, None, None, None)
    # The other outputs as torch gives them: offset2bag (each index's bag; empty for sum),
    # bag_size (indices counted per bag; zeros for sum) and max_indices (max: the index whose row
    # holds each bag's maximum, the first on a tie, 0 for an empty bag; mean: bag_size again).
    if mode == 0:
        zeros = cx.add_constant(f"{node.name}_zeros", np.zeros(0, np.int64))
        sizes = cx.one("expand", cx.const(np.array(0, np.int64)), shape=(bags,))
        return (out, zeros, sizes, sizes)
    sizes = cx.one("reduce_sum", cx.cast(member, DType.i64), axes=(1,), keepdims=False)
    if mode == 1:
        return (out, bag, sizes, sizes)
    chosen = cx.one("and", _unsqueeze(cx, member, 2), cx.one("eq", _unsqueeze(cx, rows, 0), _unsqueeze(cx, best, 1)))
    first = cx.one("reduce_min", cx.one("where", chosen, _unsqueeze(cx, _unsqueeze(cx, pos, 0), 2), cx.const(
        np.array(length, np.int64))), axes=(1,), keepdims=False)                           # [bags, D]
    last = cx.const(np.array(length - 1, np.int64))
    picked = cx.one("gather", cx.cast(ids, DType.i64), cx.one("min", first, last), axis=0)
    found_any = cx.one("lt", first, cx.const(np.array(length, np.int64)))
    return (out, bag, sizes, cx.one("where", found_any, picked, cx.const(np.array(0, np.int64))))
