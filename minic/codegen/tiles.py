"""Tile statements (loops.TileDot, TileZero, TileStore) -> Intel AMX through LLVM's intrinsics.

LLVM 22 spells the tile instructions as ``.internal`` intrinsics on values of type
``x86_amx``, each with its tile's shape (rows, bytes a row) as i16 operands:

    x86_amx @llvm.x86.tileloadd64.internal(i16 rows, i16 bytes, ptr, i64 stride)
    x86_amx @llvm.x86.tdpbusd.internal(i16 m, i16 n bytes, i16 k bytes, x86_amx c, x86_amx a, x86_amx b)
    (tdpbsud and tdpbf16ps alike: the operands' types pick one, loops.TILE_DOTS)
    void @llvm.x86.tilestored64.internal(i16 rows, i16 bytes, ptr, i64 stride, x86_amx)

From those shapes LLVM's X86 pre-tile-config pass writes the tile configuration itself
(one ``ldtilecfg`` at function entry, ``tilerelease`` at exit).  A tile accumulator is a
local i32 (or f32) buffer [rows, cols] (an ``alloca``) read and written whole as a vector and cast to
and from ``x86_amx``: LLVM promotes the alloca, turns the casts around the reduction loop's
phi into a phi of tiles, and the accumulator never leaves its tile register (``tilezero``
before the loop, ``tdpbusd`` in it, ``tilestored`` after).  Operands in memory (activations,
the packed weights) are loaded with their row stride.
"""
from __future__ import annotations

from llvmlite import ir

from minic.codegen.emit import F32, I8, I16, I32, I64, PTR, VOID, Emitter, declare, type_suffix
from minic.ir.loops import TILE_DOTS, Load, Stmt, TileDot, TileStore, TileZero, dim_expr


class AMXType(ir.Type):
    """LLVM's ``x86_amx`` (a tile register's value), which llvmlite's IR builder lacks."""

    def _to_string(self) -> str:
        return "x86_amx"

    def __eq__(self, other) -> bool:
        return isinstance(other, AMXType)

    def __hash__(self) -> int:
        return hash(AMXType)


AMX = AMXType()


def _shape(rows: int, row_bytes: int) -> list[ir.Constant]:
    return [ir.Constant(I16, rows), ir.Constant(I16, row_bytes)]


def _stride(e: Emitter, first: Load) -> ir.Value:
    """Bytes from one row of a tile operand to the next: its buffer's last axis."""
    return e.b.mul(e.expr(dim_expr(first.buffer.shape[-1])), ir.Constant(I64, first.buffer.dtype.numpy.itemsize))


def _vector(first: Load, rows: int, cols: int) -> ir.VectorType:
    """The accumulator at ``first`` as one LLVM vector (i32 or f32 lanes, as its buffer)."""
    return ir.VectorType(F32 if first.buffer.dtype.is_float else I32, rows * cols)


def _tile(e: Emitter, first: Load, rows: int, cols: int) -> ir.Value:
    """The accumulator tile at ``first`` (a whole [rows, cols] block), as an x86_amx value."""
    vec = _vector(first, rows, cols)
    cast = declare(e.module, f"llvm.x86.cast.vector.to.tile.{type_suffix(vec)}", AMX, [vec])
    return e.b.call(cast, [e.b.load(e.address(first.buffer, first.index), typ=vec, align=4)])


def _keep(e: Emitter, first: Load, rows: int, cols: int, tile: ir.Value) -> None:
    """``tile`` written back to the accumulator at ``first``."""
    vec = _vector(first, rows, cols)
    cast = declare(e.module, f"llvm.x86.cast.tile.to.vector.{type_suffix(vec)}", vec, [AMX])
    ptr = e.b.bitcast(e.address(first.buffer, first.index), ir.PointerType(vec))   # typed for llvmlite's check
    e.b.store(e.b.call(cast, [tile]), ptr, align=4)


def _load(e: Emitter, first: Load, rows: int, row_bytes: int, ahead: int = 0) -> ir.Value:
    """An operand tile from memory; the one loaded before in this block where it is the same
    (LLVM does not merge two loads of a tile: 2 x 2 dot products would load 8 tiles, not 4).
    ``ahead``: bytes past each of its rows to prefetch into L2 (``llvm.prefetch``, prefetcht1)."""
    key = (first.index, rows, row_bytes)
    block, tile = e.tile_loads.get(first.buffer.name, {}).get(key, (None, None))
    if block is e.b.block:
        return tile
    load = declare(e.module, "llvm.x86.tileloadd64.internal", AMX, [I16, I16, PTR, I64])
    address, stride = e.address(first.buffer, first.index), _stride(e, first)
    if ahead:
        prefetch = declare(e.module, "llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
        later = e.b.gep(address, [ir.Constant(I64, ahead)], source_etype=I8)
        for r in range(rows):                # read, locality 2 (L2), data
            for line in range(0, row_bytes, 64):
                at = e.b.add(e.b.mul(ir.Constant(I64, r), stride), ir.Constant(I64, line))
                e.b.call(prefetch, [e.b.gep(later, [at], source_etype=I8)] + [ir.Constant(I32, v) for v in (0, 2, 1)])
    tile = e.b.call(load, _shape(rows, row_bytes) + [address, stride])
    e.tile_loads.setdefault(first.buffer.name, {})[key] = (e.b.block, tile)
    return tile


def emit_tile(e: Emitter, s: Stmt) -> None:
    """One tile statement into the Emitter's current block."""
    b = e.b
    if isinstance(s, TileZero):
        zero = declare(e.module, "llvm.x86.tilezero.internal", AMX, [I16, I16])
        _keep(e, s.tile, s.rows, s.cols, b.call(zero, _shape(s.rows, 4 * s.cols)))
    elif isinstance(s, TileDot):
        _, name = TILE_DOTS[s.a.buffer.dtype, s.b.buffer.dtype]
        dot = declare(e.module, f"llvm.x86.{name}.internal", AMX, [I16, I16, I16, AMX, AMX, AMX])
        c = _tile(e, s.tile, s.rows, s.cols)
        a, w = _load(e, s.a, s.rows, s.depth, s.ahead[0]), _load(e, s.b, s.depth // 4, 4 * s.cols, s.ahead[1])
        shape = _shape(s.rows, 4 * s.cols) + [ir.Constant(I16, s.depth)]
        _keep(e, s.tile, s.rows, s.cols, b.call(dot, shape + [c, a, w]))
    elif isinstance(s, TileStore):
        store = declare(e.module, "llvm.x86.tilestored64.internal", VOID, [I16, I16, PTR, I64, AMX])
        tile = _tile(e, s.tile, s.rows, s.cols)
        e.tile_loads.pop(s.out.buffer.name, None)
        b.call(store, _shape(s.rows, 4 * s.cols) + [e.address(s.out.buffer, s.out.index), _stride(e, s.out), tile])
    else:
        raise TypeError(f"not a tile statement: {s!r}")
