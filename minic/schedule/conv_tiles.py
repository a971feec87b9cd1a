"""The int8 convolution on Intel AMX's tiles: an implicit GEMM, one tile dot per tap.

``conv2d_integer`` (groups = 1, its padding made explicit: minic/passes/padding.py) lowers as

    for n: for o < O: for oy < OH: for ox < OW:
      acc = 0
      for p < kh: for q < kw: for c < C:
        acc += (i32)x[n, c, oy * sh + p * dh, ox * sw + q * dw] * (i32)w[o, c, p, q]
      y[n, o, oy, ox] = epilogue(acc)

For one tap (p, q) and one output row oy, that is a matmul of the weights W [O, C] by the
pixels X [C, OW]: ``sums[o, ox] += W[o, c] · X[c, ox]``.  The tiles compute it as it stands,
with ``tdpbsud`` (tdpbusd's twin: signed bytes in A, unsigned in B): A is the weights, 16
output channels of 64 input channels each, B the pixels, and the sums come out as the NCHW
output lies, a tile row along an output row.  B must hold four consecutive k (channels) of
one column (pixel) side by side, 64 bytes a row; in NCHW the channels of a pixel are a plane
apart.  So the kernel first copies the image it convolves, once, four channels interleaved:

    x4[h, w % sw, c / 4, 4 * (w / sw) + c % 4] = x[n, c, h, w]     u8 [Hp, sw, C / 4, 4 ceil(Wp / sw)]

(with stride sw, the pixels of one phase w % sw together, so that the pixels ox * sw + q of
an output row lie side by side).  A tile of B for tap (p, q) and 64 channels from k0 is then
16 rows (channel quads) of 16 pixels: ``x4[oy sh + p dh, q dw % sw, k0 / 4, 4 (ox0 + q dw / sw)]``,
one row of x4 apart.  The weights' blocks, every tap's [16 o, 64 c], are packed at compile
time (``w_rows``):

    for n:
      u8 x4[..] = x[n], four channels interleaved               (per image, before the rows)
      parallel for ob < ceil(O / MR):                            blocks of MR = 32 output channels
        i8 w_rows[KC, kh, kw, MR, 64] = w[o0 + r, k0 + b, p, q]  (prepacked)
        for oy < OH: for xb < ceil(OW / NC):                     blocks of NC = 32 output columns
          tile_zero(c_tiles[..])
          for kk < KC: for p < kh: for q < kw:                   (the taps' overlapping B tiles from L1)
            tile_dot(c_tiles[i tn + j], w_rows[kk, p, q, 16 i, 0], x4[oy sh + p dh, .., 4 (ox0 + 16 j + ..)])
          tile_store(c_sums[16 i, 16 j], c_tiles[i tn + j])
          for oi < MR: vectorized for xi < NC:
            y[n, o0 + oi, oy, ox0 + xi] = epilogue(c_sums[oi, xi])

Why a copy per conv rather than another layout between kernels: the graph keeps NCHW, which
every other kernel reads, and only the schedule, which knows the target, changes (the VNNI
template copies too: ``templates.channel_quads``); the copy moves C·Hp·Wp bytes once for
kh·kw·O multiply-adds per byte.  Why one output
row a block (7, 14 or 16 pixels a tile): a tile's rows must be one stride apart, and within
one output row they are.  Ragged output columns, channels and input channels overlap as in the
matmul (``tiles.py``): the last block starts one block before the end, and the last chunk of
input channels at C - 64 with its weights zeroed where the chunk before added them.  C must be
a multiple of 4 (explicit-padding pads an image's 3 to 4); grouped convs stay on VNNI.  Where a
whole kernel row's channels fit one dot (kw · C <= 64: the stem's 7 x 4), the copy puts them
side by side and one dot takes the row (``folded``).  Where an output row is narrower than a
tile (a 7 x 7 image: 7 of 16 columns), a block takes R rows at once, their pixels flattened into
one row of the copy, the padded width apart (``flattened``, ``_flat_nest``): 16 output channels
by up to 4 tiles of 16 columns, one A tile for 4 dots.

A bf16 conv (amx-bf16) takes the same nests with ``tdpbf16ps``: a pixel's 32 bits hold two
channels (``group``: the copy interleaves pairs, not quads), a dot takes 32 k (``per``), and the
tiles and c_sums are f32.  Where the image reaches the conv still in f32 (no pad kernel stored it
in bf16 before), the copy casts it as it interleaves (``ConvTilePlan.image``); an image's 3 channels
fold with a zero fourth (``channels``: explicit-padding adds it for int8 only, in the graph).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from minic.ir.loops import (TILE_DOTS, Allocate, BinOp, Buffer, Cast, Const, Expr, For, ForKind, Function, Load,
                            Role, Select, Stmt, Store, Var, const, free_vars, map_expr, seq, substitute)
from minic.ir.loops_analysis import stride
from minic.ir.loops_simplify import simplify
from minic.ir.types import DType
from minic.schedule.nest import fail
from minic.schedule.templates import COPY_LIMIT, PACK_LIMIT, _is_product_sum, _scalar_reduction
from minic.schedule.tiles import (AHEAD, BLOCK, BYTES, INT8, ROWS, TileShape, _blocks, _narrow, _start,
                                  block_of_sums, epilogue, first_contraction, stored)

MAX_FLAT = 4                   # column tiles of a flattened block: 4 C, 1 A, 1 B in the 8 registers


@dataclass(frozen=True)
class ConvTilePlan:
    """How one int8 conv nest runs on tiles: its loops, operands, strides and tile sizes."""
    batch: For                 # n
    lane: For                  # o: output channels, the tiles' rows
    out_row: For               # oy
    row: For                   # ox: output columns, the tiles' columns
    taps: tuple[For, For]      # p, q: the kernel's rows and columns
    k: For                     # c: input channels
    x: Load                    # u8 x[n, c, oy sh + p dh, ox sw + q dw] (padded, NCHW)
    w: Expr                    # i8 w[o, c, p, q], as the nest reads it
    acc: Buffer
    store: Store               # y[n, o, oy, ox] = epilogue(acc)
    stride: tuple[int, int]    # sh, sw
    dilation: tuple[int, int]  # dh, dw
    shape: TileShape           # rows: output channels, cols: output columns
    fold: bool                 # the kernel's columns folded into k (few input channels: ``folded``)
    flat: int = 0              # R > 0: R output rows a block, their pixels in a row (``flattened``)
    pairs: int = 1             # folded: kernel rows a dot takes (2 where two rows' k fit 64 bytes)
    value: Expr | None = None  # what the nest multiplies where that is not x itself: x cast to bf16

    def image(self, n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
        """The activation the dots take at x[n, c, h, w] (the copy's value): x there, or its cast."""
        at = Load(self.x.buffer, (n, c, h, w))
        return at if self.value is None else map_expr(self.value, lambda e: at if e == self.x else None)

    @property
    def dtype(self) -> DType:
        """The activations' type as the dots take them (u8, bf16)."""
        return (self.value or self.x).dtype

    @property
    def group(self) -> int:
        """k side by side in a pixel's 32 bits (B's layout): 4 bytes, 2 bf16."""
        return _group(self.dtype)

    @property
    def channels(self) -> int:
        """Input channels as the copy and the panel hold them: whole groups, the ones past the
        image's zero (folded only: an image's 3 channels, bf16 pairs)."""
        return _whole_groups(self.k.extent.value, self.group)

    @property
    def per(self) -> int:
        """k a dot takes: the depth's bytes in elements."""
        return self.shape.depth // self.dtype.numpy.itemsize


def _group(dtype: DType) -> int:
    """k side by side in a pixel's 32 bits: 4 bytes, 2 bf16."""
    return 4 // dtype.numpy.itemsize


def _whole_groups(k: int, group: int) -> int:
    """``k`` channels rounded up to whole groups."""
    return -(-k // group) * group


def _affine(e: Expr, a: str, b: str) -> tuple[int, int] | None:
    """(s, d) for ``e = s * a + d * b`` (nothing else), else None."""
    s, d = stride(e, a), stride(e, b)
    if s is None or d is None or free_vars(e) - {a, b}:
        return None
    rest = simplify(substitute(e, {a: const(0), b: const(0)}))
    return (s, d) if rest == Const(0) and s > 0 and d > 0 else None


def plan_conv_tiles(f: Function, nest: Stmt, pairs: tuple[tuple[DType, DType], ...] = (INT8,)) -> ConvTilePlan:
    """The ConvTilePlan of ``nest``, or a ScheduleError saying why the tiles cannot take it; ``pairs``:
    the operand types (activations, weights) the target's tiles multiply."""
    found = _scalar_reduction(nest)
    if found is None:
        raise fail(f, "no contraction nest")
    spatial, reduction, store = found
    update = reduction[-1].body
    if len(spatial) != 4 or len(reduction) != 3 or not _is_product_sum(update):
        raise fail(f, "conv tiles take a conv2d's four output axes and three reduction loops")
    n, o, oy, ox = spatial
    terms = [_narrow(t) for t in (update.value.b.a, update.value.b.b)]

    def read(e: Expr) -> Load | None:        # x itself, or x under casts (an f32 image to bf16)
        while isinstance(e, Cast):
            e = e.value
        return e if isinstance(e, Load) and len(e.index) == 4 and oy.var.name in free_vars(e.index[2]) else None
    (xt, value), (wt, w) = sorted(terms, key=lambda t: read(t[1]) is None)   # x: the one read along the rows
    x = read(value)
    if (xt, wt) not in pairs or x is None:
        kinds = " or ".join(f"{a.value} NCHW activations by {b.value} weights" for a, b in pairs)
        raise fail(f, f"conv tiles multiply {kinds}")
    by_var = {t.var.name: t for t in reduction}         # the reduction's loops by what x reads them as
    p, q, c = (next((by_var[v] for v in free_vars(e) if v in by_var), None)
               for e in (x.index[2], x.index[3], x.index[1]))
    if None in (p, q, c) or {id(p), id(q), id(c)} != {id(t) for t in reduction}:
        raise fail(f, "conv tiles read x[n, c, oy s + p d, ox s + q d] (one group) and weights w[o, c, p, q]")
    loops = (n, o, oy, ox, p, q, c)
    group, size = _group(xt), xt.numpy.itemsize
    if not all(t.start == Const(0) and isinstance(t.extent, Const) for t in loops[1:]):
        raise fail(f, "conv tiles need loops of constant size from 0")
    names = {t.var.name for t in loops[1:]}
    rows, cols = _affine(x.index[2], oy.var.name, p.var.name), _affine(x.index[3], ox.var.name, q.var.name)
    if (rows is None or cols is None or x.index[1] != c.var or free_vars(x.index[0]) & names
            or not all(isinstance(d, int) for d in x.buffer.shape[1:])
            or free_vars(w) - {o.var.name, c.var.name, p.var.name, q.var.name} or o.var.name not in free_vars(w)):
        raise fail(f, "conv tiles read x[n, c, oy s + p d, ox s + q d] (one group) and weights w[o, c, p, q]")
    if (stride(store.index[-1], ox.var.name) != 1 or any(ox.var.name in free_vars(i) for i in store.index[:-1])
            or o.var.name in free_vars(store.index[-1])):          # y[.., ox] or y[.., ox + 1] (a pad's interior)
        raise fail(f, "the epilogue must store along the output's columns")
    (sh, dh), (sw, dw) = rows, cols
    C, O, OW = _whole_groups(c.extent.value, group), o.extent.value, ox.extent.value
    kh, kw = p.extent.value, q.extent.value
    fold = 1 < kw and kw * C * size <= BYTES
    if c.extent.value % group and not fold:
        raise fail(f, f"conv tiles need input channels a multiple of {group} (or few enough to fold)")
    rows_a_dot = 2 if fold and kh > 1 and dh == 1 and 2 * kw * C * size <= BYTES else 1   # rows h, h + 1: one B tile
    K = rows_a_dot * kw * C if fold else C         # k of one tap (of a kernel row or two, folded)
    depth = min(BYTES, K * size)
    sums = TILE_DOTS[wt, xt][0]
    shape = TileShape(min(O, ROWS), min(OW, ROWS), BLOCK if O >= BLOCK * ROWS else 1,
                      BLOCK if OW >= BLOCK * ROWS else 1, depth, sums)
    _, _, hp, wp = x.buffer.shape
    wq = -(-wp // sw)                              # pixels of one phase of a row
    flat = 0 if fold else _rows_a_block(OW, oy.extent.value, wq)
    if flat:                                       # R rows a block: 16 channels by up to 4 column tiles
        shape = TileShape(min(O, ROWS), ROWS, 1, -(-((flat - 1) * wq + OW) // ROWS), depth, sums)
    if kh * kw * -(-C * size // depth) * depth * shape.tm * shape.rows * rows_a_dot > PACK_LIMIT:
        raise fail(f, "the weights' panel is too large for the stack")
    copied = (sh * sw * _flat_length(x.buffer.shape, (sh, sw), (dh, dw), (kh, kw), oy.extent.value, flat, shape.tn)
              if flat else hp * max(wq * sw, kw * OW if fold else 0))
    if copied * C * size > COPY_LIMIT:
        raise fail(f, "the interleaved copy of the image is too large for the stack")
    return ConvTilePlan(n, o, oy, ox, (p, q), c, x, w, update.buffer, store, (sh, sw), (dh, dw), shape, fold, flat,
                        rows_a_dot, None if value == x else value)


def _rows_a_block(OW: int, OH: int, wq: int) -> int:
    """R, the output rows a block takes flattened (``flattened``), or 0 for one row a block: for
    outputs narrower than a tile (a 7 x 7 image's 7 of 16 columns), the R rows whose pixels in a
    row (``wq`` a row: the padded width, the garbage columns between rows computed but not
    stored) fill at most MAX_FLAT tiles with the fewest tiles over the image, if fewer than one
    a row."""
    if OW >= ROWS:
        return 0
    cost = {r: -(-OH // r) * -(-((r - 1) * wq + OW) // ROWS) for r in range(1, OH + 1)
            if (r - 1) * wq + OW <= MAX_FLAT * ROWS}
    best = min(cost, key=lambda r: (cost[r], -r))
    return best if cost[best] < OH else 0


def _flat_length(shape: tuple, stride: tuple[int, int], dilation: tuple[int, int], kernel: tuple[int, int],
                 OH: int, R: int, tn: int) -> int:
    """Pixels of one phase's flattened image (``flattened``), with the room the last block's tiles
    read past it."""
    (sh, sw), (dh, dw), (kh, kw) = stride, dilation, kernel
    hq, wq = -(-shape[2] // sh), -(-shape[3] // sw)
    length = max(hq * wq, (OH - R + (kh - 1) * dh // sh) * wq + (kw - 1) * dw // sw + tn * ROWS)
    return -(-length // ROWS) * ROWS          # a whole number of 64-byte lines a row of channel quads


def interleaved(p: ConvTilePlan) -> tuple[Buffer, Stmt]:
    """The image's copy that the tiles read as B, and the nest that makes it (module docstring):
    per phase of the stride, a loop over its pixels that stores four channels a pixel, which
    LLVM's loop vectorizer turns into vector loads of four channel rows and interleaving
    shuffles."""
    _, C, hp, wp = p.x.buffer.shape
    sw, g = p.stride[1], p.group
    wq = -(-wp // sw)
    x4 = Buffer("x_quads", (hp, sw, C // g, g * wq), p.dtype, Role.LOCAL)
    h, cq, w, i = Var("h_q"), Var("c_q"), Var("w_q"), Var("i_q")
    phases = []
    for phase in range(sw):
        pixel = BinOp("add", BinOp("mul", w, const(sw)), const(phase)) if sw > 1 else w
        copy = Store(x4, (h, const(phase), cq, BinOp("add", BinOp("mul", w, const(g)), i)),
                     p.image(p.x.index[0], BinOp("add", BinOp("mul", cq, const(g)), i), h, pixel))
        copy = For(w, const(0), const(-(-(wp - phase) // sw)), ForKind.SERIAL,
                   For(i, const(0), const(g), ForKind.UNROLLED, copy))
        phases.append(copy)
    copy = seq(*phases)
    for var, extent in ((cq, C // g), (h, hp)):
        copy = For(var, const(0), const(extent), ForKind.SERIAL, copy)
    return x4, copy


def folded(p: ConvTilePlan) -> tuple[Buffer, Stmt]:
    """``interleaved`` for a conv of few input channels (an image's 4 in a 7x7 window): one tap's
    64 bytes of k would be mostly empty, so each pixel of an output column gets the channels of
    every column of the window, ``kw · C`` k a kernel row, and a tile dot takes a whole kernel
    row at once (7 dots a tile instead of 49):

        xf[h kw C / 4 + (q C + c) / 4, 4 ox + c % 4] = x[n, c, h, ox sw + q dw]     u8 [Hp kw C / 4, 4 OW]

    Rows h and h + 1 then lie one after the other, so a B tile of 2 kw C / 4 rows holds two kernel
    rows' k (``pairs``: the stem's 2 x 28 bytes, 4 dots a tile); an odd kh's last pair reads one row
    past the image, whose weights are zero (the copy has that row, zero too: garbage bf16 there
    could be a NaN, and NaN times 0 is NaN)."""
    (_, real, hp, _), C = p.x.buffer.shape, p.channels
    (sw, dw), kw, OW, g = (p.stride[1], p.dilation[1]), p.taps[1].extent.value, p.row.extent.value, p.group
    quads = kw * C // g                          # rows of xf an image row: [Hp, kw C / g] as one axis
    xf = Buffer("x_quads", ((hp + p.pairs - 1) * quads, g * OW), p.dtype, Role.LOCAL)
    h, q, cq, w, i = Var("h_q"), Var("q_q"), Var("c_q"), Var("w_q"), Var("i_q")
    pixel = BinOp("add", BinOp("mul", w, const(sw)), BinOp("mul", q, const(dw)))
    at = BinOp("add", BinOp("mul", h, const(quads)), BinOp("add", BinOp("mul", q, const(C // g)), cq))
    channel = BinOp("add", BinOp("mul", cq, const(g)), i)
    value = p.image(p.x.index[0], BinOp("min", channel, const(real - 1)), BinOp("min", h, const(hp - 1)), pixel)
    if C > real:                                 # the group's channels past the image's: zero
        value = Select(BinOp("lt", channel, const(real)), value, Const(0, value.dtype))
    if p.pairs > 1:                              # the row past the image an odd kh's last pair reads:
        value = Select(BinOp("lt", h, const(hp)), value, Const(0, value.dtype))    # zero (NaN * 0 is NaN)
    copy = Store(xf, (at, BinOp("add", BinOp("mul", w, const(g)), i)), value)
    copy = For(w, const(0), const(OW), ForKind.SERIAL, For(i, const(0), const(g), ForKind.UNROLLED, copy))
    for var, extent in ((cq, C // g), (q, kw), (h, xf.shape[0] // quads)):
        copy = For(var, const(0), const(extent), ForKind.SERIAL, copy)
    return xf, copy


def flattened(p: ConvTilePlan) -> tuple[Buffer, Stmt]:
    """``interleaved`` for a block of R output rows (``p.flat``): the image split by the stride's
    phases in both axes, each phase's pixels in a row, so that the pixels a tap reads for R
    consecutive output rows lie side by side, ``wq`` a row (a tile's 16 columns run on across
    rows; a column past an output row's end is computed and not stored):

        x4[h % sh, w % sw, c / 4, 4 ((h / sh) wq + w / sw) + c % 4] = x[n, c, h, w]     wq = ceil(Wp / sw)

    Only the phases the taps read are copied."""
    _, C, hp, wp = p.x.buffer.shape
    (sh, sw), (dh, dw) = p.stride, p.dilation
    kh, kw = (tap.extent.value for tap in p.taps)
    wq = -(-wp // sw)
    length = _flat_length(p.x.buffer.shape, p.stride, p.dilation, (kh, kw), p.out_row.extent.value, p.flat, p.shape.tn)
    g = p.group
    x4 = Buffer("x_quads", (sh, sw, C // g, g * length), p.dtype, Role.LOCAL)
    h, cq, w, i = Var("h_q"), Var("c_q"), Var("w_q"), Var("i_q")
    phases = []
    for ph, pw in sorted({(r * dh % sh, t * dw % sw) for r in range(kh) for t in range(kw)}):
        at = BinOp("add", BinOp("mul", h, const(wq)), w)
        copy = Store(x4, (const(ph), const(pw), cq, BinOp("add", BinOp("mul", at, const(g)), i)),
                     p.image(p.x.index[0], BinOp("add", BinOp("mul", cq, const(g)), i),
                             BinOp("add", BinOp("mul", h, const(sh)), const(ph)),
                             BinOp("add", BinOp("mul", w, const(sw)), const(pw))))
        copy = For(w, const(0), const(-(-(wp - pw) // sw)), ForKind.SERIAL,
                   For(i, const(0), const(g), ForKind.UNROLLED, copy))
        phases.append(For(h, const(0), const(-(-(hp - ph) // sh)), ForKind.SERIAL, copy))
    return x4, For(cq, const(0), const(C // g), ForKind.SERIAL, seq(*phases))


def pack_rows(p: ConvTilePlan, o0: Expr) -> tuple[Buffer, Stmt]:
    """The weights of one block of output channels as the tiles read A, and the nest that fills
    it: ``w_rows[kk, p, q, r, b] = w[o0 + r, k0 + b, p, q]`` (k0 of chunk kk as ``_start`` places
    it; in the order the dots read them, chunk by chunk), zero where the chunk before has added
    that input channel; folded, ``w_rows[0, p, 0, r, q C + c] = w[o0 + r, c, p, q]``."""
    t, C, per, dtype = p.shape, p.channels, p.per, p.w.dtype
    kh, kw = (tap.extent.value for tap in p.taps)
    rows = Buffer("w_rows", (-(-C // per), -(-kh // p.pairs), 1 if p.fold else kw, t.tm * t.rows, per),
                  dtype, Role.LOCAL)
    tp, tq, kp, r, b = Var("p_p"), Var("q_p"), Var("kk_p"), Var("r_p"), Var("b_p")
    k = BinOp("add", _start(kp, per, const(C), C % per == 0), b)
    names = (p.lane.var.name, p.k.var.name, p.taps[0].var.name, p.taps[1].var.name)
    channel, column = (BinOp("mod", b, const(C)), BinOp("div", b, const(C))) if p.fold else (k, tq)
    row = tp
    if p.pairs > 1:                                # b: a pair's first row's kw C bytes, then its second's
        within = BinOp("mod", b, const(kw * C))
        channel, column = BinOp("mod", within, const(C)), BinOp("div", within, const(C))
        row = BinOp("add", BinOp("mul", tp, const(p.pairs)), BinOp("div", b, const(kw * C)))
    read = BinOp("min", row, const(kh - 1)) if p.pairs > 1 else row       # in range; zeroed below if past
    real = p.k.extent.value
    at = BinOp("min", channel, const(real - 1)) if C > real else channel
    value = substitute(p.w, dict(zip(names, (BinOp("add", o0, r), at, read, column))))
    if C > real:                                   # a channel past the image's (folded): weighs zero
        value = Select(BinOp("lt", channel, const(real)), value, Const(0, dtype))
    if C % per and not p.fold:
        value = Select(BinOp("ge", k, BinOp("mul", kp, const(per))), value, Const(0, dtype))
    if p.pairs > 1 and kh % p.pairs:               # an odd kh's last pair: its second row is no row
        value = Select(BinOp("lt", row, const(kh)), value, Const(0, dtype))
    fill = Store(rows, (kp, tp, tq, r, b), value)
    for var, extent in ((b, per), (r, t.tm * t.rows), (tq, rows.shape[2]), (tp, rows.shape[1]),
                        (kp, rows.shape[0])):
        fill = For(var, const(0), const(extent), ForKind.SERIAL, fill)
    return rows, fill


def conv_tile_nest(p: ConvTilePlan, threads: int) -> Stmt:
    """The loop nest of the module docstring for plan ``p``."""
    t, (sh, sw), (dh, dw), g = p.shape, p.stride, p.dilation, p.group
    C, O, OW = p.channels, p.lane.extent.value, p.row.extent.value
    mr, nc = t.tm * t.rows, t.tn * t.cols
    ob, xb, kk = Var(p.lane.var.name + "b"), Var(p.row.var.name + "b"), Var(p.k.var.name + "k")
    o0, x0 = _start(ob, mr, const(O), O % mr == 0), _start(xb, nc, const(OW), OW % nc == 0)
    K = p.pairs * C * p.taps[1].extent.value if p.fold else C    # k of one tap's dot (kernel rows', folded)
    k0 = _start(kk, p.per, const(K), K % p.per == 0)
    panel, fill = pack_rows(p, o0)
    if p.flat:
        return _flat_nest(p, threads, ob, o0, kk, k0, panel, fill)
    x4, copy = folded(p) if p.fold else interleaved(p)
    qd = BinOp("mul", p.taps[1].var, const(dw))                 # the tap's column offset in pixels
    y_at = BinOp("add", BinOp("mul", p.out_row.var, const(sh)), BinOp("mul", p.taps[0].var, const(dh * p.pairs)))
    taps = p.taps[:1] if p.fold else p.taps                    # the dots' tap loops (folded: the rows only)
    q_at = const(0) if p.fold else p.taps[1].var

    def w_at(i: int) -> Load:
        return Load(panel, (kk, p.taps[0].var, q_at, const(i * t.rows), const(0)))

    def x_at(j: int) -> Load:
        column = BinOp("add", x0, const(j * t.cols))
        if p.fold:                               # the kernel row's columns are in k: one dot a row
            quads = C * p.taps[1].extent.value // g
            return Load(x4, (BinOp("add", BinOp("mul", y_at, const(quads)), BinOp("div", k0, const(g))),
                             BinOp("mul", column, const(g))))
        return Load(x4, (y_at, BinOp("mod", qd, const(sw)), BinOp("div", k0, const(g)),
                         BinOp("mul", BinOp("add", column, BinOp("div", qd, const(sw))), const(g))))

    def reduce(dots: Stmt) -> Stmt:
        extents = {p.taps[0].var.name: panel.shape[1]}             # the tap rows' loop: pairs of rows, folded
        for var, extent in (*((tap.var, extents.get(tap.var.name, tap.extent.value)) for tap in reversed(taps)),
                            (kk, panel.shape[0])):
            dots = For(var, const(0), const(extent), ForKind.SERIAL, dots)
        return dots
    block = block_of_sums(t, w_at, x_at, reduce, lambda sums: epilogue(
        p.store, p.acc, sums, {p.lane.var.name: (o0, mr), p.row.var.name: (x0, nc)}))
    rows = For(p.out_row.var, const(0), p.out_row.extent, ForKind.SERIAL,
               For(xb, const(0), _blocks(const(OW), nc), ForKind.SERIAL, block))
    parallel = ForKind.PARALLEL if threads > 1 else ForKind.SERIAL
    blocks = For(ob, const(0), const(-(-O // mr)), parallel, Allocate(panel, seq(fill, rows)))
    if threads > 1:
        copy = replace(copy, kind=ForKind.PARALLEL)
    return replace(p.batch, body=Allocate(x4, seq(copy, blocks)))


def _flat_nest(p: ConvTilePlan, threads: int, ob: Var, o0: Expr, kk: Var, k0: Expr, panel: Buffer,
               fill: Stmt) -> Stmt:
    """``conv_tile_nest`` for blocks of R = ``p.flat`` output rows (``flattened``):

        parallel for ob:  for rb < ceil(OH / R):                  oy0: block rb's first row
          for kk < KC: for p < kh: for q < kw:
            tile_dot(c_tiles[j], w_rows[kk, p, q, 0, 0],
                     x4[p dh % sh, q dw % sw, k0 / 4, 4 ((oy0 + p dh / sh) wq + q dw / sw + 16 j)])
          for oi < 16: for r < R: vectorized for ox < OW:
            y[n, o0 + oi, oy0 + r, ox] = epilogue(c_sums[oi, r wq + ox])"""
    t, (sh, sw), (dh, dw) = p.shape, p.stride, p.dilation
    OH, OW, mr, R = p.out_row.extent.value, p.row.extent.value, t.tm * t.rows, p.flat
    wq = -(-p.x.buffer.shape[3] // sw)
    rb = Var(p.out_row.var.name + "b")
    oy0 = _start(rb, R, const(OH), OH % R == 0)
    x4, copy = flattened(p)
    (tp, tq) = (tap.var for tap in p.taps)
    ph, pw = BinOp("mod", BinOp("mul", tp, const(dh)), const(sh)), BinOp("mod", BinOp("mul", tq, const(dw)), const(sw))
    row = BinOp("add", oy0, BinOp("div", BinOp("mul", tp, const(dh)), const(sh)))
    first = BinOp("add", BinOp("mul", row, const(wq)), BinOp("div", BinOp("mul", tq, const(dw)), const(sw)))

    def w_at(i: int) -> Load:
        return Load(panel, (kk, tp, tq, const(i * t.rows), const(0)))

    def x_at(j: int) -> Load:
        column = BinOp("add", first, const(j * t.cols))
        return Load(x4, (ph, pw, BinOp("div", k0, const(p.group)), BinOp("mul", column, const(p.group))))

    def reduce(dots: Stmt) -> Stmt:
        for var, extent in ((tq, p.taps[1].extent.value), (tp, p.taps[0].extent.value), (kk, panel.shape[0])):
            dots = For(var, const(0), const(extent), ForKind.SERIAL, dots)
        return dots

    def stores(sums: Buffer) -> Stmt:
        oi, r, ox = Var(p.lane.var.name + "i"), Var(p.out_row.var.name + "i"), Var(p.row.var.name + "i")
        at = {p.lane.var.name: BinOp("add", o0, oi), p.out_row.var.name: BinOp("add", oy0, r), p.row.var.name: ox}
        st = stored(p.store, p.acc, at, Load(sums, (oi, BinOp("add", BinOp("mul", r, const(wq)), ox))))
        return For(oi, const(0), const(mr), ForKind.SERIAL, For(r, const(0), const(R), ForKind.SERIAL,
                                                                 For(ox, const(0), const(OW), ForKind.VECTORIZED, st)))

    # One block of rows (a 7x7 image): each weight tile is read once, from memory; prefetch it.
    block = block_of_sums(t, w_at, x_at, reduce, stores, (AHEAD if OH <= R else 0, 0))
    parallel = ForKind.PARALLEL if threads > 1 else ForKind.SERIAL
    rows = For(rb, const(0), const(-(-OH // R)), ForKind.SERIAL, block)
    blocks = For(ob, const(0), const(-(-p.lane.extent.value // mr)), parallel, Allocate(panel, seq(fill, rows)))
    if threads > 1:
        copy = replace(copy, kind=ForKind.PARALLEL)
    return replace(p.batch, body=Allocate(x4, seq(copy, blocks)))


def schedule_conv_tiles(f: Function, threads: int, pairs: tuple[tuple[DType, DType], ...] = (INT8,)) -> Function:
    """``f``'s first contraction nest, an int8 (or bf16) conv, on AMX tiles (the module docstring),
    or a ScheduleError; ``pairs``: the operand types the target's tiles multiply."""
    f, body, at = first_contraction(f)
    body[at] = conv_tile_nest(plan_conv_tiles(f, body[at], pairs), threads)
    return replace(f, body=seq(*body))
