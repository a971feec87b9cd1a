"""Compute rules that reduce: reductions, normalisations (softmax, layer_norm)
and pooling windows.  Each is a Reduce expression; ``compute.emit`` decides
where its accumulator lives."""
from __future__ import annotations

from minic.ir.loops import BinOp, Call, Expr, Select, Var, const, dim_expr, substitute
from minic.ir.ops.shapes import norm_axes, norm_axis
from minic.lowering.compute import Operand, Reduce, clamp, count, fconst, in_range, lowest
from minic.lowering.rules import Site, rule


def _reduce_axes(site: Site, x: Operand, axes: tuple[int, ...], keep: bool,
                 index: tuple[Expr, ...]) -> tuple[tuple[tuple[Var, Expr], ...], tuple[Expr, ...]]:
    """Fresh reduction variables for ``axes`` of ``x`` and the input index built from
    them and the output ``index`` (which has the reduced axes as size 1 if ``keep``)."""
    loops, source, k = [], [], 0
    for a, d in enumerate(x.type.shape):
        if a in axes:
            v = site.fresh.var("r")
            loops.append((v, dim_expr(d)))
            source.append(v)
            k += keep
        else:
            source.append(index[k])
            k += 1
    return tuple(loops), tuple(source)


_OPS = {"reduce_sum": "sum", "reduce_mean": "sum", "reduce_max": "max", "reduce_min": "min"}


@rule(*_OPS)
def reduction(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axes = norm_axes(site.attrs.axes, x.type.rank)
    loops, source = _reduce_axes(site, x, axes, site.attrs.keepdims, index)
    total = Reduce(_OPS[site.op], loops, x.at(source))
    if site.op == "reduce_mean":
        return BinOp("div", total, count([x.type.shape[a] for a in axes], x.type.dtype))
    return total


@rule("global_avg_pool")
def global_avg_pool(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    axes = tuple(range(2, x.type.rank))
    loops, source = _reduce_axes(site, x, axes, True, index)
    return BinOp("div", Reduce("sum", loops, x.at(source)), count(x.type.shape[2:], x.type.dtype))


def _row(site: Site, x: Operand, axis: int, index: tuple[Expr, ...]):
    """A fresh variable running along ``axis`` and the input index it gives."""
    v = site.fresh.var("r")
    return ((v, dim_expr(x.type.shape[axis])),), index[:axis] + (v,) + index[axis + 1:]


def _softmax_parts(site: Site, index: tuple[Expr, ...]):
    x = site.inputs[0]
    axis = norm_axis(site.attrs.axis, x.type.rank)
    loops, row = _row(site, x, axis, index)
    peak = Reduce("max", loops, x.at(row))           # subtracting the max keeps exp finite
    loops, row = _row(site, x, axis, index)
    total = Reduce("sum", loops, Call("exp", (BinOp("sub", x.at(row), peak),)))
    return BinOp("sub", x.at(index), peak), total


@rule("softmax")
def softmax(site: Site, index: tuple[Expr, ...]) -> Expr:
    shifted, total = _softmax_parts(site, index)
    return BinOp("div", Call("exp", (shifted,)), total)


@rule("log_softmax")
def log_softmax(site: Site, index: tuple[Expr, ...]) -> Expr:
    shifted, total = _softmax_parts(site, index)
    return BinOp("sub", shifted, Call("log", (total,)))


@rule("layer_norm")
def layer_norm(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    dt = x.type.dtype
    first = norm_axis(site.attrs.axis, x.type.rank)
    axes = tuple(range(first, x.type.rank))
    n = count(x.type.shape[first:], dt)
    loops, source = _reduce_axes(site, x, axes, True, index)
    mean = BinOp("div", Reduce("sum", loops, x.at(source)), n)
    loops, source = _reduce_axes(site, x, axes, True, index)
    centred = BinOp("sub", x.at(source), mean)
    var = BinOp("div", Reduce("sum", loops, BinOp("mul", centred, centred)), n)
    y = BinOp("div", BinOp("sub", x.at(index), mean),
              Call("sqrt", (BinOp("add", var, fconst(site.attrs.eps, dt)),)))
    if len(site.inputs) > 1:
        y = BinOp("mul", y, site.inputs[1].at(index[first:]))
    if len(site.inputs) > 2:
        y = BinOp("add", y, site.inputs[2].at(index[first:]))
    return y


def _window(site: Site, index: tuple[Expr, ...]):
    """The reduction variables of a pooling window, the input rows/columns they
    reach, and whether each lies inside the input."""
    x = site.inputs[0]
    a = site.attrs
    p, q = site.fresh.var("p"), site.fresh.var("q")
    loops = ((p, const(a.kernel[0])), (q, const(a.kernel[1])))
    h = BinOp("sub", BinOp("add", BinOp("mul", index[2], const(a.stride[0])), BinOp("mul", p, const(a.dilation[0]))), const(a.padding[0]))
    w = BinOp("sub", BinOp("add", BinOp("mul", index[3], const(a.stride[1])), BinOp("mul", q, const(a.dilation[1]))), const(a.padding[1]))
    H, W = x.type.shape[2], x.type.shape[3]
    inside = BinOp("and", in_range(h, const(0), const(H)), in_range(w, const(0), const(W)))
    element = x.at((index[0], index[1], clamp(h, H), clamp(w, W)))
    return loops, h, w, inside, element


@rule("max_pool2d")
def max_pool2d(site: Site, index: tuple[Expr, ...]) -> Expr:
    loops, _, _, inside, element = _window(site, index)
    return Reduce("max", loops, Select(inside, element, lowest(element.dtype)))


@rule("avg_pool2d")
def avg_pool2d(site: Site, index: tuple[Expr, ...]) -> Expr:
    loops, h, w, inside, element = _window(site, index)
    dt = element.dtype
    total = Reduce("sum", loops, Select(inside, element, fconst(0.0, dt)))
    # The divisor counts the window's cells in the input, plus those in the
    # explicit padding when count_include_pad (never ceil_mode's overhang).
    a, x = site.attrs, site.inputs[0]
    if a.count_include_pad:
        H, W = x.type.shape[2] + a.padding[2], x.type.shape[3] + a.padding[3]
        counted = BinOp("and", in_range(h, const(-a.padding[0]), const(H)),
                        in_range(w, const(-a.padding[1]), const(W)))
    else:
        counted = inside
    loops2, _, _, _, _ = _window(site, index)
    rename = {v.name: v2 for (v, _), (v2, _) in zip(loops, loops2)}
    cells = Reduce("sum", loops2, Select(substitute(counted, rename), fconst(1.0, dt), fconst(0.0, dt)))
    return BinOp("div", total, cells)
