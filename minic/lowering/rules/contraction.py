"""Compute rules of contractions: matmul, gemm, conv2d.  Each output element is a
sum over the contracted axes, so a fused epilogue (bias, activation, residual)
applies to the accumulator before the single store."""
from __future__ import annotations

from minic.ir.loops import BinOp, Expr, Select, const, dim_expr
from minic.lowering.compute import Reduce, broadcast_index, clamp, fconst, in_range
from minic.lowering.rules import Site, rule


@rule("matmul")
def matmul(site: Site, index: tuple[Expr, ...]) -> Expr:
    a, b = site.inputs
    ra, rb = a.type.rank, b.type.rank
    # Work in the rank >= 2 view of both operands: a 1-D a is [1, K], a 1-D b is [K, 1].
    full = list(index)
    if ra == 1:
        full.insert(len(full) - (rb > 1), const(0))
    if rb == 1:
        full.append(const(0))
    batch, i, j = full[:-2], full[-2], full[-1]
    k = site.fresh.var("k")
    K = a.type.shape[-1]
    a_index = (k,) if ra == 1 else broadcast_index(batch, a.type.shape[:-2]) + (i, k)
    b_index = (k,) if rb == 1 else broadcast_index(batch, b.type.shape[:-2]) + (k, j)
    return Reduce("sum", ((k, dim_expr(K)),), BinOp("mul", a.at(a_index), b.at(b_index)))


@rule("gemm")
def gemm(site: Site, index: tuple[Expr, ...]) -> Expr:
    attrs = site.attrs
    a, b = site.inputs[:2]
    i, j = index
    k = site.fresh.var("k")
    K = a.type.shape[0] if attrs.trans_a else a.type.shape[1]
    product = BinOp("mul", a.at((k, i) if attrs.trans_a else (i, k)), b.at((j, k) if attrs.trans_b else (k, j)))
    dt = a.type.dtype
    y: Expr = Reduce("sum", ((k, dim_expr(K)),), product)
    if attrs.alpha != 1.0:
        y = BinOp("mul", fconst(attrs.alpha, dt), y)
    if len(site.inputs) == 3:
        c = site.inputs[2]
        term = c.at(broadcast_index(index, c.type.shape))
        y = BinOp("add", y, term if attrs.beta == 1.0 else BinOp("mul", fconst(attrs.beta, dt), term))
    return y


@rule("conv2d")
def conv2d(site: Site, index: tuple[Expr, ...]) -> Expr:
    x, w = site.inputs[:2]
    attrs = site.attrs
    n, o, oy, ox = index
    out_channels, cg, kh, kw = w.type.shape
    per_group = out_channels // attrs.groups
    c, p, q = site.fresh.var("c"), site.fresh.var("p"), site.fresh.var("q")
    channel = c if attrs.groups == 1 else BinOp("add", BinOp("mul", BinOp("div", o, const(per_group)), const(cg)), c)
    h = BinOp("sub", BinOp("add", BinOp("mul", oy, const(attrs.stride[0])), BinOp("mul", p, const(attrs.dilation[0]))), const(attrs.padding[0]))
    v = BinOp("sub", BinOp("add", BinOp("mul", ox, const(attrs.stride[1])), BinOp("mul", q, const(attrs.dilation[1]))), const(attrs.padding[1]))
    H, W = x.type.shape[2], x.type.shape[3]
    dt = x.type.dtype
    pixel = x.at((n, channel, clamp(h, H), clamp(v, W)))
    if any(attrs.padding):     # taps in the zero padding contribute nothing
        inside = BinOp("and", in_range(h, const(0), const(H)), in_range(v, const(0), const(W)))
        pixel = Select(inside, pixel, fconst(0.0, dt))
    loops = ((c, const(cg)), (p, const(kh)), (q, const(kw)))
    y: Expr = Reduce("sum", loops, BinOp("mul", pixel, w.at((o, c, p, q))))
    if len(site.inputs) == 3:
        y = BinOp("add", y, site.inputs[2].at((o,)))
    return y
