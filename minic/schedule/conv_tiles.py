"""The int8 convolution on Intel AMX's tiles: an implicit GEMM, one tile dot per tap.

``conv2d_integer`` (groups = 1, its padding made explicit: minic/passes/padding.py) lowers as

    for n: for o < O: for oy < OH: for ox < OW:
      acc = 0
      for p < kh: for q < kw: for c < C:
        acc += (i32)x[n, c, oy * sh + p * dh, ox * sw + q * dw] * (i32)w[o, c, p, q]
      y[n, o, oy, ox] = epilogue(acc)

For one tap (p, q) and one output row oy, that is a matmul: rows are the output columns ox,
columns the output channels o, and k the input channels c.  ``tdpbusd`` (minic/schedule/tiles.py)
wants the rows of A 64 bytes of k each, one fixed stride apart; in NCHW the channels of a pixel
are a plane apart.  So the kernel first copies the image it convolves, once, channels last:

    xt[h, w / sw, (w % sw) * C + c] = x[n, c, h, w]          u8 [Hp, ceil(Wp / sw), sw * C]

(a row of sw pixels side by side, so that the pixels ox * sw + q of one output row are one
row of xt apart, sw * C bytes: the tile's row stride; for stride 1 it is plain NHWC).  A tile
of A for tap (p, q) and 64 channels from k0 is then ``xt[oy * sh + p * dh, ox0 + q * dw / sw,
(q * dw % sw) * C + k0]``, 16 output columns.  The weights' panel holds every tap's [C, NC]
block in the tiles' B layout, prepacked at compile time, as the matmul's:

    for n:
      u8 xt[..] = x[n] channels last                            (per image, before the rows)
      parallel for nb < ceil(O / NC):                           column blocks of output channels
        i8 w_tiles[kh, kw, KC, 16, 4 NC] = panel(w)             (prepacked)
        for oy < OH: for mb < ceil(OW / MR):                    blocks of output columns
          tile_zero(c_tiles[..])
          for p < kh: for q < kw: for kk < KC:
            tile_dot(c_tiles[i tn + j], xt[oy sh + p dh, ox0 + 16 i + q dw / sw, ..], w_tiles[p, q, kk, 0, 64 j])
          tile_store(c_sums[16 i, 16 j], c_tiles[i tn + j])
          for li < NC: vectorized for ri < MR:                  along the output's row (NCHW)
            y[n, o0 + li, oy, ox0 + ri] = epilogue(c_sums[ri, li])

Why a copy per conv rather than NHWC between kernels: the layout stays the graph's (NCHW, as
the VNNI template and every other kernel read it), and the target decides only the schedule;
the copy moves C·H·W bytes where the tiles do C·H·W·O·kh·kw/... multiply-adds.  Why one output
row a block (rows of 7, 14, 16 pixels) rather than rows running across the image: the tile's
stride must be one number, and an output row is where it is; the epilogue then stores whole
rows of the NCHW output.  Ragged output columns, channels and input channels overlap as in the
matmul (``tiles.py``); C must be a multiple of 4 (explicit-padding pads an image's 3 to 4).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from minic.ir.loops import (Allocate, BinOp, Buffer, Const, Expr, For, ForKind, Function, Load, Role, Stmt, Store, Var,
                            const, free_vars, seq, substitute)
from minic.ir.loops_analysis import stride
from minic.ir.loops_simplify import simplify
from minic.ir.types import DType
from minic.schedule.nest import fail, stmts_of, unique_loops
from minic.schedule.templates import PACK_LIMIT, _is_product_sum, _scalar_reduction, find_contraction
from minic.schedule.tiles import BLOCK, BYTES, ROWS, TileShape, _blocks, _byte, _start, block_of_sums, epilogue, pack_panel

COPY_LIMIT = 4 << 20           # bytes of the channels-last copy of one image (it lives on the stack)


@dataclass(frozen=True)
class ConvTilePlan:
    """How one int8 conv nest runs on tiles: its loops, operands, strides and tile sizes."""
    batch: For                 # n
    lane: For                  # o: output channels, the tiles' columns
    out_row: For               # oy
    row: For                   # ox: output columns, the tiles' rows
    taps: tuple[For, For]      # p, q: the kernel's rows and columns
    k: For                     # c: input channels
    x: Load                    # u8 x[n, c, oy sh + p dh, ox sw + q dw] (padded, NCHW)
    w: Expr                    # i8 w[o, c, p, q], as the nest reads it
    acc: Buffer
    store: Store               # y[n, o, oy, ox] = epilogue(acc)
    stride: tuple[int, int]    # sh, sw
    dilation: tuple[int, int]  # dh, dw
    shape: TileShape


def _affine(e: Expr, a: str, b: str) -> tuple[int, int] | None:
    """(s, d) for ``e = s * a + d * b`` (nothing else), else None."""
    s, d = stride(e, a), stride(e, b)
    if s is None or d is None or free_vars(e) - {a, b}:
        return None
    rest = simplify(substitute(e, {a: const(0), b: const(0)}))
    return (s, d) if rest == Const(0) and s > 0 and d > 0 else None


def plan_conv_tiles(f: Function, nest: Stmt) -> ConvTilePlan:
    """The ConvTilePlan of ``nest``, or a ScheduleError saying why the tiles cannot take it."""
    found = _scalar_reduction(nest)
    if found is None:
        raise fail(f, "no contraction nest")
    spatial, reduction, store = found
    update = reduction[-1].body
    if len(spatial) != 4 or len(reduction) != 3 or not _is_product_sum(update):
        raise fail(f, "conv tiles take a conv2d's four output axes and three reduction loops")
    n, o, oy, ox = spatial
    p, q, c = reduction
    terms = dict(_byte(t) for t in (update.value.b.a, update.value.b.b))
    x, w = terms.get(DType.u8), terms.get(DType.i8)
    if not isinstance(x, Load) or w is None or len(x.index) != 4:
        raise fail(f, "conv tiles multiply u8 NCHW activations by i8 weights")
    loops = (n, o, oy, ox, p, q, c)
    if not all(t.start == Const(0) and isinstance(t.extent, Const) for t in loops[1:]) or c.extent.value % 4:
        raise fail(f, "conv tiles need loops of constant size from 0 and input channels a multiple of 4")
    names = {t.var.name for t in loops[1:]}
    rows, cols = _affine(x.index[2], oy.var.name, p.var.name), _affine(x.index[3], ox.var.name, q.var.name)
    if (rows is None or cols is None or x.index[1] != c.var or free_vars(x.index[0]) & names
            or not all(isinstance(d, int) for d in x.buffer.shape[1:])
            or free_vars(w) - {o.var.name, c.var.name, p.var.name, q.var.name} or o.var.name not in free_vars(w)):
        raise fail(f, "conv tiles read x[n, c, oy s + p d, ox s + q d] (one group) and weights w[o, c, p, q]")
    if (store.index[-1] != ox.var or any(ox.var.name in free_vars(i) for i in store.index[:-1])
            or o.var.name in free_vars(store.index[-1])):
        raise fail(f, "the epilogue must store along the output's columns")
    (sh, dh), (sw, dw) = rows, cols
    C, O, OW = c.extent.value, o.extent.value, ox.extent.value
    depth = min(BYTES, C)
    cols_ = min(O, ROWS)
    tn = BLOCK if O >= BLOCK * ROWS else 1
    kh, kw = p.extent.value, q.extent.value
    if kh * kw * -(-C // depth) * depth * tn * cols_ > PACK_LIMIT:
        raise fail(f, "the weights' panel is too large for the stack")
    _, _, hp, wp = x.buffer.shape
    if hp * -(-wp // sw) * sw * C > COPY_LIMIT:
        raise fail(f, "the channels-last copy of the image is too large for the stack")
    shape = TileShape(min(OW, ROWS), cols_, BLOCK if OW >= BLOCK * ROWS else 1, tn, depth)
    return ConvTilePlan(n, o, oy, ox, (p, q), c, x, w, update.buffer, store, (sh, sw), (dh, dw), shape)


def channels_last(p: ConvTilePlan) -> tuple[Buffer, Stmt]:
    """The image's copy that the tiles read, and the nest that makes it (module docstring)."""
    _, C, hp, wp = p.x.buffer.shape
    sw = p.stride[1]
    xt = Buffer("x_rows", (hp, -(-wp // sw), sw * C), DType.u8, Role.LOCAL)
    h, w, c = Var("h_t"), Var("w_t"), Var("c_t")
    at = (BinOp("div", w, const(sw)), BinOp("add", BinOp("mul", BinOp("mod", w, const(sw)), const(C)), c))
    copy = Store(xt, (h,) + (at if sw > 1 else (w, c)), Load(p.x.buffer, (p.x.index[0], c, h, w)))
    for var, extent in ((c, C), (w, wp), (h, hp)):
        copy = For(var, const(0), const(extent), ForKind.SERIAL, copy)
    return xt, copy


def conv_tile_nest(p: ConvTilePlan, threads: int) -> Stmt:
    """The loop nest of the module docstring for plan ``p``."""
    t, (sh, sw), (dh, dw) = p.shape, p.stride, p.dilation
    C, O, OW = p.k.extent.value, p.lane.extent.value, p.row.extent.value
    nc, mr = t.tn * t.cols, t.tm * t.rows
    nb, mb, kk = Var(p.lane.var.name + "b"), Var(p.row.var.name + "b"), Var(p.k.var.name + "k")
    n0, m0 = _start(nb, nc, const(O), O % nc == 0), _start(mb, mr, const(OW), OW % mr == 0)
    k0 = _start(kk, t.depth, const(C), C % t.depth == 0)
    tp, tq = Var(p.taps[0].var.name + "t"), Var(p.taps[1].var.name + "t")
    names = (p.lane.var.name, p.k.var.name, p.taps[0].var.name, p.taps[1].var.name)
    panel, fill = pack_panel(C, t.depth, nc, lambda k, j: substitute(p.w, dict(zip(names, (
        BinOp("add", n0, j), k, tp, tq)))), taps=((tp, p.taps[0].extent.value), (tq, p.taps[1].extent.value)))
    xt, copy = channels_last(p)
    qd = BinOp("mul", p.taps[1].var, const(dw))                 # the tap's column offset in pixels
    y_at = BinOp("add", BinOp("mul", p.out_row.var, const(sh)), BinOp("mul", p.taps[0].var, const(dh)))
    x_at: Callable[[int], Load] = lambda i: Load(xt, (                                       # noqa: E731
        y_at, BinOp("add", BinOp("add", m0, const(i * t.rows)), BinOp("div", qd, const(sw))),
        BinOp("add", BinOp("mul", BinOp("mod", qd, const(sw)), const(C)), k0)))
    w_at: Callable[[int], Load] = lambda j: Load(panel, (p.taps[0].var, p.taps[1].var, kk, const(0),   # noqa: E731
                                                         const(64 * j)))

    def reduce(dots: Stmt) -> Stmt:
        for var, extent in ((kk, -(-C // t.depth)), (p.taps[1].var, p.taps[1].extent.value),
                            (p.taps[0].var, p.taps[0].extent.value)):
            dots = For(var, const(0), const(extent), ForKind.SERIAL, dots)
        return dots
    block = block_of_sums(t, x_at, w_at, reduce, lambda sums: epilogue(
        p.store, p.acc, sums, {p.row.var.name: (m0, mr), p.lane.var.name: (n0, nc)}, lanes=p.row.var.name))
    rows = For(p.out_row.var, const(0), p.out_row.extent, ForKind.SERIAL,
               For(mb, const(0), _blocks(const(OW), mr), ForKind.SERIAL, block))
    parallel = ForKind.PARALLEL if threads > 1 else ForKind.SERIAL
    blocks = For(nb, const(0), const(-(-O // nc)), parallel, Allocate(panel, seq(fill, rows)))
    if threads > 1:
        copy = replace(copy, kind=ForKind.PARALLEL)
    return replace(p.batch, body=Allocate(xt, seq(copy, blocks)))


def schedule_conv_tiles(f: Function, threads: int) -> Function:
    """``f``'s first contraction nest, an int8 conv, on AMX tiles (the module docstring), or a
    ScheduleError."""
    f = unique_loops(f)
    if find_contraction(f) is None:
        raise fail(f, "no contraction nest")
    body = list(stmts_of(f.body))
    at = next(i for i, s in enumerate(body) if _scalar_reduction(s) is not None
              and find_contraction(replace(f, body=s)) is not None)
    body[at] = conv_tile_nest(plan_conv_tiles(f, body[at]), threads)
    return replace(f, body=seq(*body))
