"""Schedule templates: one per kernel class, a few knobs each (as in AutoTVM).

A *contraction* nest (matmul, batch matmul, gemm, conv2d) is recognised by its
shape after lowering:

    for s0: ... for sn:                 spatial loops (the output's axes)
      acc = 0
      for r0: ... acc = acc + x * w     reduction loops
      out[s0, ..., sn] = epilogue(acc)

Its template builds the register-tiled micro-kernel:

    for batch: parallel for lo:          lane tiles, the panel of w packed once each
      w_pack[r.., li] = w[.., lo * NR + li]
      for ro:                             row tiles
        acc[MR, NR] = 0                  MR x NR accumulators live in vector registers
        for r..: unrolled for ri: vectorized for li: acc[ri, li] += x[..] * w_pack[r.., li]
        unrolled for ri: vectorized for li: out[..] = epilogue(acc[ri, li])

The *lane* axis is the output's last axis for a matmul, its output channels for
a conv2d (NCHW), whose weights are then the packed operand; the *row* axis is
the one before it (a conv2d's output columns), and a conv2d's epilogue stores
along it, where its output is contiguous.  Tails use overlapping tiles.

Any other nest that reduces into a scalar per output element (a pooling window)
gets its output's last axis as vector lanes (``vectorize_reductions``).
"""
from __future__ import annotations

import hashlib
import math
from contextlib import suppress
from dataclasses import asdict, dataclass, replace

from minic.ir.loops import (Allocate, BinOp, Buffer, Cast, Const, Expr, For, ForKind, Function, If, Load, Role, Seq,
                            Stmt, Store, Var, children, const, free_vars, map_expr, map_stmt, seq, structure,
                            substitute, walk)
from minic.ir.loops_analysis import CHUNKS_PER_THREAD, MAX_STRIDE, clamped_cast, divisor, fewest, stride, uses
from minic.ir.loops_simplify import simplify_stmt
from minic.ir.types import DType
from minic.schedule.caching import cache_accumulator, pack_operand
from minic.schedule.nest import (ScheduleError, at_zero, loads, loops, loops_named, map_exprs, perfect_band,
                                 rewrite_loops, stmts_of, stores, subst_stmt, unique_loops, wrap)
from minic.schedule.pixels import flat_pixels
from minic.schedule.primitives import FEW, MAX_UNROLL, fuse, parallel, reorder, split, unroll, vectorize

PACK_LIMIT = 1 << 20              # bytes of a packed panel (it lives on the thread's stack)
COLUMN_LANES = 32                 # a tile's columns where an int8 1x1 conv runs its columns as lanes
COPY_LIMIT = 4 << 20              # bytes of a conv's copy of one image, channels in fours (it lives on the stack)


@dataclass(frozen=True)
class Contraction:
    """Where a contraction nest sits in a kernel, and its loops."""
    spatial: tuple[For, ...]
    reduction: tuple[For, ...]
    lane: For                      # the spatial loop that becomes vector lanes
    row: For                       # the spatial loop that becomes unrolled register rows


@dataclass(frozen=True)
class Knobs:
    """The contraction template's knobs."""
    rows: int = 6                  # MR: register rows
    lanes: int = 32                # NR: vector lanes (a multiple of 16 is two/four AVX-512 registers)
    pack: bool = True              # copy the lane operand's panel into a dense local buffer
    parallel: str = "outer"        # "outer": the first loop with enough tiles; "rows": the row tiles

    def to_json(self) -> dict:
        return asdict(self)


def _scalar_reduction(nest: Stmt) -> tuple[list[For], list[For], Store] | None:
    """(spatial loops, reduction loops, final store) of a nest of the form

        for s0: ... for sn: { acc = init; for r0: ... acc = acc op e; out[...] = f(acc) }
    """
    spatial, t = perfect_band(nest)
    match t:
        case Allocate(buffer=Buffer(shape=()), body=Seq(stmts=(_, For() as inner, Store() as st))) if spatial:
            reduction, r = perfect_band(inner)
            if isinstance(r, Store) and r.buffer == t.buffer:
                return spatial, reduction, st
    return None


def find_contraction(f: Function) -> Contraction | None:
    """The first contraction nest of ``f`` (see the module docstring), or None."""
    for spatial, reduction, _ in filter(None, map(_scalar_reduction, stmts_of(f.body))):
        update = reduction[-1].body
        if not _is_product_sum(update):
            continue
        conv = "conv2d" in f.origin and len(spatial) == 4
        weight = _weight_lanes(update, spatial)
        lane, row = ((spatial[1], spatial[3]) if conv else (weight, spatial[-1]) if weight is not None
                     else (spatial[-1], spatial[-2] if len(spatial) > 1 else None))
        if row is None:
            continue
        return Contraction(tuple(spatial), tuple(reduction), lane, row)
    return None


def _weight_lanes(update: Store, spatial: list[For]) -> For | None:
    """The loop to run as lanes when a constant factor of the product (weights) does not vary
    along the output's last axis but the other factor does: the innermost spatial loop the
    weights vary along (``M[.., o, t] = sum_k U[.., o, k] · V[.., k, t]``: the lanes over o, as
    a conv2d's over its channels; the weights are then the packed operand, the rows run along t)."""
    last = spatial[-1].var.name
    factors = (update.value.b.a, update.value.b.b)
    for weights, other in (factors, factors[::-1]):
        used = free_vars(weights)
        if (isinstance(weights, Load) and weights.buffer.role == Role.CONST
                and last in free_vars(other) - used):
            return next((t for t in reversed(spatial[:-1]) if t.var.name in used), None)
    return None


def _is_product_sum(update: Store) -> bool:
    """Whether ``update`` is ``acc = acc + x * y``."""
    v = update.value
    return (getattr(v, "op", None) == "add" and getattr(v.b, "op", None) == "mul"
            and isinstance(v.a, Load) and v.a.buffer.name == update.buffer.name)


def signature(f: Function) -> str:
    """What a tuning record is keyed by: the kernel's code with the kernel and its
    buffers named by position, hashed (a model's repeated layers share records)."""
    return hashlib.sha256(structure(f).encode()).hexdigest()[:16]


def schedule_contraction(f: Function, knobs: Knobs, threads: int, bf16_pairs: bool = False,
                         u8s8_quads: bool = False) -> Function:
    """Apply the micro-kernel template to the first contraction nest of ``f``.  ``bf16_pairs``: the
    target adds pairs of bf16 products in one instruction (``pair_products``); ``u8s8_quads``:
    fours of u8 × s8 products (``quad_products``)."""
    f = unique_loops(f)
    c = find_contraction(f)
    if c is None:
        raise ScheduleError(f"kernel {f.name} holds no contraction nest")
    if u8s8_quads and "conv2d" in f.origin and len(c.spatial) == 4:      # a 1x1 conv's pixels as one row
        flat = flat_pixels(f, c.spatial[2], c.spatial[3], COLUMN_LANES)
        if flat is not f and _columns_as_lanes(flat, found := find_contraction(flat)):
            f, c = flat, found
    columns = u8s8_quads and _columns_as_lanes(f, c)
    if columns:                    # output columns as lanes, channels as register rows
        c, knobs = replace(c, lane=c.row, row=c.lane), Knobs(rows=8, lanes=COLUMN_LANES, pack=False)
    lane, row = c.lane.var.name, c.row.var.name
    nr = min(knobs.lanes, c.lane.extent.value) if isinstance(c.lane.extent, Const) else knobs.lanes
    mr = min(knobs.rows, c.row.extent.value) if isinstance(c.row.extent, Const) else knobs.rows
    lo, li, ro, ri = lane + "o", lane + "i", row + "o", row + "i"
    k = c.spatial.index(c.lane)
    before = [t.var.name for t in c.spatial[:k] if t is not c.row]
    after = [t.var.name for t in c.spatial[k + 1:] if t is not c.row]
    # Reorder first, split after: a symbolic extent splits into if (n >= f) {tiles} else {plain},
    # and the tiles must already be in their final order (a band under an if can still be
    # reordered, but not across it).
    f = reorder(f, *before, lane, *after, row)
    f = split(f, lane, nr, tail="overlap")
    f = reorder(f, *after, row, li)
    f = split(f, row, mr, tail="overlap")
    image_rows = c.spatial[2].var.name if columns else None
    # Columns as lanes: on several threads, a conv that narrows (fewer output channels than input
    # ones) runs a row of the image at a time, each tile of its columns through every block of
    # channels, the rows shared out (as the copy's are) so that a thread reads only its part of
    # the larger input; else a block of channels at a time over the whole image, 8 planes in order.
    by_rows = columns and threads > 1 and _narrows(c)
    if columns and not by_rows:
        f = reorder(f, ro, image_rows, lo)
    f = cache_accumulator(f, ri, li)
    f = unroll(f, ri)
    f = vectorize(f, li)
    f = rewrite_loops(f, ri, lambda t: _store_along_rows(t, li))
    if not isinstance(c.row.extent, Const):     # fewer rows than a tile: one row at a time, still in vectors
        with suppress(ScheduleError):
            f = vectorize(cache_accumulator(f, li + FEW), li + FEW)
    if knobs.pack:
        f = _pack_lane_operand(f, c, lo, li, ri, nr)
    # the reduction, and its copy in the one-row-at-a-time code for rows fewer than a tile (``FEW``)
    for k in (c.reduction[-1].var.name, c.reduction[-1].var.name + FEW):
        if bf16_pairs:
            f = pair_products(f, k)
        if u8s8_quads:
            f = quad_products(f, k)
    if u8s8_quads:                 # the grouped reduction's operands laid out as vpdpbusd reads them
        kp = c.reduction[-1].var.name + "p"
        f = weight_quads(channel_quads(f, kp, threads), kp)
    counts = {t.var.name: t.extent.value for t in loops(f.body) if isinstance(t.extent, Const)}
    wide = [n for n in before + [lo] + after if counts.get(n, 0) >= threads]      # a tile for every thread
    if threads > 1:              # by rows, a flat image (one row: ``flat_pixels``) shares out its tiles of pixels
        rows = (lo if c.spatial[2].extent == Const(1) else image_rows) if by_rows else None
        f = parallel(f, rows or (wide[0] if wide and knobs.parallel == "outer" and not columns else ro))
    return f


def _columns_as_lanes(f: Function, c: Contraction) -> bool:
    """Whether an 8-bit 1x1 conv2d of stride 1 and rows of at least 32 columns runs its output
    columns as lanes and its output channels as register rows (8 x 32 a tile): every register of
    the tile is then 16 pixels of one channel, a piece of an NCHW row, so the epilogue stores it
    as it is, a residual read along it too, where channels as lanes transpose the tile and work
    on columns of 7 or 8 pixels.  ``vpdpbusd`` takes 32 pixels of ``channel_quads``' copy and a
    channel's four weights as an embedded broadcast (``{1to16}``).  Kernels alone, resnet50's
    first stage (56 columns), VNNI without AMX, one thread: the convs that widen to 256 channels
    and add the residual 0.370 -> 0.266 ms, the projection's 0.226 -> 0.216, the one that adds
    its sums 0.344 -> 0.304, the 256 -> 64 ones 0.230 -> 0.239.  Rows of 28 columns would waste
    lanes: where a 1x1 conv's plane fills whole tiles as one row of pixels, ``flat_pixels`` runs it so."""
    update = c.reduction[-1].body
    return ("conv2d" in f.origin and len(c.spatial) == 4 and c.lane is c.spatial[1] and c.row is c.spatial[3]
            and all(_widened_byte(x) for x in (update.value.b.a, update.value.b.b))
            and isinstance(c.row.extent, Const) and c.row.extent.value >= 32
            and all(t.extent == Const(1) for t in c.reduction[:-1])
            and all(not x.index or stride(x.index[-1], c.row.var.name) in (0, 1) for x in loads(update)))


def _narrows(c: Contraction) -> bool:
    """Whether the conv ``c`` (columns as lanes: its register rows are the output channels) has
    fewer output channels than input ones.  Kernels in place, resnet50's 1x1 convs of 56 columns,
    VNNI without AMX, two threads, by blocks of channels -> by rows (two runs each): 256 -> 64
    channels 0.261/0.270 -> 0.247/0.236 and 0.237/0.246 -> 0.197/0.190 ms, 256 -> 128 0.402/0.407
    -> 0.319/0.301; by rows, 64 -> 256 with its residual went 0.22 -> 0.31-0.40 (a row written to
    256 planes at a time).  One thread: 256 -> 64 0.31 -> 0.36 (the input stays in its L2 either way)."""
    inputs = c.reduction[-1].extent
    return isinstance(inputs, Const) and isinstance(c.row.extent, Const) and c.row.extent.value < inputs.value


def fuse_for_threads(f: Function, name: str, threads: int) -> tuple[Function, str]:
    """Loop ``name`` fused with the serial loop that is its only statement, and again, while
    it may have fewer than CHUNKS_PER_THREAD iterations a thread (every size taken at 1); a
    parallel loop stays parallel where the fused one's iterations are independent.  It stops
    at enough iterations: every loop fused in makes the indices of the ones inside divisions
    by its extent (with B, a real division) that LLVM cannot hoist out of them.  Returns the
    function and the loop's new name."""
    found = loops_named(f.body, name)
    top = found[0] if len(found) == 1 else None
    if not (top is not None and isinstance(top.body, For) and top.body.kind == ForKind.SERIAL
            and top.kind in (ForKind.SERIAL, ForKind.PARALLEL)
            and (fewest(top.extent) or 0) < CHUNKS_PER_THREAD * threads):
        return f, name
    fused_name = name + top.body.var.name
    try:
        fused = fuse(f, name, top.body.var.name, fused_name)
        if top.kind == ForKind.PARALLEL:
            fused = parallel(fused, fused_name)        # checks the fused loop's independence
    except ScheduleError:
        return f, name
    return fuse_for_threads(fused, fused_name, threads)


def widen_parallel(f: Function, threads: int) -> Function:
    """Every parallel loop of ``f`` with too few iterations to share out (``fuse_for_threads``)
    fused with the loop inside it, once the packed panels are out of the way (``prepack``):
    a conv's 64 channels are 2 lane tiles of 32, a parallel loop of 2 iterations that leaves
    a thread idle whenever the other runs late; fused with its 112 rows, 224 iterations.
    Winograd's 16 matmuls run in 4 x 4 loops: fused, 16."""
    if threads < 2:
        return f
    for name in [t.var.name for t in loops(f.body) if t.kind == ForKind.PARALLEL]:
        f, _ = fuse_for_threads(f, name, threads)
    return f


def _store_along_rows(rows: For, lanes: str) -> For:
    """The epilogue stored in vectors along the rows when that is where the output is
    contiguous (a conv2d's columns; its lanes, the channels, are H * W apart):

        unrolled for ri < MR:                      unrolled for li < NR:
          vectorized for li < NR:            ->      vectorized for ri < MR:
            y[.., lo * NR + li, .., ro * MR + ri]        y[.., lo * NR + li, .., ro * MR + ri]
              = f(acc[ri, li])                             = f(acc[ri, li])

    NR scattered stores of MR lanes each become NR vector stores (a residual input
    read there becomes vector loads too); the tile is read across, in registers.  What f
    computes from the tile alone is computed before, in the tile's orientation
    (``_in_tile_orientation``)."""
    inner = rows.body
    if not (isinstance(inner, For) and inner.var.name == lanes and isinstance(inner.body, Store)):
        return rows
    st, r = inner.body, rows.var.name
    if st.buffer.role == Role.LOCAL or stride(st.index[-1], r) != 1 or any(r in free_vars(i) for i in st.index[:-1]) \
            or not (isinstance(inner.extent, Const) and inner.extent.value <= MAX_UNROLL):
        return rows
    return _in_tile_orientation(rows, replace(inner, kind=rows.kind, body=replace(rows, kind=inner.kind, body=st)))


def _in_tile_orientation(rows: For, columns: For) -> Stmt:
    """The part g of an epilogue f(acc[ri, li]) that reads only the tile and values the same
    along the rows (a conv's per-channel scale and bias; the largest such part, of 32-bit
    values, the columns' transposes take) computed first in the tile's orientation, into a tile
    the columns then read (``_store_along_rows``):

        unrolled for ri < MR: vectorized for li < NR:  t[ri, li] = g(acc[ri, li])
        unrolled for li < NR: vectorized for ri < MR:  y[..] = f'(t[ri, li])

    Each operation of g is then MR · NR / 16 vector instructions (an int8 conv's 7 x 32 tile:
    14), where along the columns it was NR (32, on 7 lanes of 16 each)."""
    r, st = rows.var.name, columns.body.body
    tile = {x for x in walk(st.value) if isinstance(x, Load) and x.buffer.role == Role.LOCAL and uses(x, r)}

    def along_tile(e: Expr) -> bool:            # reads the tile, and nothing else that moves with the rows
        found = [x for x in walk(e) if isinstance(x, Load)]
        return (any(x in tile for x in found) and all(x in tile or not uses(x, r) for x in found)
                and e.dtype in (DType.f32, DType.i32))

    def parts(e: Expr) -> list[Expr]:
        return [e] if along_tile(e) else [p for k in children(e) for p in parts(k)]

    v = st.value
    if clamped_cast(v) and v.to.bits < 32 and along_tile(v.value):    # a quantization: to i32 in the tile, to bytes after
        g, rest = Cast(DType.i32, v.value), lambda t: Cast(v.to, t)
    else:
        g = set(parts(v))
        if len(g) != 1:
            return columns
        g = next(iter(g))
        rest = lambda t: map_expr(v, lambda x: t if x == g else None)      # noqa: E731
    if len(tile) != 1 or isinstance(g, Load):
        return columns
    acc = next(iter(tile))
    t = Buffer(acc.buffer.name + "_g", acc.buffer.shape, g.dtype, Role.LOCAL)
    first = replace(rows, body=replace(rows.body, body=Store(t, acc.index, g)))
    then = replace(columns, body=replace(columns.body, body=replace(st, value=rest(Load(t, acc.index)))))
    return Allocate(t, seq(first, then))


def _pack_lane_operand(f: Function, c: Contraction, lo: str, li: str, ri: str, nr: int) -> Function:
    """Pack the factor of the update that varies along the lanes (``w`` of ``acc += x * w``),
    when its panel has a constant size.  A factor widened from bf16 (``(f32)w``) is packed as
    stored: half the bytes, widened where the micro-kernel reads it (a shift), and in the pairs
    vdpbf16ps reads; so is an 8-bit one (``(i32)w``, matmul_integer's): a quarter of the bytes,
    and the bytes vpdpbusd reads.  An f16 one is packed widened: vcvtph2ps in the micro-kernel cost more
    than the smaller panel saved (8% on a 128x768x768 matmul, Zen 4, one thread)."""
    update = next((st for t in loops_named(f.body, li) for st in stores(t.body) if _is_product_sum(st)), None)
    if update is None or not all(isinstance(r.extent, Const) for r in c.reduction):
        return f
    factors = [x for x in (update.value.b.a, update.value.b.b) if li in free_vars(x) and ri not in free_vars(x)]
    size = nr * 4 * math.prod(r.extent.value for r in c.reduction)
    if len(factors) != 1 or size > PACK_LIMIT:
        return f
    factor = factors[0]
    if _widened_bf16(factor) or _widened_byte(factor):
        factor = factor.value
    with suppress(ScheduleError):  # e.g. computed in two places: the template runs unpacked
        return rewrite_loops(pack_operand(f, lo, factor, "w_pack"), lo, _fill_where_used)
    return f


def pair_products(f: Function, k: str) -> Function:
    """The reduction loop ``k`` two terms at a time, when both factors of its products are widened
    bf16 and its extent is even: AVX512-BF16's vdpbf16ps adds two bf16 products to each f32
    lane in one instruction, and ``minic/codegen/vector.py`` emits it for such a pair.

        for k < K:                                     for kp < K / 2:
          unrolled for ri: vectorized for li:    ->      unrolled for ri: vectorized for li:
            acc[ri, li] += (f32)x[ri, k] * (f32)w[k, li]     acc[ri, li] += (f32)x[ri, 2kp] * (f32)w[2kp, li]
                                                              acc[ri, li] += (f32)x[ri, 2kp + 1] * (f32)w[2kp + 1, li]

    Every element still adds its terms in the same order here (vdpbf16ps then adds a pair's
    second product first: the products are exact in f32, so only that order differs)."""
    return _group_terms(f, k, 2, lambda a, b: _widened_bf16(a) and _widened_bf16(b))


def quad_products(f: Function, k: str) -> Function:
    """The reduction loop ``k`` four terms at a time, when its products are of a widened u8 and a
    widened i8 (``matmul_integer``'s) and its extent is a multiple of 4: AVX512-VNNI's vpdpbusd
    adds four u8 × s8 products to each i32 lane in one instruction (``minic/codegen/vector.py``).

        for k < K:                                     for kp < K / 4:
          unrolled for ri: vectorized for li:    ->      unrolled for ri: vectorized for li:
            acc[ri, li] += (i32)x[ri, k] * (i32)w[k, li]     acc[ri, li] += (i32)x[ri, 4kp + q] * (i32)w[4kp + q, li]
                                                              ... for q = 0, 1, 2, 3

    Integer sums: any order gives the same i32."""
    return _group_terms(f, k, 4, lambda a, b: {_widened_byte(a), _widened_byte(b)} == {DType.u8, DType.i8})


def channel_quads(f: Function, kp: str, threads: int) -> Function:
    """A conv's u8 image read four channels at a time from a copy that holds them side by side,
    where ``quad_products`` grouped its input channels (loop ``kp``).  In NCHW the four bytes of a
    vpdpbusd lane lie a plane apart (four loads and three shifts a register row and step); in
    the copy they are one i32, a single broadcast load (LLVM combines the four byte loads):

        for n:                                       for n:
                                                       (parallel) for h: for cq < C / 4: for w: for i < 4:
                                                         u8 x_quads[h, cq, w, i] = x[n, 4 cq + i, h, w]   (i = 0..3)
          .. for kp: .. (i32)x[n, 4 kp + q, h', w']   ->  .. for kp: .. (i32)x_quads[h', kp, w', q]

    A row's channels lie together: a tile's steps along kp read W·4 bytes apart (the hardware's
    stride prefetcher follows them; C·H·W apart it did not), and a thread that copies some rows
    reads its part of the image only.  resnet50, VNNI without AMX, kernels in place, was
    x_quads[cq, h, w, i] split by channels (two runs each, the kernels' times summed): 19.2/18.6
    -> 18.6/17.5 ms at one thread, 11.0/10.7 -> 10.7/9.9 at two (256 -> 64 1x1s 0.24 -> 0.18).

    n is the nest's outermost loop (or a constant), so the copy runs once per image before the
    tiles.  The copy is C·H·W bytes for O·kh·kw products each (the AMX conv's ``interleaved``
    makes its own, for tiles); a kernel without such a read (a pixel that moves with the lanes:
    a conv fused with a flatten), or whose copy would not fit COPY_LIMIT, is returned as it was."""
    grouped = loops_named(f.body, kp)
    reads = [ld for t in grouped for ld in loads(t.body) if ld.buffer.dtype == DType.u8]
    if len(grouped) != 1 or not reads:
        return f
    x, n = reads[0].buffer, reads[0].index[0]
    nests = list(stmts_of(f.body))
    at = next(j for j, s in enumerate(nests) if loops_named(s, kp))
    lanes = {t.var.name for t in loops(grouped[0]) if t.kind == ForKind.VECTORIZED}
    # the same pixel on every lane, the image n that of the nest's outermost loop (or a constant)
    image = not free_vars(n) or (isinstance(n, Var) and isinstance(nests[at], For) and nests[at].var == n)
    if not (image and len(x.shape) == 4 and all(isinstance(d, int) for d in x.shape[1:]) and x.shape[1] % 4 == 0
            and x.role != Role.LOCAL and math.prod(x.shape[1:]) <= COPY_LIMIT
            and all(ld.buffer == x and ld.index[0] == n and stride(ld.index[1], kp) == 4
                    and free_vars(ld.index[1]) == {kp} and not set().union(*map(free_vars, ld.index[:3])) & lanes
                    and all(stride(ld.index[3], v) in (0, 1) for v in lanes)
                    for ld in reads)):
        return f
    c, h, w = x.shape[1:]
    sh, sw = (_step([ld.index[d] for ld in reads], f) for d in (2, 3))
    quads = Buffer("x_quads", (-(-h // sh), c // 4, -(-w // sw), 4), DType.u8, Role.LOCAL)
    cq, hq, wq = Var("c_q"), Var("h_q"), Var("w_q")
    # the four stores side by side: one interleaved store of a vector of w (schedule.default, codegen.vector)
    copy = seq(*(Store(quads, (hq, cq, wq, const(i)),
                       Load(x, (n, BinOp("add", BinOp("mul", cq, const(4)), const(i)), _times(hq, sh), _times(wq, sw))))
                 for i in range(4)))
    by_rows = quads.shape[0] >= threads              # else (an image of one row: flat_pixels) by channels
    for var, extent, shared in ((wq, quads.shape[2], False), (cq, c // 4, not by_rows), (hq, quads.shape[0], by_rows)):
        copy = For(var, const(0), const(extent), ForKind.PARALLEL if threads > 1 and shared else ForKind.SERIAL, copy)

    def read_quads(e: Expr) -> Expr:
        if isinstance(e, Load) and e.buffer == x and e.index[0] == n:
            channel = e.index[1]
            return Load(quads, (_over(e.index[2], sh), BinOp("div", channel, const(4)), _over(e.index[3], sw),
                                BinOp("mod", channel, const(4))))
        return e

    nest = map_exprs(nests[at], lambda e: map_expr(e, read_quads))
    if isinstance(n, Var):                      # per image, inside the batch loop
        nests[at] = replace(nest, body=Allocate(quads, seq(copy, nest.body)))
    else:                                       # one image: before the nest
        nests[at] = Allocate(quads, seq(copy, nest))
    return replace(f, body=simplify_stmt(seq(*nests), {s: (0, 2**62) for s in f.sizes}))


def _step(index: list[Expr], f: Function) -> int:
    """The step between the rows (or columns) a conv reads: a 1x1 conv of stride 2 reads every
    other one (``i2 * 2 + p0``, its window's loop ``p0`` of one iteration), so ``channel_quads``
    copies those only, a quarter of the image.  1 where a window reads its neighbours."""
    once = at_zero(f.body)
    return math.gcd(*(divisor(substitute(e, once)) for e in index)) or 1


def _times(v: Var, step: int) -> Expr:
    return v if step == 1 else BinOp("mul", v, const(step))


def _over(e: Expr, step: int) -> Expr:
    return e if step == 1 else BinOp("div", e, const(step))


def weight_quads(f: Function, kp: str) -> Function:
    """The packed weights of a reduction grouped in fours (``quad_products``, loop ``kp``) laid
    out as vpdpbusd reads them, the four rows of a step side by side:

        w_pack[.., c, l]  ->  w_pack[.., c / 4, l, c % 4]

    A step then reads 4 · lanes contiguous bytes, where it read four rows and interleaved them
    with shuffles (``minic/codegen/vector.py``); the panel is prepacked, so the new layout costs
    nothing at run time.  A kernel whose grouped loop reads no such panel is returned as it was."""
    grouped = loops_named(f.body, kp)
    reads = [ld for t in grouped for ld in loads(t.body) if ld.buffer.role == Role.LOCAL and ld.buffer.dtype == DType.i8]
    if len(grouped) != 1 or not reads:
        return f
    w = reads[0].buffer
    if not (len(w.shape) >= 2 and w.shape[-2] % 4 == 0
            and all(ld.buffer == w and stride(ld.index[-2], kp) == 4 for ld in reads)):
        return f
    quads = Buffer(w.name, w.shape[:-2] + (w.shape[-2] // 4, w.shape[-1], 4), w.dtype, w.role)

    def at(index: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return index[:-2] + (BinOp("div", index[-2], const(4)), index[-1], BinOp("mod", index[-2], const(4)))

    def relaid(s: Stmt) -> Stmt:
        s = map_stmt(s, lambda e: map_expr(e, lambda x: Load(quads, at(x.index))
                                           if isinstance(x, Load) and x.buffer == w else None), relaid)
        if isinstance(s, Store) and s.buffer == w:
            return Store(quads, at(s.index), s.value)
        return Allocate(quads, s.body) if isinstance(s, Allocate) and s.buffer == w else s
    return replace(f, body=simplify_stmt(relaid(f.body), {s: (0, 2**62) for s in f.sizes}))


def _group_terms(f: Function, k: str, n: int, fits) -> Function:
    """The reduction loop ``k`` (from 0, its extent a multiple of ``n``) ``n`` terms a step, where
    its update's two factors ``fits``."""
    def group(loop: For) -> For:
        band, leaf = perfect_band(loop.body)
        if not (isinstance(loop.extent, Const) and loop.extent.value % n == 0 and loop.start == Const(0)
                and isinstance(leaf, Store) and _is_product_sum(leaf) and fits(leaf.value.b.a, leaf.value.b.b)):
            return loop
        kp = Var(k + "p")
        terms = [subst_stmt(leaf, {k: BinOp("add", BinOp("mul", kp, Const(n)), Const(q))}) for q in range(n)]
        return For(kp, Const(0), Const(loop.extent.value // n), loop.kind, wrap(band, seq(*terms)))
    return rewrite_loops(f, k, group) if loops_named(f.body, k) else f        # grouped already: kp


def _widened_bf16(e: Expr) -> bool:
    return isinstance(e, Cast) and e.to == DType.f32 and e.value.dtype == DType.bf16


def _widened_byte(e: Expr) -> DType | None:
    """u8 or i8 when ``e`` is ``(i32)v`` of such a ``v``."""
    ok = isinstance(e, Cast) and e.to == DType.i32 and e.value.dtype in (DType.u8, DType.i8)
    return e.value.dtype if ok else None


def _fill_where_used(loop: For) -> For:
    """Allocate(p, {fill; if (c) A else B}) -> Allocate(p, if (c) {fill; A} else B) when only A reads p
    (the few-rows fallback of a symbolic row count reads the operand directly)."""
    match loop.body:
        case Allocate(buffer=p, body=Seq(stmts=(fill, If(cond=c, then=a, otherwise=Stmt() as b)))):
            if not any(ld.buffer == p for ld in loads(b)):
                return replace(loop, body=Allocate(p, If(c, seq(fill, a), b)))
    return loop


def default_knobs(f: Function) -> Knobs:
    """The untuned knobs: 32 lanes, and the register-row count (4..8) that wastes the
    fewest rows on the last tile (a conv2d's 28/14/7 columns get 7; 56 columns and 64 rows
    get 8).  A 1x1 conv2d (its only reduction the input channels) has short reductions
    and a transposed epilogue per tile, and does better with other tile shapes where its
    columns allow them: 16 lanes x 8 rows when they split into rows of 8 (resnet50's
    56 columns), else 64 lanes x 4 rows when they split into rows of 4 (28 columns).
    Measured on resnet50's 17 such kernels at one thread (thread CPU time, RESULTS.md):
    10 % and 8 % less time than 32 x 8 and 32 x 7; its 3x3 convolutions and its 14- and
    7-column stages did best with the general choice."""
    c = find_contraction(unique_loops(f))
    if c is None or not isinstance(c.row.extent, Const):
        return Knobs()
    n = c.row.extent.value
    rows = min((6, 8, 7, 5, 4), key=lambda r: (-(-n // r) * r - n, -r if n % r == 0 else 0))
    one_by_one = "conv2d" in f.origin and all(t.extent == Const(1) for t in c.reduction[1:])
    channels = c.lane.extent.value if isinstance(c.lane.extent, Const) else 0
    # A matmul of weight lanes (its epilogue stored along its rows) with as short a reduction:
    # Winograd's 16 matmuls at resnet50's 56-column stage, 64 input channels.
    short = (len(c.reduction) == 1 and c.row is c.spatial[-1] and isinstance(c.reduction[0].extent, Const)
             and c.reduction[0].extent.value <= 64)
    if (one_by_one and len(c.reduction) > 1) or short:
        for shape in (Knobs(rows=8, lanes=16), Knobs(rows=4, lanes=64)):
            if n % shape.rows == 0 and channels >= shape.lanes:
                return shape
    return Knobs(rows=min(rows, n))


REDUCTION_LANES = 16           # f32 lanes of one AVX-512 register


def _vector_access(index: tuple, var: str) -> bool:
    """Whether the lanes of loop ``var`` reach ``index`` with one vector load: only the
    last index may use ``var``, with a stride from 0 (the same element) to MAX_STRIDE."""
    if not any(var in free_vars(i) for i in index):
        return True
    return (not any(var in free_vars(i) for i in index[:-1])
            and stride(index[-1], var) in range(1, MAX_STRIDE + 1))


def vectorize_reductions(f: Function, lanes: int = REDUCTION_LANES) -> Function:
    """Every nest that reduces into one scalar per output element (a pooling window,
    a sum over a middle axis) computes ``lanes`` neighbours along the output's last
    axis at once, when its store there is contiguous and its loads are vector loads
    (a gather per lane would cost more than the vector saves).  Loop names must be
    unique (``unique_loops``):

        for ..: for j < 56:                        for ..: for jo < 4:       j = min(jo * 16, 40) + ji
          acc = -inf                                 vectorized for ji < 16: acc[ji] = -inf
          for p: for q:                              for p: for q: vectorized for ji < 16:
            acc = max(acc, x[.., 2 * j + q])             acc[ji] = max(acc[ji], x[.., 2 * j + q])
          y[.., j] = acc                             vectorized for ji < 16: y[.., j] = acc[ji]
    """
    for spatial, _, store in filter(None, map(_scalar_reduction, stmts_of(f.body))):
        j = spatial[-1]
        if not (isinstance(j.extent, Const) and j.extent.value >= lanes and j.start == Const(0)):
            continue
        name = j.var.name
        in_memory = [a for a in [store] + loads(spatial[0]) if a.buffer.role != Role.LOCAL]
        if len(loops_named(f.body, name)) > 1 or stride(store.index[-1], name) != 1 or not all(
                _vector_access(a.index, name) for a in in_memory):
            continue
        with suppress(ScheduleError):
            f = vectorize(cache_accumulator(split(f, name, lanes, tail="overlap"), name + "i"), name + "i")
    return f
