"""The Loop IR verifier: every variable defined, every buffer known, types that
agree, and constant indices inside their buffer.  Messages name the kernel."""
from __future__ import annotations

from minic.errors import UserError
from minic.ir.loops import (BINOPS, CALLS, COMPARE_OPS, LOGIC_OPS, STATUS, Allocate, BinOp, BitCast, Buffer, Call,
                            Cast, Const, Expr, For, Function, If, Load, Program, Role, Select, Seq, Stmt, Store,
                            TILE_DOTS, TileDot, TileStore, TileZero, Var, expr_str, stmt_exprs, sub_stmts, walk)
from minic.ir.types import DType


class LoopVerifyError(UserError):
    """A Loop IR function breaks an invariant."""


def _check_index(where: str, buffer: Buffer, index: tuple[Expr, ...], buffers: dict[str, Buffer]) -> None:
    if buffer.name not in buffers:
        raise LoopVerifyError(f"{where}: buffer '{buffer.name}' is neither a parameter nor allocated")
    if buffers[buffer.name] != buffer:
        raise LoopVerifyError(f"{where}: buffer '{buffer.name}' is used with another type than declared")
    if len(index) != len(buffer.shape):
        raise LoopVerifyError(f"{where}: {buffer.name} has rank {len(buffer.shape)}, indexed with {len(index)}")
    for axis, (i, d) in enumerate(zip(index, buffer.shape)):
        if i.dtype not in (DType.i64, DType.i32):
            raise LoopVerifyError(f"{where}: index {expr_str(i)} of {buffer.name} is {i.dtype.value}, not an integer")
        if isinstance(i, Const) and (i.value < 0 or (isinstance(d, int) and i.value >= d)):
            raise LoopVerifyError(f"{where}: constant index {i.value} is out of bounds of {buffer.name} axis {axis} ({d})")


def _check_expr(where: str, e: Expr, scope: set[str], buffers: dict[str, Buffer]) -> None:
    for x in walk(e):
        if isinstance(x, Var):
            if x.name not in scope:
                raise LoopVerifyError(f"{where}: variable '{x.name}' is not defined here")
        elif isinstance(x, BinOp):
            if x.op not in BINOPS:
                raise LoopVerifyError(f"{where}: unknown binary op {x.op}")
            if x.a.dtype != x.b.dtype:
                raise LoopVerifyError(f"{where}: {expr_str(x)} mixes {x.a.dtype.value} and {x.b.dtype.value}")
            if x.op in LOGIC_OPS and not (x.a.dtype == DType.bool or x.a.dtype.is_int):
                raise LoopVerifyError(f"{where}: {x.op} needs bool or integer operands in {expr_str(x)}")
            if x.op not in COMPARE_OPS and x.op not in LOGIC_OPS and x.a.dtype == DType.bool:
                raise LoopVerifyError(f"{where}: arithmetic on bool in {expr_str(x)}")
        elif isinstance(x, Load):
            _check_index(where, x.buffer, x.index, buffers)
        elif isinstance(x, Call):
            if x.fn not in CALLS or len(x.args) != (2 if x.fn == "pow" else 1):
                raise LoopVerifyError(f"{where}: unknown call {x.fn}/{len(x.args)}")
            if x.fn not in ("neg", "abs", "pow") and not x.dtype.is_float:
                raise LoopVerifyError(f"{where}: {x.fn} needs a float argument in {expr_str(x)}")
        elif isinstance(x, Select):
            if x.cond.dtype != DType.bool or x.a.dtype != x.b.dtype:
                raise LoopVerifyError(f"{where}: bad select {expr_str(x)}")
        elif isinstance(x, BitCast):
            if x.to.numpy.itemsize != x.value.dtype.numpy.itemsize:
                raise LoopVerifyError(f"{where}: {expr_str(x)} changes the width "
                                      f"({x.value.dtype.value} to {x.to.value})")
        elif not isinstance(x, (Const, Cast)):
            raise LoopVerifyError(f"{where}: {type(x).__name__} is not a Loop IR expression")


def _check_stmt(where: str, s: Stmt, scope: set[str], buffers: dict[str, Buffer]) -> None:
    """The statement's own invariants, then its expressions, then the statements nested in it
    (a loop's body sees its variable, an Allocate's body its buffer)."""
    inner_scope, inner_buffers = scope, buffers
    if isinstance(s, For):
        if s.var.name in scope:
            raise LoopVerifyError(f"{where}: loop variable '{s.var.name}' shadows another")
        for e in (s.start, s.extent):
            if e.dtype != DType.i64:
                raise LoopVerifyError(f"{where}: loop bound {expr_str(e)} is not i64")
        inner_scope = scope | {s.var.name}
    elif isinstance(s, Store):
        _check_index(where, s.buffer, s.index, buffers)
        if s.buffer.role in (Role.INPUT, Role.CONST):
            raise LoopVerifyError(f"{where}: stores into {s.buffer.role.value} buffer {s.buffer.name}")
        if s.value.dtype != s.buffer.dtype:
            raise LoopVerifyError(f"{where}: stores {s.value.dtype.value} into {s.buffer.dtype.value} buffer {s.buffer.name}")
    elif isinstance(s, Allocate):
        if s.buffer.name in buffers:
            raise LoopVerifyError(f"{where}: buffer '{s.buffer.name}' is allocated twice")
        if s.buffer.role != Role.LOCAL or not all(isinstance(d, int) for d in s.buffer.shape):
            raise LoopVerifyError(f"{where}: allocated buffer {s.buffer.name} must be LOCAL with a constant shape")
        inner_buffers = {**buffers, s.buffer.name: s.buffer}
    elif isinstance(s, If):
        if s.cond.dtype != DType.bool:
            raise LoopVerifyError(f"{where}: if condition {expr_str(s.cond)} is not bool")
    elif isinstance(s, (TileDot, TileZero, TileStore)):
        _check_tile(where, s)
    elif not isinstance(s, Seq):
        raise LoopVerifyError(f"{where}: {type(s).__name__} is not a Loop IR statement")
    for e in stmt_exprs(s):
        _check_expr(where, e, scope, buffers)
    for t in sub_stmts(s):
        _check_stmt(where, t, inner_scope, inner_buffers)


# A tile: at most 16 rows of 64 bytes (Intel AMX); what each operand of a tile statement holds.
TILE_ROWS, TILE_BYTES = 16, 64


def _check_tile(where: str, s: TileDot | TileZero | TileStore) -> None:
    """A tile statement's shapes and types (loops.TileDot): the accumulator a whole [rows, cols]
    block of a LOCAL i32 or f32 buffer; the operands windows of at least two axes, of a pair of
    types TILE_DOTS lists (a TileStore's of the tile's type)."""
    what = type(s).__name__
    t = s.tile.buffer
    if not (1 <= s.rows <= TILE_ROWS and 1 <= s.cols <= TILE_BYTES // 4):
        raise LoopVerifyError(f"{where}: {what} of {s.rows}x{s.cols}: a tile holds at most 16 rows of 16 lanes")
    if t.role != Role.LOCAL or t.dtype not in (DType.i32, DType.f32) or tuple(t.shape[-2:]) != (s.rows, s.cols) \
            or any(not (isinstance(i, Const) and i.value == 0) for i in s.tile.index[-2:]):
        raise LoopVerifyError(f"{where}: {what}'s tile must be a whole [{s.rows}, {s.cols}] block of a "
                              f"LOCAL i32 or f32 buffer, not {t.name}")
    if isinstance(s, TileDot):
        pair = (s.a.buffer.dtype, s.b.buffer.dtype)
        if TILE_DOTS.get(pair, (None,))[0] != t.dtype:
            known = ", ".join(f"{a.value} · {b.value} into {c.value}" for (a, b), (c, _) in TILE_DOTS.items())
            raise LoopVerifyError(f"{where}: TileDot of {pair[0].value} · {pair[1].value} into {t.dtype.value}: "
                                  f"the tiles multiply {known}")
        if not (4 <= s.depth <= TILE_BYTES and s.depth % 4 == 0):
            raise LoopVerifyError(f"{where}: TileDot of depth {s.depth}: a multiple of 4 up to 64 bytes")
    operands = [s.a, s.b] if isinstance(s, TileDot) else [s.out] if isinstance(s, TileStore) else []
    for x in operands:
        if len(x.buffer.shape) < 2 or (isinstance(s, TileStore) and x.buffer.dtype != t.dtype):
            raise LoopVerifyError(f"{where}: {what} reads or writes {x.buffer.name} as rows of {t.dtype.value}, "
                                  f"it is {x.buffer.dtype.value}[{', '.join(map(str, x.buffer.shape))}]")
    if isinstance(s, TileStore) and s.out.buffer.role in (Role.INPUT, Role.CONST):
        raise LoopVerifyError(f"{where}: stores into {s.out.buffer.role.value} buffer {s.out.buffer.name}")


def verify_function(f: Function) -> Function:
    """Raise LoopVerifyError on the first broken invariant; return ``f``."""
    buffers = {b.name: b for b in f.params}
    if len(buffers) != len(f.params) or STATUS.name in buffers:
        raise LoopVerifyError(f"kernel {f.name}: two parameters share a name")
    buffers[STATUS.name] = STATUS                   # the status word: a global of the module, no parameter
    _check_stmt(f"kernel {f.name}", f.body, set(f.sizes), buffers)
    return f


def verify_program(p: Program) -> Program:
    for k in p.kernels:
        verify_function(k)
        for b in k.params:
            if p.buffers.get(b.name) != b:
                raise LoopVerifyError(f"kernel {k.name}: parameter {b.name} is not a buffer of program {p.name}")
    return p
