"""Loop IR -> LLVM IR for one function, with llvmlite's IRBuilder (opaque pointers).

Buffers arrive as pointers; a multi-dimensional index is flattened row-major
(``((i0 * d1 + i1) * d2 + i2)``) with the dims computed from the size
arguments, so one kernel serves every value of ``B`` and ``T``.  Registers hold
bool as ``i1``, memory as ``i8`` (numpy's bool is one byte).  Local buffers are
``alloca``s in the entry block, which LLVM promotes to registers.

Loop kinds: serial loops are the classic header/body/latch blocks; unrolled
loops with a constant extent are copied out; parallel loops go to
``parallel.py``; vectorized loops (constant extent, straight-line stores) to
``vector.py``, which emits LLVM vector types.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir

from minic.errors import UnsupportedError
from minic.ir.aligned import ALIGN
from minic.ir.loops import (Allocate, BinOp, BitCast, Buffer, Call, Cast, Const, Expr, For, ForKind, If, Load,
                            Select, Seq, Stmt, Store, TILE_STMTS, Var, dim_expr, map_expr)
from minic.ir.loops_analysis import clamped, clamped_cast, constant_operand
from minic.ir.types import DType


class BFloatType(ir.types._BaseFloatType):
    """LLVM's ``bfloat``, which llvmlite's IR builder lacks: ``fptrunc``'s target, vdpbf16ps' operands."""
    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"


BFloatType._create_instance()
I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32, F64, BF16 = ir.HalfType(), ir.FloatType(), ir.DoubleType(), BFloatType()
PTR = ir.PointerType()
VOID = ir.VoidType()

# A value in registers: an integer of its dtype's bits (signed or not: that is in the instructions) but
# for floats.  bf16 is carried as its 16 bits (LLVM's bfloat only in AVX512-BF16's instructions);
# after ``widen`` the only things done to one are loads, stores and casts to and from f32.
REG_TYPE = {DType.f64: F64, DType.f32: F32, DType.f16: F16, DType.bf16: I16} | {
    d: ir.IntType(d.bits) for d in DType if not d.is_float}
MEM_TYPE = REG_TYPE | {DType.bool: I8}          # numpy's bool is one byte


def type_suffix(ty: ir.Type) -> str:
    """The type's part of an overloaded intrinsic's name: f32, f16, f64, i8, v8f32 ..."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{type_suffix(ty.element)}"
    return {F16: "f16", F32: "f32", F64: "f64"}.get(ty) or f"i{ty.width}"


def element(b: ir.IRBuilder, array: ir.Value, k: int | ir.Value, ty: ir.Type) -> ir.Value:
    """The address of ``array[k]``, ``array`` pointing at values of type ``ty``."""
    return b.gep(array, [ir.Constant(I64, k) if isinstance(k, int) else k], inbounds=True, source_etype=ty)


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The module's function ``name`` (an intrinsic, libm or libc), declared on first use."""
    return module.globals.get(name) or ir.Function(module, ir.FunctionType(ret, args), name)


def define(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type],
           internal: bool = True) -> tuple[ir.Function, ir.IRBuilder]:
    """A new function ``ret name(args)`` (internal: not seen outside the module) and a
    builder in its entry block."""
    fn = ir.Function(module, ir.FunctionType(ret, args), name)
    if internal:
        fn.linkage = "internal"
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def loop_head(b: ir.IRBuilder, name: str) -> ir.Block:
    """A new block ``name``, branched to and the builder in it: a loop's head (branch back to it later)."""
    head = b.function.append_basic_block(name)
    b.branch(head)
    b.position_at_end(head)
    return head


# Float functions: an LLVM intrinsic where one exists (llvm.<name> but for abs and round), else the C library.
INTRINSICS = {"abs": "llvm.fabs", "round": "llvm.roundeven"} | {
    fn: f"llvm.{fn}" for fn in ("exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "floor", "ceil", "pow")}
LIBM = {fn: {F32: fn + "f", F64: fn} for fn in ("erf", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")}
FCMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class Emitter:
    """Emits the statements of one LLVM function, ``void name(args)`` (internal).

    ``ptrs`` maps buffer names to base pointers, ``vars`` maps sizes and loop
    variables to i64 values.  ``threads`` is 1 inside an outlined parallel body:
    nested parallel loops run serially.  ``bf16_convert``: the target has AVX512-BF16's
    conversions and bf16 dot products (``minic.options.converts_bf16``); ``dots_u8s8``:
    AVX512-VNNI's u8 × s8 dot products (``minic.options.dots_u8s8``).
    """

    def __init__(self, module: ir.Module, name: str, args: list[ir.Type], threads: int,
                 bf16_convert: bool = False, dots_u8s8: bool = False) -> None:
        self.module = module
        self.function, self.allocas = define(module, name, VOID, args)
        self.threads = threads
        self.bf16_convert = bf16_convert
        self.dots_u8s8 = dots_u8s8
        self.b = ir.IRBuilder(self.function.append_basic_block("body"))
        self.allocas.position_before(self.allocas.branch(self.b.block))    # allocas: first in the entry block
        self.ptrs: dict[str, ir.Value] = {}
        self.vars: dict[str, ir.Value] = {}
        self.columns: dict[str, tuple[ir.Block, list[ir.Value]]] = {}   # vector.py: a local tile, transposed
        self.tile_loads: dict[str, dict[tuple, tuple[ir.Block, ir.Value]]] = {}    # tiles.py: an operand loaded
        self.outlined = 0

    # --- expressions -----------------------------------------------------------

    def intrinsic(self, name: str, ty: ir.Type) -> ir.Function:
        """LLVM's intrinsic ``name`` on values of type ``ty`` (a scalar, or a vector: vector.py)."""
        arity = 2 if name in ("llvm.maximum", "llvm.minimum", "llvm.pow") else 1
        return declare(self.module, f"{name}.{type_suffix(ty)}", ty, [ty] * arity)

    def address(self, buffer: Buffer, index: tuple[Expr, ...]) -> ir.Value:
        base = self.ptrs[buffer.name]
        if not index:
            return base
        flat = self.expr(index[0])
        for i, d in zip(index[1:], buffer.shape[1:]):
            flat = self.b.add(self.b.mul(flat, self.expr(dim_expr(d)), flags=["nsw"]), self.expr(i), flags=["nsw"])
        return element(self.b, base, flat, MEM_TYPE[buffer.dtype])

    def load(self, buffer: Buffer, index: tuple[Expr, ...]) -> ir.Value:
        value = self.b.load(self.address(buffer, index), typ=MEM_TYPE[buffer.dtype])
        return self.b.trunc(value, I1) if buffer.dtype == DType.bool else value

    def store(self, buffer: Buffer, index: tuple[Expr, ...], value: ir.Value) -> None:
        if buffer.dtype == DType.bool:
            value = self.b.zext(value, I8)
        self.columns.pop(buffer.name, None)
        self.tile_loads.pop(buffer.name, None)
        self.b.store(value, self.address(buffer, index))

    def expr(self, e: Expr) -> ir.Value:
        if isinstance(e, Var):
            return self.vars[e.name]
        if isinstance(e, Const):
            if e.dtype == DType.bf16:
                return ir.Constant(I16, int(np.array(e.value, DType.bf16.numpy).view(np.uint16)))
            value = e.value
            if e.dtype.is_unsigned and value >= 1 << (e.dtype.bits - 1):
                value -= 1 << e.dtype.bits              # LLVM spells an integer constant signed
            return ir.Constant(REG_TYPE[e.dtype], value)
        if isinstance(e, Load):
            return self.load(e.buffer, e.index)
        if isinstance(e, BinOp):
            return self.binop(e.op, e.a.dtype, self.expr(e.a), self.expr(e.b))
        if isinstance(e, Call):
            return self.call(e.fn, e.dtype, [self.expr(a) for a in e.args])
        if isinstance(e, Select):
            return self.b.select(self.expr(e.cond), self.expr(e.a), self.expr(e.b))
        if isinstance(e, Cast):
            return self.cast(self.expr(e.value), e.value.dtype, e.to, clamped(e.value))
        if isinstance(e, BitCast):
            return self.bitcast(self.expr(e.value), e.value.dtype, e.to)
        raise UnsupportedError(f"codegen: {type(e).__name__} is not a Loop IR expression")

    def binop(self, op: str, dtype: DType, a: ir.Value, c: ir.Value, fast: tuple[str, ...] = ()) -> ir.Value:
        """``a op c``; ``fast``: fast-math flags for a float add, sub or mul (vector.py's)."""
        b = self.b
        if dtype.is_float:
            if op in ("max", "min"):
                # llvm.maximum/minimum propagate NaN like numpy and PyTorch (maxnum would drop it).
                return b.call(self.intrinsic("llvm.maximum" if op == "max" else "llvm.minimum", a.type), [a, c])
            if op in FCMP:
                return b.fcmp_unordered("!=", a, c) if op == "ne" else b.fcmp_ordered(FCMP[op], a, c)
            arith = {"add": b.fadd, "sub": b.fsub, "mul": b.fmul, "div": b.fdiv, "mod": b.frem}[op]
            return arith(a, c, flags=fast if op in ("add", "sub", "mul") else ())
        icmp = b.icmp_unsigned if dtype.is_unsigned else b.icmp_signed
        if op in FCMP:
            return icmp(FCMP[op], a, c)
        if op in ("max", "min"):
            return b.select(icmp(">" if op == "max" else "<", a, c), a, c)
        if op in ("div", "mod"):
            return self.int_divide(op, a, c, dtype.is_unsigned)
        return {"add": b.add, "sub": b.sub, "mul": b.mul,
                "and": b.and_, "or": b.or_, "xor": b.xor, "shl": b.shl,
                "shr": b.lshr if dtype.is_unsigned else b.ashr}[op](a, c)

    def int_divide(self, op: str, a: ir.Value, c: ir.Value, unsigned: bool = False) -> ir.Value:
        """Integer ``a / c`` or ``a % c`` without the two cases where the CPU traps (SIGFPE
        on x86): a zero divisor runs as 1 (the graph's data check reports it, see
        ops/elementwise.py), and a signed c = -1 is done as a negation (MIN / -1 wraps to MIN)."""
        b = self.b
        divide = {("div", False): b.sdiv, ("mod", False): b.srem,
                  ("div", True): b.udiv, ("mod", True): b.urem}[op, unsigned]
        if isinstance(c, ir.Constant) and c.constant not in (0, -1):     # index arithmetic: no guard needed
            return divide(a, c)
        zero, one, minus = (ir.Constant(c.type, k) for k in (0, 1, -1))
        if unsigned:
            return divide(a, b.select(b.icmp_unsigned("==", c, zero), one, c))
        by_minus = b.icmp_signed("==", c, minus)
        safe = b.select(b.or_(b.icmp_signed("==", c, zero), by_minus), one, c)
        return b.select(by_minus, b.sub(zero, a) if op == "div" else zero, divide(a, safe))   # a % -1 is 0

    def call(self, fn: str, dtype: DType, args: list[ir.Value]) -> ir.Value:
        b = self.b
        if not dtype.is_float:                  # only neg, abs and pow take integers
            if fn == "pow":
                return self.int_power(*args, dtype.is_unsigned)
            if fn == "abs" and dtype.is_unsigned:
                return args[0]
            zero = ir.Constant(args[0].type, 0)
            negated = b.sub(zero, args[0])
            return negated if fn == "neg" else b.select(b.icmp_signed("<", args[0], zero), negated, args[0])
        if dtype.is_storage_float:              # compute in f32: libm has no half functions
            wide = [self.cast(a, dtype, DType.f32) for a in args]
            return self.cast(self.call(fn, DType.f32, wide), DType.f32, dtype)
        if fn == "neg":
            return b.fneg(args[0])
        ty = args[0].type
        if fn in INTRINSICS:
            return b.call(self.intrinsic(INTRINSICS[fn], ty), args)
        return b.call(declare(self.module, LIBM[fn][ty], ty, [ty]), args)

    def int_power(self, x: ir.Value, n: ir.Value, unsigned: bool) -> ir.Value:
        """Integer ``x ** n`` by repeated squaring (a loop over n's bits), wrapping around as
        numpy does; a negative n gives 1 / x ** -n rounded toward zero (loops.power)."""
        b = self.b
        zero, one, minus = (ir.Constant(x.type, k) for k in (0, 1, -1))
        negative = ir.Constant(I1, 0) if unsigned else b.icmp_signed("<", n, zero)
        start = n if unsigned else b.select(negative, zero, n)
        before = b.block
        head = loop_head(b, "pow.head")
        body, done = (b.function.append_basic_block(f"pow.{k}") for k in ("body", "done"))
        result, square, left = b.phi(x.type), b.phi(x.type), b.phi(x.type)
        result.add_incoming(one, before)
        square.add_incoming(x, before)
        left.add_incoming(start, before)
        b.cbranch(b.icmp_unsigned("!=", left, zero), body, done)
        b.position_at_end(body)                  # result *= square where n's bit is set; square *= square
        result.add_incoming(b.select(b.trunc(left, I1), b.mul(result, square), result), body)
        square.add_incoming(b.mul(square, square), body)
        left.add_incoming(b.lshr(left, one), body)
        b.branch(head)
        b.position_at_end(done)
        if unsigned:
            return result
        by_minus = b.select(b.trunc(n, I1), minus, one)                 # (-1) ** n
        inverse = b.select(b.icmp_signed("==", x, one), one,
                           b.select(b.icmp_signed("==", x, minus), by_minus, zero))
        return b.select(negative, inverse, result)

    def cast(self, v: ir.Value, src: DType, dst: DType, bounds: tuple[float, float] | None = None) -> ir.Value:
        """``v`` (a scalar, or a vector of lanes: the same instructions on each) from ``src`` to ``dst``;
        ``bounds``: an interval ``v`` is known to lie in (``clamped``), or None."""
        b = self.b
        lanes = v.type.count if isinstance(v.type, ir.VectorType) else None
        of = lambda t: ir.VectorType(t, lanes) if lanes else t        # noqa: E731
        if src == dst:
            return v
        if src == DType.bf16:
            return self.cast(f32_of_bf16(b, v), DType.f32, dst)
        if dst == DType.bf16:
            return bf16_of_f32(b, self.cast(v, src, DType.f32), self.bf16_convert)
        if dst == DType.bool:
            zero = ir.Constant(v.type, None)
            return b.fcmp_unordered("!=", v, zero) if src.is_float else b.icmp_signed("!=", v, zero)
        to = of(REG_TYPE[dst])
        if src == DType.bool:
            return b.uitofp(v, to) if dst.is_float else b.zext(v, to)
        if src == DType.f64 and dst == DType.f16:
            # LLVM lowers fptrunc double -> half to a libcall (__truncdfhf2) that the JIT does
            # not provide (a call through null: a segfault); f64 -> f32 -> f16 rounds twice,
            # which moves a result only when the f32 lands exactly halfway between two f16s.
            return self.cast(self.cast(v, src, DType.f32), DType.f32, dst)
        if src.is_float and dst.is_float:
            return b.fpext(v, to) if dst.bits > src.bits else b.fptrunc(v, to)
        if src.is_float:                        # to 8 bits through i64, so -1.0 -> 255 as in PyTorch on x86
            if dst == DType.u64:
                return b.fptoui(v, to)
            narrow = dst.bits < 32 or (dst.is_unsigned and dst.bits < 64)    # LLVM: poison out of range
            if narrow and dst.bits < 32 and bounds and -2.0 ** 31 <= bounds[0] and bounds[1] < 2.0 ** 31:
                return b.trunc(b.fptosi(v, of(I32)), to)     # i64's low bits, in half the instructions
            return b.trunc(b.fptosi(v, of(I64)), to) if narrow else b.fptosi(v, to)
        if dst.is_float:
            return (b.uitofp if src.is_unsigned else b.sitofp)(v, to)
        if dst.bits > src.bits:
            return (b.zext if src.is_unsigned else b.sext)(v, to)
        return b.trunc(v, to) if dst.bits < src.bits else v

    def bitcast(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """The same bits as another type (a scalar or a vector); a bool is its byte, 0 or 1."""
        b = self.b
        lanes = v.type.count if isinstance(v.type, ir.VectorType) else None
        of = lambda t: ir.VectorType(t, lanes) if lanes else t        # noqa: E731
        if src == DType.bool:
            return b.zext(v, of(REG_TYPE[dst]))
        if dst == DType.bool:
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, None))
        to = of(REG_TYPE[dst])
        return v if v.type == to else b.bitcast(v, to)

    # --- statements ------------------------------------------------------------

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            for t in s.stmts:
                self.stmt(t)
        elif isinstance(s, Store):
            self.store(s.buffer, s.index, self.expr(s.value))
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, If) and s.otherwise is None:
            with self.b.if_then(self.expr(s.cond)):
                self.stmt(s.then)
        elif isinstance(s, If):
            with self.b.if_else(self.expr(s.cond)) as (then, otherwise):
                with then:
                    self.stmt(s.then)
                with otherwise:
                    self.stmt(s.otherwise)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, TILE_STMTS):
            from minic.codegen.tiles import emit_tile
            emit_tile(self, s)
        else:
            raise UnsupportedError(f"codegen: {type(s).__name__} is not a Loop IR statement")

    def allocate(self, s: Allocate) -> None:
        n = math.prod(s.buffer.shape)
        slot = self.allocas.alloca(MEM_TYPE[s.buffer.dtype], name=s.buffer.name,
                                   size=None if n == 1 else ir.Constant(I64, n))
        if n > 1:
            slot.align = ALIGN
        self.ptrs[s.buffer.name] = slot
        self.stmt(s.body)

    def loop(self, s: For) -> None:
        if s.kind == ForKind.PARALLEL and self.threads > 1:
            from minic.codegen.parallel import emit_parallel
            emit_parallel(self, s)
        elif s.kind == ForKind.VECTORIZED and isinstance(s.extent, Const) and _straight_line(s.body):
            from minic.codegen.vector import VectorLoop
            VectorLoop(self, s).stmt(s.body)
        elif s.kind == ForKind.UNROLLED and isinstance(s.extent, Const) and isinstance(s.start, Const):
            for i in range(s.start.value, s.start.value + s.extent.value):
                self.vars[s.var.name] = ir.Constant(I64, i)
                self.stmt(s.body)
            self.vars.pop(s.var.name, None)
        else:
            # Serial (and a vectorized loop codegen cannot take: a symbolic extent, or
            # nested statements), left to LLVM's loop vectorizer at O2/O3.
            start = self.expr(s.start)
            self.serial(s, start, self.b.add(start, self.expr(s.extent)))

    def serial(self, s: For, start: ir.Value, end: ir.Value) -> None:
        """Loop ``s`` over [start, end): for (var = start; var < end; var++) body"""
        b, var = self.b, s.var.name
        before = b.block
        head = loop_head(b, f"{var}.head")
        loop, done = (b.function.append_basic_block(f"{var}.{k}") for k in ("body", "done"))
        i = b.phi(I64, name=var)
        i.add_incoming(start, before)
        b.cbranch(b.icmp_signed("<", i, end), loop, done)
        b.position_at_end(loop)
        self.vars[var] = i
        self.stmt(s.body)
        i.add_incoming(b.add(i, ir.Constant(I64, 1), flags=["nsw"]), b.block)
        b.branch(head)
        b.position_at_end(done)
        del self.vars[var]


def like(v: ir.Value, ty: ir.Type) -> ir.Type:
    """``ty``, or a vector of ``ty`` with as many lanes as ``v`` has."""
    return ir.VectorType(ty, v.type.count) if isinstance(v.type, ir.VectorType) else ty


def f32_of_bf16(b: ir.IRBuilder, v: ir.Value) -> ir.Value:
    """bf16 bits -> f32 (a scalar or a vector), exactly: they are the high half of an f32's bits."""
    return b.bitcast(b.shl(b.zext(v, like(v, I32)), ir.Constant(like(v, I32), 16)), like(v, F32))


def bf16_of_f32(b: ir.IRBuilder, x: ir.Value, convert: bool = False) -> ir.Value:
    """f32 -> bf16 bits (a scalar or a vector), rounding to nearest even as PyTorch does; a NaN stays
    a (quiet) NaN.  ``convert``: as LLVM's ``fptrunc`` to bfloat, one instruction where the target
    has one (AVX512-BF16's vcvtneps2bf16); elsewhere LLVM would call ``__truncsfbf2``, which the JIT
    does not provide, so the rounding is spelled out on the bits."""
    if convert:
        return b.bitcast(b.fptrunc(x, like(x, BF16)), like(x, I16))
    i32 = lambda k: ir.Constant(like(x, I32), k)
    bits = b.bitcast(x, like(x, I32))
    lsb = b.and_(b.lshr(bits, i32(16)), i32(1))
    rounded = b.lshr(b.add(bits, b.add(lsb, i32(0x7FFF))), i32(16))
    nan = b.fcmp_unordered("uno", x, x)
    return b.trunc(b.select(nan, i32(0x7FC0), rounded), like(x, I16))


def rounded_clip(e: Cast) -> Expr | None:
    """``clip(x, lo, hi)`` where ``e`` casts ``clip(round(x), lo, hi)`` (f32) to an integer type that
    holds lo..hi, whole numbers (a quantization's last step), else None: then round may come
    last, in the conversion itself, since rounding commutes with a clip to whole numbers."""
    bounds = clamped_cast(e)
    if bounds is None or not all(b == int(b) for b in bounds):
        return None
    outer = constant_operand(e.value)[0]
    rounded = constant_operand(outer)[0]
    if not (isinstance(rounded, Call) and rounded.fn == "round"):
        return None
    return map_expr(e.value, lambda x: rounded.args[0] if x == rounded else None)


def _straight_line(s: Stmt) -> bool:
    """Only stores (in sequence): what ``vector.py`` turns into vector code."""
    return isinstance(s, Store) or (isinstance(s, Seq) and all(_straight_line(t) for t in s.stmts))
