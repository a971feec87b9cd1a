"""Compute rules of layout ops: each output element is one input element at a
remapped index (or, for concat and pad, a choice between inputs)."""
from __future__ import annotations

from minic.errors import UnsupportedError
from minic.ir.loops import BinOp, Cast, Expr, Select, const, dim_expr
from minic.ir.ops.shapes import norm_axis
from minic.ir.types import DType, Dim, canon, dim_div, dim_mul
from minic.lowering.compute import broadcast_index, clamp, in_range
from minic.lowering.rules import Site, rule


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
    out: list[Expr] = []
    for k in range(len(shape) - 1, -1, -1):
        if k == 0:
            out.append(flat)
        else:
            out.append(BinOp("mod", flat, dim_expr(shape[k])))
            flat = BinOp("div", flat, dim_expr(shape[k]))
    return out[::-1]


def reshape_index(index: tuple[Expr, ...], out_shape: tuple[Dim, ...], in_shape: tuple[Dim, ...]) -> tuple[Expr, ...]:
    """The input index of a row-major reshape from ``in_shape`` to ``out_shape``."""
    groups = _groups(out_shape, in_shape)
    if groups is None:
        groups = [(list(range(len(out_shape))), list(range(len(in_shape))))]
    result: list[Expr] = []
    for go, gi in groups:
        if [out_shape[k] for k in go] == [in_shape[k] for k in gi]:
            result += [index[k] for k in go]       # the same axes: no arithmetic
        else:
            flat = linearize([index[k] for k in go], [out_shape[k] for k in go])
            result += delinearize(flat, [in_shape[k] for k in gi])
    return tuple(result)


@rule("reshape", "flatten", "squeeze", "unsqueeze", "reshape_dynamic")
def reshape(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]          # reshape_dynamic's shape tensor agrees with its declared type
    return x.at(reshape_index(index, site.out.shape, x.type.shape))


@rule("expand")
def expand(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    return x.at(broadcast_index(index, x.type.shape))


@rule("transpose")
def transpose(site: Site, index: tuple[Expr, ...]) -> Expr:
    perm = site.attrs.perm
    inverse = [0] * len(perm)
    for k, p in enumerate(perm):
        inverse[p] = k
    return site.inputs[0].at(tuple(index[inverse[a]] for a in range(len(perm))))


def _offset(sizes: list[Dim]) -> Expr:
    total: Expr = const(0)
    for d in sizes:
        total = BinOp("add", total, dim_expr(d))
    return total


@rule("concat")
def concat(site: Site, index: tuple[Expr, ...]) -> Expr:
    axis = norm_axis(site.attrs.axis, site.out.rank)
    pieces = [x for x in site.inputs if x.type.shape[axis] != 0]
    # Build select(i < end0, x0, select(i < end1, x1, ... x_last)) from the back.
    sizes = [x.type.shape[axis] for x in pieces]
    result: Expr | None = None
    for k in range(len(pieces) - 1, -1, -1):
        start = _offset(sizes[:k])
        local = BinOp("sub", index[axis], start)
        element = pieces[k].at(index[:axis] + (clamp(local, sizes[k]),) + index[axis + 1:])
        if result is None:
            result = element
        else:
            result = Select(BinOp("lt", index[axis], _offset(sizes[:k + 1])), element, result)
    return result


@rule("split")
def split(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    start = sum(site.attrs.sizes[:site.output])
    return x.at(index[:axis] + (BinOp("add", index[axis], const(start)),) + index[axis + 1:])


@rule("slice")
def slice_(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    result = list(index)
    for axis, start, end, step in zip(site.attrs.axes, site.attrs.starts, site.attrs.ends, site.attrs.steps):
        a = norm_axis(axis, x.type.rank)
        d = x.type.shape[a]
        if isinstance(d, int) and isinstance(start, int) and isinstance(end, int):
            first = range(*slice(start, end, step).indices(d)).start
        elif isinstance(start, int) and start >= 0 and step > 0:
            first = start           # x[s:] or x[:T] on a symbolic axis (what shape inference accepts)
        else:
            raise UnsupportedError(f"slice [{start}:{end}:{step}] of axis {a} ({d}) is not supported by the minic backend")
        result[a] = BinOp("add", const(first), BinOp("mul", index[a], const(step)))
    return x.at(tuple(result))


@rule("gather")
def gather(site: Site, index: tuple[Expr, ...]) -> Expr:
    data, idx = site.inputs
    axis = norm_axis(site.attrs.axis, data.type.rank)
    k = idx.type.rank
    i = idx.at(index[axis:axis + k])
    if i.dtype != DType.i64:
        i = Cast(DType.i64, i)
    n = data.type.shape[axis]
    # Negative indices count from the end; anything still outside is clamped so
    # that a bad token id can never read outside the table.
    i = Select(BinOp("lt", i, const(0)), BinOp("add", i, dim_expr(n)), i)
    return data.at(index[:axis] + (clamp(i, n),) + index[axis + k:])


@rule("pad")
def pad(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    rank = x.type.rank
    before = site.attrs.pads[:rank]
    mode = site.attrs.mode
    inside: Expr | None = None
    source: list[Expr] = []
    for a in range(rank):
        n = x.type.shape[a]
        i = BinOp("sub", index[a], const(before[a])) if before[a] else index[a]
        if mode == "reflect":       # ... 2 1 | 0 1 2 ... n-1 | n-2 n-3 ...
            i = BinOp("max", i, BinOp("sub", const(0), i))
            last = BinOp("sub", dim_expr(n), const(1))
            i = BinOp("min", i, BinOp("sub", BinOp("mul", const(2), last), i))
        if mode == "constant" and (before[a] or site.attrs.pads[a + rank]):
            ok = in_range(i, const(0), dim_expr(n))
            inside = ok if inside is None else BinOp("and", inside, ok)
        source.append(clamp(i, n))
    element = x.at(tuple(source))
    if inside is None:
        return element
    return Select(inside, element, const(site.attrs.value, x.type.dtype))



@rule("shape")
def shape(site: Site, index: tuple[Expr, ...]) -> Expr:
    dims = site.inputs[0].type.shape
    result: Expr = dim_expr(dims[-1]) if dims else const(0)
    for k in range(len(dims) - 2, -1, -1):
        result = Select(BinOp("eq", index[0], const(k)), dim_expr(dims[k]), result)
    return result
