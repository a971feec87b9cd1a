"""Vectorized loops: ``vectorized for (j = s; j < s + L; j++) body`` becomes one pass
over ``body`` in which every value is either *uniform* (the same on all lanes: a
scalar) or a vector of L lanes.

    y[i, j] = x[i, j] * w[j] + b[i]      (j vectorized, L = 16)
->  %x = load <16 x float> at &x[i, s]       contiguous: one vector load
    %w = load <16 x float> at &w[s]
    %b = load float at &b[i]                  uniform: one scalar load, then splat
    store <16 x float> (%x * %w + splat(%b)) at &y[i, s]

An access is contiguous when only its last index uses ``j``, as ``j + c``.  A column
of a local 2-D tile (``acc[j, 5]``, the lanes running down its rows: a conv2d's
epilogue) comes from the whole tile transposed once, with the shuffles of an 8 x 8
transpose per block (``VectorLoop.columns``), and is reused by the other columns
read in the same block.  A contiguous access of a lane count that is no power of two
(7: an image row of 7 or 14 columns in tiles of 7) is one masked access of the next
power of two on x86 (LLVM would split it into pieces of 4, 2 and 1), except in a local
tile: LLVM keeps a tile in registers only if no masked access touches it.  A load
whose last index steps by a small constant s (``2 * j + c``: a stride-2 pooling
window) reads the (L - 1) * s + 1 elements from its first lane's to its last
lane's, with a masked vector load (nothing past the last lane is touched), and
a shuffle keeps every s-th.  Any other access that uses ``j`` is gathered
(scattered) lane by lane.  Math calls without a vector instruction run lane by lane, except exp and erf (polynomials:
``VectorLoop.exp``, ``VectorLoop.erf``; GELU's erf lane by lane was a libm call per element).
A cast is the scalar's instructions on the whole vector (``Emitter.cast``): int8's quantize
and dequantize, an i32 sum's conversion to f32 (which lane by lane took a conversion and an
insert per element: half of an int8 conv's time on AMX tiles).
Multiplies and adds may contract into fused multiply-adds (``contract``), as BLAS
and ONNX Runtime do: the last bit may differ from the interpreter.  Two terms of a
bf16 dot product in a row (``schedule.templates.pair_products``) become one
vdpbf16ps per 16 lanes where the target has AVX512-BF16 (``VectorLoop.bf16_pair``); four
terms of a u8 × s8 one (``quad_products``) one vpdpbusd where it has AVX512-VNNI
(``VectorLoop.u8s8_quad``).
The schedule primitive ``vectorize`` has checked that lanes are independent.
"""
from __future__ import annotations

from llvmlite import ir

from minic.codegen.emit import (BF16, F32, I1, I8, I32, I64, MEM_TYPE, PTR, REG_TYPE, VOID, Emitter, declare,
                                element, rounded_clip, type_suffix)
from minic.ir.loops import (BinOp, BitCast, Buffer, Call, Cast, Const, Expr, For, Load, Role, Select, Seq, Stmt, Store,
                            Var, const, walk)
from minic.ir.loops_analysis import MAX_STRIDE, clamped, repeat, side_by_side, stride, uses
from minic.ir.types import DType

# Calls with a native vector form (emit.py's INTRINSICS); the rest run lane by lane.
VECTOR_CALLS = ("abs", "sqrt", "floor", "ceil", "round")
FAST = ("contract",)


class VectorLoop:
    """Emits one vectorized loop ``s`` into the Emitter's current block: ``VectorLoop(e, s).stmt(s.body)``."""

    def __init__(self, e: Emitter, s: For) -> None:
        self.e, self.b = e, e.b
        self.var = s.var.name
        self.lanes = s.extent.value
        self.first = s.start
        self.start = e.expr(s.start)
        self.x86 = e.module.triple.startswith("x86_64")

    # --- helpers ------------------------------------------------------------------

    def vec(self, ty: ir.Type) -> ir.VectorType:
        return ir.VectorType(ty, self.lanes)

    def const(self, value: float | int, ty: ir.Type = F32) -> ir.Constant:
        """``value`` on every lane."""
        return ir.Constant(self.vec(ty), [value] * self.lanes)

    def shuffle(self, a: ir.Value, mask: list[int], c: ir.Value | None = None) -> ir.Value:
        """The lanes of ``a`` (and of ``c``, numbered after a's) that ``mask`` picks."""
        c = ir.Constant(a.type, ir.Undefined) if c is None else c
        return self.b.shuffle_vector(a, c, ir.Constant(ir.VectorType(I32, len(mask)), mask))

    def splat(self, v: ir.Value) -> ir.Value:
        if isinstance(v.type, ir.VectorType):
            return v
        one = self.b.insert_element(ir.Constant(self.vec(v.type), ir.Undefined), v, ir.Constant(I32, 0))
        return self.shuffle(one, [0] * self.lanes)

    def per_lane(self, fn, ty: ir.Type) -> ir.Value:
        """A vector whose lane l is ``fn(l)`` (a scalar)."""
        out = ir.Constant(self.vec(ty), ir.Undefined)
        for lane in range(self.lanes):
            out = self.b.insert_element(out, fn(lane), ir.Constant(I32, lane))
        return out

    def lane(self, v: ir.Value, lane: int) -> ir.Value:
        return self.b.extract_element(v, ir.Constant(I32, lane)) if isinstance(v.type, ir.VectorType) else v

    def at_lane(self, fn, lane: int | None = None):
        """Run scalar code ``fn`` with the loop variable bound to lane ``lane``'s value (None:
        ``start`` itself, for the first lane's address or a value the same on every lane)."""
        self.e.vars[self.var] = self.start if lane is None else self.b.add(self.start, ir.Constant(I64, lane))
        try:
            return fn()
        finally:
            del self.e.vars[self.var]

    def last_only(self, index: tuple[Expr, ...]) -> bool:
        """Whether the loop variable is in the last index only (if anywhere)."""
        return len(index) > 0 and not any(uses(i, self.var) for i in index[:-1])

    def step(self, index: tuple[Expr, ...]) -> int | None:
        """s when only the last index uses the loop variable, as ``s * j + c`` with 1 <= s <= MAX_STRIDE
        (1: a contiguous access; more: a strided one, read by a masked load); None otherwise."""
        s = stride(index[-1], self.var) if self.last_only(index) else None
        return s if s is not None and 1 <= s <= MAX_STRIDE else None

    def repeated(self, index: tuple[Expr, ...]) -> int | None:
        """d when only the last index uses the loop variable, as ``(j + c) / d + ...`` with
        j + c a multiple of d on the first lane (``repeat``), and d divides the lanes."""
        d = repeat(index[-1], self.var, self.first) if self.last_only(index) else None
        return d if d is not None and self.lanes % d == 0 else None

    # --- expressions ----------------------------------------------------------------

    def expr(self, x: Expr) -> ir.Value:
        if not uses(x, self.var):
            return self.at_lane(lambda: self.e.expr(x))   # uniform: the scalar code
        b = self.b
        if isinstance(x, Var):
            return b.add(self.splat(self.start), ir.Constant(self.vec(I64), list(range(self.lanes))))
        if isinstance(x, Load):
            return self.load(x.buffer, x.index)
        if isinstance(x, BinOp):
            a, c = map(self.splat, (self.expr(x.a), self.expr(x.b)))
            if x.a.dtype.is_float and x.op in ("max", "min") and (_plain(x.b) or _plain(x.a)) and self.x86:
                # max(x, c) as x < c ? c : x: one vmaxps on x86, where llvm.maximum is three instructions
                # (aarch64's fmax is one already); a NaN x propagates, and relu(-0.0) is -0.0, as in PyTorch
                v, c = (a, c) if _plain(x.b) else (c, a)
                return b.select(b.fcmp_ordered("<" if x.op == "max" else ">", v, c), c, v)
            return self.e.binop(x.op, x.a.dtype, a, c, FAST)   # a float max/min: llvm.maximum/minimum
        if isinstance(x, Select) and not uses(x.cond, self.var) and (self.reads(x.a) or self.reads(x.b)):
            return self.choose(x)
        if isinstance(x, Select):
            return b.select(self.expr(x.cond), *map(self.splat, (self.expr(x.a), self.expr(x.b))))
        if isinstance(x, Call):
            args = [self.expr(a) for a in x.args]
            if x.fn in VECTOR_CALLS and x.dtype == DType.f32:
                return self.e.call(x.fn, x.dtype, [self.splat(args[0])])     # the intrinsic's vector form
            if x.fn == "neg" and x.dtype.is_float:
                return b.fneg(self.splat(args[0]))
            if x.fn in ("exp", "erf") and x.dtype == DType.f32:        # polynomials, not a call per lane
                return {"exp": self.exp, "erf": self.erf}[x.fn](self.splat(args[0]))
            return self.per_lane(lambda l: self.e.call(x.fn, x.dtype, [self.lane(a, l) for a in args]),
                                 REG_TYPE[x.dtype])
        if isinstance(x, Cast) and self.x86 and (clip := rounded_clip(x)) is not None:
            # cast(clip(round(v))) as cast(lrint(clip(v))): lrint rounds as round does (to nearest,
            # ties to even: the default rounding mode), in the conversion itself (one vcvtps2dq where
            # vrndscaleps and a truncating vcvttps2dq were two): a quantization's last step
            clipped = self.splat(self.expr(clip))
            whole = self.vec(I32)
            name = f"llvm.lrint.{type_suffix(whole)}.{type_suffix(clipped.type)}"
            lrint = declare(self.e.module, name, whole, [clipped.type])
            return self.e.cast(b.call(lrint, [clipped]), DType.i32, x.to)
        if isinstance(x, Cast):          # the scalar's instructions on the whole vector (f32 -> u8: emit.cast)
            return self.e.cast(self.splat(self.expr(x.value)), x.value.dtype, x.to, clamped(x.value))
        if isinstance(x, BitCast):
            return self.e.bitcast(self.splat(self.expr(x.value)), x.value.dtype, x.to)
        raise TypeError(f"not a Loop IR expression: {x!r}")

    def reads(self, x: Expr) -> bool:
        """Whether ``x`` loads a vector (a load whose index moves with the lanes)."""
        return any(isinstance(y, Load) and uses(y, self.var) for y in walk(x))

    def choose(self, x: Select) -> ir.Value:
        """``select(c, a, b)`` with ``c`` the same on every lane, as a branch: only the chosen
        side's loads run.  A concat along an outer axis reads its inputs this way (Winograd's
        transforms: each of 4 points a different slice), and a select there loaded every
        input's vector for each one it kept; on a loop-invariant ``c`` the branch is
        predicted every time (LLVM may unswitch the loop on it)."""
        b = self.b
        cond = self.expr(x.cond)
        with b.if_else(cond) as (then, otherwise):
            with then:
                a = self.splat(self.expr(x.a))
                a_block = b.block
            with otherwise:
                c = self.splat(self.expr(x.b))
                c_block = b.block
        if a.type != c.type:                       # a uniform side splatted to the other's vector type
            raise TypeError(f"select's sides differ in type: {a.type} vs {c.type}")
        phi = b.phi(a.type)
        phi.add_incoming(a, a_block)
        phi.add_incoming(c, c_block)
        return phi

    def clamp(self, x: ir.Value, lo: float, hi: float) -> ir.Value:
        """min(max(x, lo), hi) on every lane; NaN stays NaN."""
        minimum, maximum = self.e.intrinsic("llvm.minimum", x.type), self.e.intrinsic("llvm.maximum", x.type)
        return self.b.call(minimum, [self.b.call(maximum, [x, self.const(lo)]), self.const(hi)])

    def exp(self, x: ir.Value) -> ir.Value:
        """exp on a float vector, without a call per lane (Cephes' expf, within 2 ulp):
        x = n ln2 + r with |r| <= ln2/2;  e^r by a degree-6 polynomial;  2^n built in the
        exponent bits.  Below -87.3 the result is 0, past 88.72 it overflows to inf; NaN stays NaN."""
        b, c = self.b, self.const
        clamped = self.clamp(x, -87.33, 88.73)
        n = b.call(self.e.intrinsic("llvm.roundeven", x.type), [b.fmul(clamped, c(1.44269504088896341))])
        r = b.fsub(b.fsub(clamped, b.fmul(n, c(0.693359375)), flags=FAST), b.fmul(n, c(-2.12194440e-4)), flags=FAST)
        p = c(1.9875691500e-4)
        for k in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
            p = b.fadd(b.fmul(p, r, flags=FAST), c(k), flags=FAST)
        p = b.fadd(b.fadd(b.fmul(b.fmul(p, r, flags=FAST), r, flags=FAST), r, flags=FAST), c(1.0), flags=FAST)
        whole = b.fptosi(n, self.vec(I32))
        half = b.ashr(whole, c(1, I32))                 # 2^n as 2^h * 2^(n-h): each in range

        def pow2(e: ir.Value) -> ir.Value:
            return b.bitcast(b.shl(b.add(e, c(127, I32)), c(23, I32)), x.type)
        y = b.fmul(b.fmul(p, pow2(half)), pow2(b.sub(whole, half)))
        y = b.select(b.fcmp_ordered("<", x, c(-87.33)), c(0.0), y)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def erf(self, x: ir.Value) -> ir.Value:
        """erf on a float vector (Eigen's ``generic_fast_erf_float``, within a few ulp):
        x clamped to [-4, 4] (erf is 1 to f32 precision beyond), then x * P(x^2) / Q(x^2)
        with P of degree 6 and Q of degree 4.  NaN stays NaN (the clamp propagates it)."""
        b, c = self.b, self.const
        x = self.clamp(x, -4.0, 4.0)
        x2 = b.fmul(x, x, flags=FAST)
        p = c(-2.72614225801306e-10)
        for k in (2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
                  -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02):
            p = b.fadd(b.fmul(p, x2, flags=FAST), c(k), flags=FAST)
        q = c(-1.45660718464996e-05)
        for k in (-2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03, -1.42647390514189e-02):
            q = b.fadd(b.fmul(q, x2, flags=FAST), c(k), flags=FAST)
        return b.fdiv(b.fmul(x, p, flags=FAST), q)

    def tile_column(self, buffer: Buffer, index: tuple[Expr, ...]) -> ir.Value | None:
        """Column c of a local tile t[rows, n] read down its rows (``t[j, c]``, j over all
        rows, c a constant here), if the tile's shape allows a transpose (see ``columns``;
        a tile of 4 rows or fewer would shuffle as many undefined rows as real ones, and
        LLVM's own code for it measured as fast)."""
        if not (buffer.role == Role.LOCAL and len(index) == 2 and index[0] == Var(self.var)
                and isinstance(self.start, ir.Constant) and self.start.constant == 0
                and 4 < buffer.shape[0] == self.lanes <= 8 and buffer.shape[1] % 8 == 0
                and buffer.dtype in (DType.f32, DType.i32) and not uses(index[1], self.var)):
            return None
        c = self.e.expr(index[1])
        if not isinstance(c, ir.Constant):
            return None
        block, cols = self.e.columns.get(buffer.name, (None, None))
        if block is not self.b.block:
            cols = self.columns(buffer)
            self.e.columns[buffer.name] = (self.b.block, cols)
        return cols[c.constant]

    def columns(self, buffer: Buffer) -> list[ir.Value]:
        """The columns of local tile ``buffer`` [5..8 rows, n], each a vector of ``rows`` lanes:
        the rows loaded as vectors, cut in blocks of 8 columns, each block transposed as an
        8 x 8 matrix (missing rows undefined) with the three shuffle stages of x86's
        unpcklps/unpckhps, shufps and vperm2f128, which LLVM selects one to one (for an int8
        kernel's i32 sums, their integer twins: LLVM's own code for a column of 7 i32 rows was a
        permutation per column, its masks reloaded from the stack)."""
        rows, n = buffer.shape
        b, shuffle = self.b, self.shuffle
        base, ty = self.e.ptrs[buffer.name], REG_TYPE[buffer.dtype]          # f32, or an int8 kernel's i32 sums
        loaded = [b.load(element(b, base, r * n, ty), typ=ir.VectorType(ty, n), align=4)
                  for r in range(rows)]
        undef = ir.Constant(ir.VectorType(ty, 8), ir.Undefined)
        unpack = ([0, 8, 1, 9, 4, 12, 5, 13], [2, 10, 3, 11, 6, 14, 7, 15])      # unpcklps, unpckhps
        pairs = ([0, 1, 8, 9, 4, 5, 12, 13], [2, 3, 10, 11, 6, 7, 14, 15])       # shufps
        halves = ([0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15])     # vperm2f128
        out = []
        for block in range(n // 8):
            r = [shuffle(loaded[i], list(range(8 * block, 8 * block + 8))) if i < rows else undef
                 for i in range(8)]
            t = [shuffle(r[i & ~1], unpack[i % 2], r[i | 1]) for i in range(8)]
            u = [shuffle(t[4 * (i // 4) + (i % 4) // 2], pairs[i % 2], t[4 * (i // 4) + (i % 4) // 2 + 2])
                 for i in range(8)]
            # u[0]: columns 0 and 4 of rows 0-3; u[1]: 1 and 5; u[2]: 2 and 6; u[3]: 3 and 7 (u[4..7]: rows 4-7)
            wholes = (shuffle(u[col % 4], halves[col // 4], u[4 + col % 4]) for col in range(8))
            out += [whole if rows == 8 else shuffle(whole, list(range(rows))) for whole in wholes]
        return out

    def load(self, buffer: Buffer, index: tuple[Expr, ...]) -> ir.Value:
        column = self.tile_column(buffer, index)
        if column is not None:
            return column
        step = self.step(index)
        repeats = self.repeated(index) if step is None else None
        if step is None and not repeats:                     # gathered, lane by lane
            return self.per_lane(lambda l: self.at_lane(lambda: self.e.load(buffer, index), l),
                                 REG_TYPE[buffer.dtype])
        ptr = self.at_lane(lambda: self.e.address(buffer, index))
        ty, align = MEM_TYPE[buffer.dtype], buffer.dtype.numpy.itemsize
        if repeats:
            # lane l = ptr[l / d]: one vector load of lanes / d elements, each lane of it repeated
            # d times by a shuffle (was: a gather, one scalar load a lane)
            v = self.shuffle(self.b.load(ptr, typ=ir.VectorType(ty, self.lanes // repeats), align=align),
                             [lane // repeats for lane in range(self.lanes)])
        elif step > 1 or self.padded(buffer):
            # lane l = ptr[l * step], from one masked load of padded() elements (step 1) or of lanes * step
            # (a shuffle keeps every step-th): nothing past the last lane's element, maybe past the buffer
            n = self.padded(buffer) if step == 1 else self.lanes * step
            wide = self.masked("load", ptr, buffer.dtype, [i <= (self.lanes - 1) * step for i in range(n)])
            v = self.shuffle(wide, [lane * step for lane in range(self.lanes)])
        else:
            v = self.b.load(ptr, typ=self.vec(ty), align=align)
        return self.b.trunc(v, self.vec(I1)) if buffer.dtype == DType.bool else v

    def padded(self, buffer: Buffer) -> int | None:
        """The power of two above a lane count that is none (7 -> 8, up to 16), on x86: the lanes
        of a masked contiguous access of ``buffer`` (LLVM would split a 7-lane access into pieces
        of 4, 2 and 1; a masked one of 8 is one instruction there; elsewhere, aarch64's NEON, a
        masked access runs lane by lane).  None in a local tile: LLVM keeps a tile in registers
        only if no masked access touches it."""
        n = self.lanes
        if n & (n - 1) == 0 or n > 16 or not self.x86 or buffer.role is Role.LOCAL:
            return None
        return 1 << n.bit_length()

    def masked(self, op: str, ptr: ir.Value, dtype: DType, mask: list[bool], value: ir.Value | None = None):
        """LLVM's ``llvm.masked.load`` or ``llvm.masked.store`` of ``len(mask)`` elements at ``ptr``
        (a load's masked-off lanes undefined)."""
        wide, mask_ty = ir.VectorType(MEM_TYPE[dtype], len(mask)), ir.VectorType(I1, len(mask))
        align, mask = ir.Constant(I32, dtype.numpy.itemsize), ir.Constant(mask_ty, mask)
        name = f"llvm.masked.{op}.{type_suffix(wide)}.p0"
        if op == "load":
            fn = declare(self.e.module, name, wide, [PTR, I32, mask_ty, wide])
            return self.b.call(fn, [ptr, align, mask, ir.Constant(wide, ir.Undefined)])
        fn = declare(self.e.module, name, VOID, [wide, PTR, I32, mask_ty])
        return self.b.call(fn, [value, ptr, align, mask])

    # --- statements -----------------------------------------------------------------

    def stmt(self, s: Stmt) -> None:
        if isinstance(s, Seq):
            stmts = list(s.stmts)
            while stmts:
                if len(stmts) > 1 and self.bf16_pair(stmts[0], stmts[1]):
                    del stmts[:2]
                elif len(stmts) > 3 and self.u8s8_quad(stmts[:4]):
                    del stmts[:4]
                elif self.interleaved(stmts):
                    del stmts[:stmts[0].buffer.shape[-1]]     # the group interleaved() stored
                else:
                    self.stmt(stmts.pop(0))
            return
        if not isinstance(s, Store):
            raise TypeError(f"vectorized loop over '{self.var}' holds a {type(s).__name__}; only stores may")
        self.store(s, self.splat(self.expr(s.value)))

    def bf16_pair(self, first: Stmt, second: Stmt) -> bool:
        """Two terms of a bf16 dot product as one vdpbf16ps per 16 lanes, where the target has
        AVX512-BF16 (``schedule.templates.pair_products`` writes them):

            acc[.., j] += (f32)x0 * (f32)w0[.., j]       x0, x1 the same on every lane
            acc[.., j] += (f32)x1 * (f32)w1[.., j]       w0, w1 contiguous bf16 loads

        -> acc = vdpbf16ps(acc, splat(x0 | x1 << 16), interleave(w0, w1)): each lane adds
        x1·w1 + x0·w0 (the products are exact in f32; the two sums round as two adds would,
        but in that order, and bf16 denormals count as zero).  True when emitted."""
        terms = [_dot_term(s, self.var, DType.f32, (DType.bf16,)) for s in (first, second)]
        if not (self.e.bf16_convert and self.x86 and self.lanes % 16 == 0 and None not in terms
                and first.buffer == second.buffer and first.index == second.index and self.step(first.index) == 1
                and all(self.step(w.index) == 1 for _, w in terms)):
            return False
        b = self.b
        x0, x1 = (self.at_lane(lambda x=x: self.e.expr(x)) for x, _ in terms)      # bf16 bits, i16
        pair = b.or_(b.zext(x0, I32), b.shl(b.zext(x1, I32), ir.Constant(I32, 16)))
        pairs = b.bitcast(self.splat16(pair), ir.VectorType(BF16, 32))
        w0, w1 = (self.load(w.buffer, w.index) for _, w in terms)
        acc = self.load(first.buffer, first.index)
        dot = declare(self.e.module, "llvm.x86.avx512bf16.dpbf16ps.512", ir.VectorType(F32, 16),
                      [ir.VectorType(F32, 16), ir.VectorType(BF16, 32), ir.VectorType(BF16, 32)])
        parts = []
        for c in range(0, self.lanes, 16):
            w = self.shuffle(w0, [c + j // 2 + (self.lanes if j % 2 else 0) for j in range(32)], w1)
            parts.append(b.call(dot, [self.shuffle(acc, list(range(c, c + 16))), pairs,
                                      b.bitcast(w, ir.VectorType(BF16, 32))]))
        self.store(first, self.joined(parts))
        return True

    def u8s8_quad(self, stmts: list[Stmt]) -> bool:
        """Four terms of an 8-bit dot product as one vpdpbusd per 16 lanes, where the target has
        AVX512-VNNI (``schedule.templates.quad_products`` writes them):

            acc[.., j] += (i32)x0 * (i32)w0[.., j]       x0..x3 u8, the same on every lane
            ...                                            w0..w3 contiguous i8 loads
            acc[.., j] += (i32)x3 * (i32)w3[.., j]

        -> acc = vpdpbusd(acc, splat(x0 | x1 << 8 | x2 << 16 | x3 << 24), interleave(w0..w3)): lane j
        adds the four products of the bytes 4j..4j+3 (unsigned times signed, exact in i32; no
        saturation: that is vpdpbusds).  Weights packed four rows side by side already
        (``w[.., j, q]``: ``schedule.templates.weight_quads``) are one load, not interleaved
        here.  True when emitted."""
        terms = [_dot_term(s, self.var, DType.i32, (DType.u8, DType.i8)) for s in stmts]
        first = stmts[0]
        if not (self.e.dots_u8s8 and self.x86 and self.lanes % 16 == 0 and None not in terms
                and len({(x.dtype, w.dtype) for x, w in terms}) == 1
                and {terms[0][0].dtype, terms[0][1].dtype} == {DType.u8, DType.i8}
                and all(s.buffer == first.buffer and s.index == first.index for s in stmts)
                and self.step(first.index) == 1
                and (side_by_side([w for _, w in terms], self.var) or all(self.step(w.index) == 1 for _, w in terms))):
            return False
        b = self.b
        xs = [self.at_lane(lambda x=x: self.e.expr(x)) for x, _ in terms]            # bytes, i8
        quad = b.zext(xs[0], I32)
        for q in (1, 2, 3):
            quad = b.or_(quad, b.shl(b.zext(xs[q], I32), ir.Constant(I32, 8 * q)))
        bytes64 = ir.VectorType(I8, 64)
        quads = b.bitcast(self.splat16(quad), bytes64)
        n, ws = self.lanes, [w for _, w in terms]
        if side_by_side(ws, self.var):               # byte 4j + q: w[.., j, q], as stored
            at = self.at_lane(lambda: self.e.address(ws[0].buffer, ws[0].index))
            whole = self.b.load(at, typ=ir.VectorType(I8, 4 * n), align=1)
            rows = [self.shuffle(whole, list(range(4 * c, 4 * c + 64))) for c in range(0, n, 16)]
        else:                                   # byte 4j + q of the 16 lanes from c: w_q[c + j]
            w = [self.load(t.buffer, t.index) for t in ws]
            low, high = self.shuffle(w[0], list(range(2 * n)), w[1]), self.shuffle(w[2], list(range(2 * n)), w[3])
            rows = [self.shuffle(low, [q * n + c + j for j in range(16) for q in range(4)], high)
                    for c in range(0, n, 16)]
        acc = self.load(first.buffer, first.index)
        dot = declare(self.e.module, "llvm.x86.avx512.vpdpbusd.512", ir.VectorType(I32, 16),
                      [ir.VectorType(I32, 16), bytes64, bytes64])
        parts = []
        for c, row in zip(range(0, n, 16), rows):
            u8, s8 = (quads, row) if terms[0][0].dtype == DType.u8 else (row, quads)
            parts.append(b.call(dot, [self.shuffle(acc, list(range(c, c + 16))), u8, s8]))
        self.store(first, self.joined(parts))
        return True

    def interleaved(self, stmts: list[Stmt]) -> bool:
        """Stores ``y[.., j, q] = v_q`` for every q of y's last axis (``loops_analysis.side_by_side``) as one store
        of them all, the values interleaved by one shuffle (was a store per lane and q: the copy
        that puts a conv's input channels side by side for vpdpbusd, ``channel_quads``).  No value
        may read y: all are computed before the store.  True when emitted."""
        first = stmts[0]
        if not (isinstance(first, Store) and first.index and first.buffer.dtype != DType.bool
                and isinstance(first.buffer.shape[-1], int) and 1 < first.buffer.shape[-1] <= len(stmts)):
            return False
        group = stmts[:first.buffer.shape[-1]]
        if not (all(isinstance(s, Store) for s in group) and side_by_side(group, self.var)
                and not any(isinstance(x, Load) and x.buffer == first.buffer for s in group for x in walk(s.value))):
            return False
        n, m = self.lanes, len(group)
        whole = self.joined([self.splat(self.expr(s.value)) for s in group])    # v_0 | v_1 | ..
        value = self.shuffle(whole, [q * n + j for j in range(n) for q in range(m)])
        self.e.columns.pop(first.buffer.name, None)
        ptr = self.at_lane(lambda: self.e.address(first.buffer, first.index))
        self.b.store(value, self.b.bitcast(ptr, ir.PointerType(value.type)), align=first.buffer.dtype.numpy.itemsize)
        return True

    def joined(self, parts: list[ir.Value]) -> ir.Value:
        """Vectors of 16 lanes joined back into one vector of them all: in pairs, or, for a count that
        is no power of two (48 lanes), one at a time, each widened to the lanes joined so far (the
        two vectors of a shuffle have one type)."""
        if len(parts) & (len(parts) - 1):
            whole = parts[0]
            for part in parts[1:]:
                n, m = whole.type.count, part.type.count
                wide = self.shuffle(part, list(range(m)) + [m] * (n - m)) if m < n else part
                whole = self.shuffle(whole, list(range(n + m)), wide)
            return whole
        while len(parts) > 1:
            parts = [self.shuffle(parts[i], list(range(2 * parts[i].type.count)), parts[i + 1])
                     for i in range(0, len(parts), 2)]
        return parts[0]

    def splat16(self, v: ir.Value) -> ir.Value:
        """A scalar on 16 lanes."""
        one = self.b.insert_element(ir.Constant(ir.VectorType(v.type, 16), ir.Undefined), v, ir.Constant(I32, 0))
        return self.shuffle(one, [0] * 16)

    def store(self, s: Store, value: ir.Value) -> None:
        """``value`` (a vector of the lanes) stored where ``s`` stores."""
        self.e.columns.pop(s.buffer.name, None)
        if self.step(s.index) == 1:
            if s.buffer.dtype == DType.bool:
                value = self.b.zext(value, self.vec(I8))
            ptr = self.at_lane(lambda: self.e.address(s.buffer, s.index))
            if n := self.padded(s.buffer):        # lanes past the last masked off
                wide = self.shuffle(value, [min(i, self.lanes - 1) for i in range(n)])
                self.masked("store", ptr, s.buffer.dtype, [i < self.lanes for i in range(n)], wide)
                return
            ptr = self.b.bitcast(ptr, ir.PointerType(value.type))   # typed for llvmlite's check; "ptr" in the IR
            self.b.store(value, ptr, align=s.buffer.dtype.numpy.itemsize)
            return
        for lane in range(self.lanes):
            scalar = self.lane(value, lane)
            self.at_lane(lambda: self.e.store(s.buffer, s.index, scalar), lane)


def _dot_term(s: Stmt, var: str, wide: DType, narrow: tuple[DType, ...]) -> tuple[Expr, Load] | None:
    """(x, w) when ``s`` is ``acc = acc + (wide)x * (wide)w`` (either order) with x and w of the
    ``narrow`` types (bf16 widened to f32; u8, i8 to i32), x the same on every lane of ``var`` and
    w a load that moves with them."""
    if not (isinstance(s, Store) and isinstance(s.value, BinOp) and s.value.op == "add"
            and s.value.a == Load(s.buffer, s.index) and isinstance(s.value.b, BinOp) and s.value.b.op == "mul"):
        return None
    factors = [f.value for f in (s.value.b.a, s.value.b.b)
               if isinstance(f, Cast) and f.to == wide and f.value.dtype in narrow]
    if len(factors) != 2:
        return None
    for x, w in (factors, factors[::-1]):
        if not uses(x, var) and isinstance(w, Load) and uses(w, var):
            return x, w
    return None


def _plain(e: Expr) -> bool:
    """A float constant that is a number (max/min against it needs no NaN test)."""
    return isinstance(e, Const) and e.dtype.is_float and e.value == e.value
