"""The int8 (and bf16) matmul on Intel AMX's tiles: ``tdpbusd``, a tile of 16 x 16 i32 sums a step.

A tile register holds up to 16 rows of 64 bytes (minic/amx.py).  One ``tdpbusd`` adds to
an i32 tile C [16, 16] the products of a u8 tile A [16 rows, 64 bytes of k] and an i8
tile B that holds the same 64 k for 16 columns, *four k of one column side by side*:
B's row r is ``w[4r, j], w[4r+1, j], w[4r+2, j], w[4r+3, j]`` for j = 0..15 (64 bytes),
since each i32 of C adds four byte products at a time, as vpdpbusd does per lane.  So:

- A is the activations as they lie (a row of x is contiguous along k): tiles load
  16 rows of 64 bytes straight from x, with x's row length as the stride;
- B is the weights re-laid out, once per column block, into that layout: a panel
  ``w_tiles[kc, 16, 4 * NC]`` (k chunks of 64, their 16 rows of four-k groups, NC
  columns); for constant weights ``prepack`` makes the panel at compile time;
- C stays in tile registers for the whole reduction, and goes to memory once, to a
  small i32 block that the epilogue (the fused sub, scale, bias, requantization)
  reads in vectors.

    for batch:                                      the output's other axes
      parallel for nb < ceil(N / NC):               column blocks of NC = 16 tn, the last overlapping
        i8 w_tiles[KC, 16, 4 NC] = panel(w)         (prepacked)
        for mb < ceil(M / MR):                      row blocks of MR = 16 tm, the last overlapping
          i32 c_tiles[tm tn, 16, 16];  i32 c_sums[MR, NC]
          tile_zero(c_tiles[..])
          for kk < KC:                              k in chunks of 64 (the last ends at K)
            tile_dot(c_tiles[i tn + j], x[.., m0 + 16 i, k0], w_tiles[kk, 0, 64 j])   i < tm, j < tn
          tile_store(c_sums[16 i, 16 j], c_tiles[i tn + j])
          for ri < MR: vectorized for li < NC:
            y[.., m0 + ri, n0 + li] = epilogue(c_sums[ri, li])

2 x 2 tiles of C, 2 of A and 2 of B use the 8 registers: each loaded tile feeds two
dot products.  Ragged sizes overlap rather than shrink: the last row block starts at
M - MR and the last column block at N - NC (they compute some outputs twice, the same
values); the last k chunk starts at K - 64 and its panel is zero for the k the chunk
before has added.  Smaller than one tile (M < 16, N < 16, K < 64) a tile has that many
rows, columns or bytes.  K must be a multiple of 4 (B's groups of four).  A row count
known only at run time runs the tiles where it is at least MR, and the VNNI template's
code otherwise.

A bf16 matmul (amx-bf16) takes the same nest with ``tdpbf16ps``: a row of A holds 32 bf16 k,
a row of B two k of a column side by side (``pack_panel``'s g = 2), and the tiles and c_sums
are f32.  The int8 and bf16 convolutions build on the same blocks: ``conv_tiles.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from minic.ir.loops import (TILE_DOTS, Allocate, BinOp, Buffer, Cast, Const, Expr, For, ForKind, Function, If, Load,
                            Role, Select, Stmt, Store, TileDot, TileStore, TileZero, Var, const, free_vars, map_expr,
                            seq, substitute)
from minic.ir.types import DType
from minic.schedule.nest import ScheduleError, fail, perfect_band, rename_loops, stmts_of, unique_loops
from minic.schedule.templates import PACK_LIMIT, _is_product_sum, _scalar_reduction, find_contraction

ROWS, BYTES = 16, 64          # a tile: 16 rows of 64 bytes (16 i32 columns of C)
BLOCK = 2                     # tiles of C per block along each axis: 2 x 2 C, 2 A, 2 B = 8 registers
AHEAD = 8192                  # bytes: a weight panel read once is prefetched 8 of its 1 KB tiles ahead


@dataclass(frozen=True)
class TileShape:
    """A block of accumulator tiles: tm x tn tiles of rows x cols i32, depth bytes of k a step."""
    rows: int                  # of a tile of C and A (16, or fewer where the rows are fewer)
    cols: int                  # i32 columns of a tile of C (16, or N below 16)
    tm: int                    # row tiles of a block
    tn: int                    # column tiles of a block
    depth: int                 # bytes of k a tile of A holds (64, or K below 64)
    sums: DType = DType.i32    # the tiles' type: i32 (int8 operands) or f32 (bf16)


@dataclass(frozen=True)
class TilePlan:
    """How one int8 matmul nest runs on tiles: its loops and operands, and the tile sizes."""
    batch: tuple[For, ...]     # the output's other axes, outermost first
    row: For                   # M: rows of x and y
    lane: For                  # N: columns of w and y
    k: For                     # K: the reduction
    x: Load                    # u8 (bf16) x[.., row, k]
    w: Expr                    # i8 (bf16) w[k, lane], as the nest reads it
    acc: Buffer                # the nest's scalar accumulator
    store: Store               # y[.., row, lane] = epilogue(acc)
    shape: TileShape


# The operand types the tiles multiply (loops.TILE_DOTS): activations x weights.
INT8, BF16 = (DType.u8, DType.i8), (DType.bf16, DType.bf16)


def plan_tiles(f: Function, nest: Stmt, pairs: tuple[tuple[DType, DType], ...] = (INT8,)) -> TilePlan:
    """The TilePlan of ``nest``, or a ScheduleError saying why the tiles cannot take it; ``pairs``:
    the operand types the target's tiles multiply (INT8: amx-int8, BF16: amx-bf16)."""
    found = _scalar_reduction(nest)
    if found is None:
        raise fail(f, "no contraction nest")
    spatial, reduction, store = found
    update = reduction[-1].body
    if len(reduction) != 1 or len(spatial) < 2 or not _is_product_sum(update):
        raise fail(f, "tiles take one reduction loop of products over at least two output axes")
    k, lane, row = reduction[0], spatial[-1], spatial[-2]
    terms = [_narrow(t) for t in (update.value.b.a, update.value.b.b)]
    along_rows = lambda t: isinstance(t[1], Load) and t[1].index[-2:] == (row.var, k.var)    # noqa: E731
    (xt, x), (wt, w) = sorted(terms, key=lambda t: not along_rows(t))      # x: the one read along rows and k
    if (xt, wt) not in pairs or not isinstance(x, Load):
        raise fail(f, f"tiles multiply {' or '.join(f'{a.value} activations by {b.value} weights' for a, b in pairs)}")
    size = xt.numpy.itemsize
    group = 4 // size                           # k side by side in a column of B (a 32-bit lane)
    if not all(t.start == Const(0) for t in (k, lane, row)) or not all(
            isinstance(t.extent, Const) for t in (k, lane)) or k.extent.value % group:
        raise fail(f, f"tiles need a reduction and columns of constant size from 0, K a multiple of {group}")
    names = {t.var.name for t in (k, lane, row)}
    if (x.index[-2:] != (row.var, k.var) or any(free_vars(i) & names for i in x.index[:-2])
            or row.var.name in free_vars(w) or lane.var.name not in free_vars(w)):
        raise fail(f, "tiles read x[.., row, k] and weights that vary along the columns only")
    if store.index[-1] != lane.var or any(lane.var.name in free_vars(i) for i in store.index[:-1]):
        raise fail(f, "the epilogue must store along the columns")
    m, n, depth = row.extent, lane.extent.value, min(BYTES, k.extent.value * size)
    small_m = isinstance(m, Const) and m.value < ROWS
    rows, cols = (m.value if small_m else ROWS), min(n, ROWS)
    tm = BLOCK if not isinstance(m, Const) or m.value >= BLOCK * ROWS else 1
    tn = BLOCK if n >= BLOCK * ROWS else 1
    kc = -(-k.extent.value * size // depth)
    if kc * depth * 4 * tn * cols > PACK_LIMIT:
        raise fail(f, "the weights' panel is too large for the stack")
    return TilePlan(tuple(spatial[:-2]), row, lane, k, x, w, update.buffer, store,
                    TileShape(rows, cols, tm, tn, depth, TILE_DOTS[xt, wt][0]))


def _narrow(e: Expr) -> tuple[DType | None, Expr]:
    """(u8 or i8, v) for ``(i32)v`` of such a v, (bf16, v) for ``(f32)v`` of a bf16 v; (None, e)
    otherwise."""
    if isinstance(e, Cast) and (e.to, e.value.dtype) in ((DType.i32, DType.u8), (DType.i32, DType.i8),
                                                        (DType.f32, DType.bf16)):
        return e.value.dtype, e.value
    return None, e


def _start(block: Var, size: int, extent: Expr, whole: bool) -> Expr:
    """Where block ``block`` of ``size`` starts along an axis of ``extent``: ``block * size``,
    the last one moved back to end at the extent (``whole``: the blocks tile it exactly)."""
    at = BinOp("mul", block, const(size))
    return at if whole else BinOp("min", at, BinOp("sub", extent, const(size)))


def _blocks(extent: Expr, size: int) -> Expr:
    """ceil(extent / size), folded when the extent is known."""
    if isinstance(extent, Const):
        return const(-(-extent.value // size))
    return BinOp("div", BinOp("add", extent, const(size - 1)), const(size))


def tile_nest(p: TilePlan) -> Stmt:
    """The loop nest of the module docstring for plan ``p``."""
    K, N, M = p.k.extent.value, p.lane.extent.value, p.row.extent
    sh, dtype = p.shape, p.x.buffer.dtype
    nc, mr, per = sh.tn * sh.cols, sh.tm * sh.rows, sh.depth // dtype.numpy.itemsize    # per: k a chunk
    nb, mb, kk = Var(p.lane.var.name + "b"), Var(p.row.var.name + "b"), Var(p.k.var.name + "k")
    n0 = _start(nb, nc, p.lane.extent, N % nc == 0)
    m0 = _start(mb, mr, M, isinstance(M, Const) and M.value % mr == 0)
    k0 = _start(kk, per, p.k.extent, K % per == 0)
    panel, fill = pack_panel(K, per, nc, p.w.dtype, lambda k, j: substitute(p.w, {p.k.var.name: k,
                                                                               p.lane.var.name: BinOp("add", n0, j)}))
    group = panel.shape[-1] // nc
    x_at = lambda i: Load(p.x.buffer, p.x.index[:-2] + (BinOp("add", m0, const(i * sh.rows)), k0))  # noqa: E731
    w_at = lambda j: Load(panel, (kk, const(0), const(group * sh.cols * j)))                         # noqa: E731
    block = block_of_sums(sh, x_at, w_at, lambda dots: For(kk, const(0), const(-(-K // per)), ForKind.SERIAL, dots),
                          lambda t: epilogue(p.store, p.acc, t, {p.row.var.name: (m0, mr), p.lane.var.name: (n0, nc)}))
    rows = For(mb, const(0), _blocks(M, mr), ForKind.SERIAL, block)
    nest = For(nb, const(0), const(-(-N // nc)), ForKind.SERIAL, Allocate(panel, seq(fill, rows)))
    for loop in reversed(p.batch):
        nest = replace(loop, body=nest)
    return nest


def pack_panel(K: int, per: int, nc: int, dtype: DType, weight: Callable[[Expr, Expr], Expr]) -> tuple[Buffer, Stmt]:
    """The weights' panel of one column block, as AMX reads B, and the nest that fills it: the g
    k of a 32-bit lane side by side (g = 4 bytes, 2 bf16), ``w_tiles[kk, r, g j + q] = weight(k,
    j)`` at k = k0 + g r + q of chunk kk (``per`` k a chunk, its k0 as ``_start`` places it), zero
    where the chunk before has added that k."""
    g = 4 // dtype.numpy.itemsize
    kchunks = -(-K // per)
    panel = Buffer("w_tiles", (kchunks, per // g, g * nc), dtype, Role.LOCAL)
    r, j, q, kp = Var("r_p"), Var("j_p"), Var("q_p"), Var("kk_p")
    k_at = BinOp("add", _start(kp, per, const(K), K % per == 0), BinOp("add", BinOp("mul", r, const(g)), q))
    value = weight(k_at, j)
    if K % per:
        value = Select(BinOp("ge", k_at, BinOp("mul", kp, const(per))), value, const(0, dtype))
    fill = Store(panel, (kp, r, BinOp("add", BinOp("mul", j, const(g)), q)), value)
    for var, extent in ((q, g), (j, nc), (r, per // g), (kp, kchunks)):
        fill = For(var, const(0), const(extent), ForKind.SERIAL, fill)
    return panel, fill


def block_of_sums(p: TileShape, a_at: Callable[[int], Load], b_at: Callable[[int], Load],
                  reduce: Callable[[Stmt], Stmt], then: Callable[[Buffer], Stmt],
                  ahead: tuple[int, int] = (0, 0)) -> Stmt:
    """One block of tm x tn accumulator tiles: zeroed, the dot products of row tile i
    (``a_at(i)``) and column tile j (``b_at(j)``) in the reduction loops that ``reduce`` puts
    around them, stored once to ``c_sums`` [tm rows, tn cols], and ``then(c_sums)`` (the epilogue).
    ``ahead``: TileDot's prefetch distances, for an operand that is a panel read once (``AHEAD``)."""
    c = Buffer("c_tiles", (p.tm * p.tn, p.rows, p.cols), p.sums, Role.LOCAL)
    t = Buffer("c_sums", (p.tm * p.rows, p.tn * p.cols), p.sums, Role.LOCAL)
    tiles = [(i, jj, Load(c, (const(i * p.tn + jj), const(0), const(0)))) for i in range(p.tm) for jj in range(p.tn)]
    zero = [TileZero(tile, p.rows, p.cols) for _, _, tile in tiles]
    dots = [TileDot(tile, a_at(i), b_at(jj), p.rows, p.cols, p.depth, ahead) for i, jj, tile in tiles]
    out = [TileStore(Load(t, (const(i * p.rows), const(jj * p.cols))), tile, p.rows, p.cols) for i, jj, tile in tiles]
    return Allocate(c, Allocate(t, seq(*zero, reduce(seq(*dots)), *out, then(t))))


def epilogue(store: Store, acc: Buffer, sums: Buffer, blocks: dict[str, tuple[Expr, int]]) -> Stmt:
    """The nest's final store for every output of a block, its accumulator read from ``sums``
    [rows, cols]: ``blocks`` maps the names of the loops of the tiles' rows and of their columns
    (the one the output is contiguous along: vector lanes) to (first, size) of the block."""
    (row, (m0, mr)), (lane, (n0, nc)) = blocks.items()
    ri, li = Var(row + "i"), Var(lane + "i")
    st = stored(store, acc, {row: BinOp("add", m0, ri), lane: BinOp("add", n0, li)}, Load(sums, (ri, li)))
    return For(ri, const(0), const(mr), ForKind.SERIAL, For(li, const(0), const(nc), ForKind.VECTORIZED, st))


def stored(store: Store, acc: Buffer, at: dict[str, Expr], result: Load) -> Store:
    """The nest's final store with its loop variables at ``at`` and its accumulator read from
    ``result`` (the block's sums)."""
    value = map_expr(substitute(store.value, at), lambda e: result if isinstance(e, Load) and e.buffer == acc else None)
    return Store(store.buffer, tuple(substitute(e, at) for e in store.index), value)


def first_contraction(f: Function) -> tuple[Function, list[Stmt], int]:
    """``f`` with its loops named apart, its statements, and which of them is its first
    contraction nest; a ScheduleError where it has none."""
    f = unique_loops(f)
    if find_contraction(f) is None:
        raise fail(f, "no contraction nest")
    body = list(stmts_of(f.body))
    return f, body, next(i for i, s in enumerate(body) if _scalar_reduction(s) is not None
                         and find_contraction(replace(f, body=s)) is not None)


def schedule_tiles(f: Function, threads: int, otherwise: Callable[[Function], Function],
                   pairs: tuple[tuple[DType, DType], ...] = (INT8,)) -> Function:
    """``f``'s first contraction nest on AMX tiles (the module docstring), or a ScheduleError;
    ``pairs``: the operand types the target's tiles multiply.  Where the row count is known only
    at run time, rows too few for a block run ``otherwise``'s schedule of the nest (the template's)."""
    f, body, at = first_contraction(f)
    nest = body[at]
    p = plan_tiles(f, nest, pairs)
    tiled = _parallel(tile_nest(p), p, threads)
    if not isinstance(p.row.extent, Const):
        try:
            plain = otherwise(replace(f, body=nest)).body
        except ScheduleError:
            plain = nest
        # the two branches' loops named apart: a later step names a loop to rewrite it
        tiled = If(BinOp("ge", p.row.extent, const(p.shape.tm * p.shape.rows)), rename_loops(tiled, "_t"), plain)
    body[at] = tiled
    return replace(f, body=seq(*body))


def _parallel(nest: Stmt, p: TilePlan, threads: int) -> Stmt:
    """The first loop of the batch axes and the column blocks with a block for every thread
    parallel (else the column blocks), as the VNNI template chooses."""
    if threads < 2:
        return nest
    band, _ = perfect_band(nest)
    pick = next((t for t in band if isinstance(t.extent, Const) and t.extent.value >= threads), band[-1])

    def mark(s: Stmt) -> Stmt:
        if s is pick:
            return replace(s, kind=ForKind.PARALLEL)
        return replace(s, body=mark(s.body)) if isinstance(s, For) else s
    return mark(nest)
