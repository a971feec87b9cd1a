"""The reference interpreter of the Loop IR: slow, obvious, and bounds-checked.

It runs one ``Function`` on numpy arrays, or a whole ``Program``, one scalar at a
time.  Every kernel that codegen compiles can be checked against it on small
shapes, and every schedule against the unscheduled loops.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from minic.errors import UserError
from minic.ir.graph import Value
from minic.ir.interpret import bind_symbols
from minic.ir.loops import (BINOPS, CALLS, STATUS, Allocate, data_error, BinOp, BitCast, Buffer, Call, Cast, Const,
                            Expr, For, Function, If, Load, Program, Role, Select, Seq, Stmt, Store, TileDot, TileStore,
                            TileZero, Var, bitcast_value)
from minic.ir.types import DType, TensorType, dim_eval


class Interpreter:
    """State of one kernel run: symbol values, loop variables, buffer memory."""

    def __init__(self, sizes: dict[str, int], memory: dict[str, np.ndarray]) -> None:
        self.env: dict[str, object] = {k: np.int64(v) for k, v in sizes.items()}
        self.sizes = sizes
        self.memory = memory          # buffer name -> array of the buffer's shape
        memory.setdefault(STATUS.name, np.zeros(2, np.int64))     # where data checks report

    def offset(self, buffer: Buffer, index: tuple[Expr, ...]) -> tuple[int, ...]:
        where = tuple(int(self.eval(i)) for i in index)
        shape = tuple(dim_eval(d, self.sizes) for d in buffer.shape)
        if len(where) != len(shape) or any(not 0 <= i < n for i, n in zip(where, shape)):
            raise IndexError(f"{buffer.name}{list(where)} is out of bounds of shape {list(shape)}")
        return where

    def window(self, first: Load, rows: int, cols: int) -> np.ndarray:
        """The rows x cols block of memory a tile operand names (its element (0, 0): ``first``;
        rows along the second-last axis), as a view."""
        where = self.offset(first.buffer, first.index)
        self.offset(first.buffer, tuple(Const(i) for i in where[:-2]) + (Const(where[-2] + rows - 1),
                                                                           Const(where[-1] + cols - 1)))
        return self.memory[first.buffer.name][where[:-2] + (slice(where[-2], where[-2] + rows),
                                                            slice(where[-1], where[-1] + cols))]

    def eval(self, e: Expr):
        with np.errstate(all="ignore"):      # inf and nan are values, as in the compiled code
            return self._eval(e)

    def _eval(self, e: Expr):
        if isinstance(e, Var):
            return self.env[e.name]
        if isinstance(e, Const):
            return e.dtype.numpy.type(e.value)
        if isinstance(e, BinOp):
            return e.dtype.numpy.type(BINOPS[e.op](self._eval(e.a), self._eval(e.b)))
        if isinstance(e, Load):
            return self.memory[e.buffer.name][self.offset(e.buffer, e.index)]
        if isinstance(e, Call):
            return e.dtype.numpy.type(CALLS[e.fn](*(self._eval(a) for a in e.args)))
        if isinstance(e, Select):
            return self._eval(e.a) if self._eval(e.cond) else self._eval(e.b)
        if isinstance(e, Cast):
            v = self._eval(e.value)
            if e.to == DType.bool:
                return np.bool_(v != 0)
            if not e.to.is_float and e.value.dtype.is_float:
                v = math.trunc(float(v)) if math.isfinite(v) else 0
            return e.to.numpy.type(v)
        if isinstance(e, BitCast):
            return bitcast_value(self._eval(e.value), e.to)
        raise TypeError(f"not a Loop IR expression: {e!r}")

    def run(self, s: Stmt) -> None:
        if isinstance(s, For):
            start, extent = int(self.eval(s.start)), int(self.eval(s.extent))
            for i in range(start, start + extent):
                self.env[s.var.name] = np.int64(i)
                self.run(s.body)
            self.env.pop(s.var.name, None)
        elif isinstance(s, Store):
            where = self.offset(s.buffer, s.index)
            self.memory[s.buffer.name][where] = self.eval(s.value)
        elif isinstance(s, Allocate):
            shape = tuple(dim_eval(d, self.sizes) for d in s.buffer.shape)
            self.memory[s.buffer.name] = np.zeros(shape, s.buffer.dtype.numpy)
            self.run(s.body)
            del self.memory[s.buffer.name]
        elif isinstance(s, If):
            if self.eval(s.cond):
                self.run(s.then)
            elif s.otherwise is not None:
                self.run(s.otherwise)
        elif isinstance(s, Seq):
            for t in s.stmts:
                self.run(t)
        elif isinstance(s, TileZero):
            self.window(s.tile, s.rows, s.cols)[...] = 0
        elif isinstance(s, TileStore):
            self.window(s.out, s.rows, s.cols)[...] = self.window(s.tile, s.rows, s.cols)
        elif isinstance(s, TileDot):
            size = s.a.buffer.dtype.numpy.itemsize
            g, k = 4 // size, s.depth // size                   # k side by side in b; k in all
            wide = np.float32 if s.a.buffer.dtype.is_float else np.int64
            a = self.window(s.a, s.rows, k).astype(wide)
            b = self.window(s.b, s.depth // 4, g * s.cols).astype(wide)
            b = b.reshape(s.depth // 4, s.cols, g).transpose(0, 2, 1).reshape(k, s.cols)   # b[k, j]
            tile = self.window(s.tile, s.rows, s.cols)
            tile[...] = (tile + a @ b).astype(tile.dtype)      # i32 wraps around, as the instruction does
        else:
            raise TypeError(f"not a Loop IR statement: {s!r}")


def run_function(f: Function, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> None:
    """Run kernel ``f``; ``arrays`` maps each parameter's name to its array (outputs are written)."""
    Interpreter(sizes, arrays).run(f.body)


def run_program(p: Program, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run every kernel of ``p`` in order on fresh buffers; return the outputs."""
    arrays = [np.asarray(a, order="C") for a in inputs]
    sizes = bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in p.inputs], arrays)
    memory = {b.name: a for b, a in zip(p.inputs, arrays)}
    memory.update(p.constants)
    for b in p.buffers.values():
        if b.role in (Role.TEMP, Role.OUTPUT) and b.name not in memory:
            memory[b.name] = np.zeros(tuple(dim_eval(d, sizes) for d in b.shape), b.dtype.numpy)
    for k in p.kernels:
        missing = [b.name for b in k.params if b.name not in memory]
        if missing:
            raise UserError(f"kernel {k.name} uses unknown buffers {missing}")
        run_function(k, memory, sizes)
        status = memory[STATUS.name]
        if status[0]:
            raise data_error(p.name, p.checks, int(status[0]), int(status[1]))
    return [memory[b.name] for b in p.outputs]
