"""Mixed precision in Loop IR: f16 and bf16 in memory, f32 in registers.

After the ``to-f16`` pass, a Program's float buffers are f16 (after ``to-bf16``,
bf16).  Most CPUs have no f16 arithmetic (x86 before AVX512-FP16 has none), but they convert fast
(F16C's vcvtph2ps / vcvtps2ph), and f32 arithmetic is what f16 means in the op
registry (``minic.ir.ops.via_f32``).  So a kernel widens what it loads,
computes in f32 and narrows only what it stores:

    y[i] = x[i] * w[i] + b[i]                          (x, w, b, y: f16)
 -> y[i] = (f16)((f32)x[i] * (f32)w[i] + (f32)b[i])

Accumulators (the LOCAL buffers of reductions) are f32 as well, unless
``accumulate`` is f16 ("f16-acc"): then an accumulator is f16 storage like any
other buffer, and the running sum is rounded to f16 after every addition:

    acc = acc + (f32)a[i, k] * (f32)b[k, j]            accumulate = f32
    acc = (f16)((f32)acc + (f32)a[i, k] * (f32)b[k, j])   accumulate = f16

bf16 (the values ``to-bf16`` made, or a graph's own bf16 tensors) goes the same
way, and its accumulators are always f32, as in PyTorch.  A kernel without f16
or bf16 comes back unchanged.

``MODES`` says what each ``CompileOptions.precision`` is in these two terms: the
type floats are stored in between kernels (the graph pass) and the type of the
accumulators (``widen``).
"""
from __future__ import annotations

from dataclasses import replace

from minic.ir.loops import (Allocate, Buffer, Cast, Const, Expr, Function, Load, Program, Role, Stmt, Store,
                            map_expr, map_stmt, stmt_exprs, walk, walk_stmts)
from minic.ir.types import DType


# precision -> (the storage type of a graph's floats, the accumulators' type); docs/f16.md
MODES: dict[str, tuple[DType, DType]] = {
    "f32": (DType.f32, DType.f32),
    "f16": (DType.f16, DType.f32),
    "f16-acc": (DType.f16, DType.f16),        # every partial sum rounded to f16
    "bf16": (DType.bf16, DType.f32),
}


class _Widen:
    """The rewrite of one kernel; ``locals`` maps accumulator names to their new buffers."""

    def __init__(self, accumulate: DType) -> None:
        self.accumulate = accumulate
        self.locals: dict[str, Buffer] = {}

    def buffer(self, b: Buffer) -> Buffer:
        return self.locals.get(b.name, b) if b.role == Role.LOCAL else b

    def expr(self, e: Expr) -> Expr:
        return map_expr(e, self._node)

    def _node(self, e: Expr) -> Expr | None:
        if isinstance(e, Load):
            b = self.buffer(e.buffer)
            load = Load(b, e.index) if b is not e.buffer else e
            return Cast(DType.f32, load) if b.dtype.is_storage_float else load
        if isinstance(e, Const) and e.dtype.is_storage_float:
            return Const(e.value, DType.f32)
        if isinstance(e, Cast) and e.to.is_storage_float:
            # Rounding to f16 is what the graph's cast means; the result is used in f32.
            return Cast(DType.f32, e)
        if isinstance(e, Cast) and e.value.dtype == e.to:
            return e.value                       # (f32) of what is f32 already
        return None

    def stmt(self, s: Stmt) -> Stmt:
        if isinstance(s, Store):
            s = map_stmt(s, self.expr, self.stmt)              # its index and value rewritten
            b = self.buffer(s.buffer)
            return Store(b, s.index, Cast(b.dtype, s.value) if b.dtype.is_storage_float else s.value)
        if isinstance(s, Allocate):
            b = s.buffer
            if b.dtype == DType.bf16 or (b.dtype == DType.f16 and self.accumulate == DType.f32):
                b = self.locals[b.name] = replace(b, dtype=DType.f32)
            return Allocate(b, self.stmt(s.body))
        return map_stmt(s, self.expr, self.stmt)


def _has_f16(k: Function) -> bool:
    """Whether the kernel touches f16 or bf16."""
    return (any(b.dtype.is_storage_float for b in k.params)
            or any(x.dtype.is_storage_float for s in walk_stmts(k.body) for e in stmt_exprs(s) for x in walk(e)))


def widen(program: Program, accumulate: DType = DType.f32) -> Program:
    """Each kernel with f16 (bf16) loads widened, arithmetic in f32, stores narrowed;
    accumulators in ``accumulate`` (f32, or f16 to round every partial sum)."""
    if accumulate not in (DType.f32, DType.f16):
        raise ValueError(f"accumulate must be f32 or f16, got {accumulate.value}")
    kernels = [replace(k, body=_Widen(accumulate).stmt(k.body)) if _has_f16(k) else k for k in program.kernels]
    return replace(program, kernels=kernels)
