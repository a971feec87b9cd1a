"""fake-quantization-to-integer: a matmul or conv of two dequantized 8-bit tensors on the integers.

A QDQ model (ONNX Runtime's ``quantize_static`` in QDQ format, PyTorch's PT2E) keeps
every op in float and brackets it with QuantizeLinear -> DequantizeLinear pairs; minic
imports a DequantizeLinear as its definition, ``(f32(q) - zero) · scale``
(``minic/frontend/onnx_quant.py``).  This pass finds a matmul (or gemm) whose two
operands are such dequantizations, the weights' constant, and computes it on the
integers (TVM's FakeQuantizationToInteger, ONNX Runtime's QDQ -> QLinearMatMul fusion):

    y = matmul((f32(x) - zx) · sx, (f32(@w) - @zw) · @sw)            x: u8 [M, K], @w: [K, N]
 -> y = f32(matmul_integer(x, @w') - @c) · @s                         @w' = @w - @zw: i8

      @s[n] = sx · sw[n]                     (f32; alpha too, for a gemm)
      @c[n] = zx · sum_k w'[k, n]  (- bias_q[n], a bias quantized to i32 at scale sx · sw)

since sum_k (x - zx) · w' = sum_k x · w' - zx · sum_k w'.  The i32 sums and their
correction are exact, and equal the sums ONNX Runtime's QLinearMatMul and QGemm
accumulate; only the scaling by @s (and later ops) rounds (docs/int8.md, the policy).

Why u8 activations and s8 weights: x86's VNNI instruction ``vpdpbusd`` multiplies
unsigned bytes by signed bytes.  An i8 x is fed as x + 128 (its top bit flipped:
``xor(bitcast(x, u8), 0x80)``) and its zero point taken as zx + 128, the standard trick;
the correction then subtracts 128 · sum_k w' as well.  A weight's zero point is
subtracted at compile time, so any zero point (per channel too) works while w - zw
stays in i8's range.

A conv2d is the same sum over its window (the input channels and the taps) for each output
channel o: ``conv2d_integer`` takes the place of ``matmul_integer``, and @c, @s hold one value
per output channel ([O, 1, 1] against the NCHW output).  Its padding must read the zero point
zx, the integer of a real 0 (ONNX's ConvInteger pads so too), for the correction to hold at
the borders: conv2d_integer's third input says what padded taps read.

    y = conv2d((f32(x) - zx) · sx, (f32(@w) - @zw) · @sw)          x: u8 NCHW, @w: [O, C/g, kh, kw]
 -> y = f32(conv2d_integer(x, @w', zx) - @c) · @s                    @c[o] = zx · sum_{c,p,q} w'[o, c, p, q]

``plan`` says, for a matmul or conv, whether and how: an ``IntegerContraction``, or the
``Refusal`` naming why not (it then stays in float, still correct).

A second rule takes ONNX's MatMulInteger and ConvInteger (``quantize_dynamic``'s), which minic
imports as a float matmul or conv of zero-point-shifted integers cast to i32 (exact below
2^24): the same integer op and correction, where the activations' zero point may be known only at
run time (DynamicQuantizeLinear computes it from the data): then the correction is
``zx · sum_k w'``, a scalar times a constant vector, computed in i32 at run time.

    cast(matmul(f32(x) - zx, f32(@w) - @zw), i32) -> matmul_integer(x, @w - @zw) - zx · @sums
    cast(conv2d(f32(x) - zx, f32(@w) - @zw), i32) -> conv2d_integer(x, @w - @zw, zx) - zx · @sums
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from minic.ir import ops
from minic.ir.graph import Node, Value
from minic.ir.types import DType
from minic.passes.rewrite import Match, rule

EIGHT_BITS = (DType.u8, DType.i8)
I32_MAX = np.iinfo(np.int32).max


@dataclass(frozen=True)
class Dequantized:
    """``(f32(q) - zero) · scale`` as matched: the integer value, and its scale and zero
    point as known constants (shaped to broadcast against ``q``)."""
    q: Value
    scale: np.ndarray
    zero: np.ndarray
    nodes: tuple[Node | Value, ...]     # the cast, sub and mul computing it (and its scale, zero point)


@dataclass(frozen=True)
class IntegerContraction:
    """What the rewrite emits: ``f32(op_integer(x', w) - correction) · scale (+ bias)``."""
    x: Value                            # the activations' 8-bit integers: [..., M, K], or NCHW for a conv
    flip: bool                          # x is i8: fed as x + 128 (u8)
    zero: int                           # the activations' zero point as fed (+ 128 when flipped): a conv pads with it
    w: np.ndarray                       # i8 [K, N] (matmul) or [O, C/g, kh, kw] (conv), the zero point taken out
    correction: np.ndarray              # i32 [N], one per output channel, subtracted from the sums
    scale: np.ndarray                   # f32 [N] or []
    bias: Value | None                  # a float bias added after the scaling
    retired: tuple[Node | Value, ...]   # what the float form read: dropped unless read elsewhere


@dataclass(frozen=True)
class Refusal:
    """Why a matmul of dequantized operands stays in float."""
    reason: str


def known(m: Match, v: Value, depth: int = 4) -> np.ndarray | None:
    """The data of ``v`` when it is a constant or a short chain of ops on constants
    (``cast(@zp)``, ``reshape(@scale)``: the import's spelling of a scale or zero point)."""
    if v.is_constant:
        return v.data
    node = m.producer(v)
    if node is None or depth == 0 or len(node.outputs) != 1:
        return None
    args = [known(m, x, depth - 1) for x in node.inputs]
    if any(a is None for a in args):
        return None
    return np.asarray(ops.get(node.op).reference(node.attrs, *args))


def dequantized(m: Match, v: Value) -> Dequantized | None:
    """``v = (f32(q) - zero) · scale`` (or ``f32(q) · scale``) with a known scale and zero point."""
    mul = m.producer(v, "mul")
    if mul is None or v.type.dtype != DType.f32:
        return None
    for body, s in (mul.inputs, mul.inputs[::-1]):
        scale = known(m, s)
        if scale is None:
            continue
        nodes, zero = [mul], np.zeros((), np.float32)
        sub = m.producer(body, "sub")
        if sub is not None:
            zero = known(m, sub.inputs[1])
            if zero is None:
                continue
            nodes += [sub, m.producer(sub.inputs[1]) or sub.inputs[1]]
            body = sub.inputs[0]
        nodes.append(m.producer(s) or s)          # the scale (or its reshape)
        cast = m.producer(body, "cast")
        if cast is not None and cast.inputs[0].type.dtype.is_int:
            return Dequantized(cast.inputs[0], scale, zero, tuple(nodes + [cast]))
    return None


@dataclass(frozen=True)
class Shifted:
    """``f32(q) - zero`` (or ``f32(q)``): an integer minus its zero point, known now (an array)
    or at run time (``f32(z)`` of a scalar integer Value ``z``: DynamicQuantizeLinear's)."""
    q: Value
    zero: np.ndarray | Value
    nodes: tuple[Node, ...]             # the cast and sub computing it (and its zero point's cast)


def shifted(m: Match, v: Value) -> Shifted | None:
    """``v = f32(q) - zero`` for an integer ``q`` (MatMulInteger's operands, as minic imports them)."""
    zero: np.ndarray | Value = np.zeros((), np.float32)
    nodes: list[Node] = []
    sub = m.producer(v, "sub")
    if sub is not None:
        z = sub.inputs[1]
        found = known(m, z)
        if found is None:                         # at run time: an integer's f32 (an exact zero point)
            widened = m.producer(z, "cast")
            if widened is None or z.type.rank != 0 or not widened.inputs[0].type.dtype.is_int:
                return None
            found = widened.inputs[0]
        zero, v = found, sub.inputs[0]
        nodes += [sub, *filter(None, [m.producer(z)])]
    cast = m.producer(v, "cast")
    if cast is None or cast.attrs.dtype != DType.f32 or cast.inputs[0].type.dtype not in EIGHT_BITS:
        return None
    return Shifted(cast.inputs[0], zero, tuple(nodes + [cast]))


def _per_channel(a: np.ndarray, shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    """``a`` broadcast to ``shape`` as one value per slice along ``axis`` (shape [N]), or None where
    it varies within a slice (along the contracted axes)."""
    full = np.moveaxis(np.broadcast_to(a, shape), axis, 0).reshape(shape[axis], -1)
    return full[:, 0] if (full == full[:, :1]).all() else None


def integer_weights(q: np.ndarray, zero: np.ndarray, axis: int) -> np.ndarray | Refusal:
    """The weights ``q - zero`` (i64), their output channels along ``axis``, when they fit i8 and
    their sums fit i32; else the Refusal."""
    w = q.astype(np.int64) - np.broadcast_to(zero, q.shape).astype(np.int64)
    if w.min() < -128 or w.max() > 127:
        return Refusal("the weights minus their zero point leave i8's range")
    k = w.size // w.shape[axis]
    if k * 255 * 128 > I32_MAX:
        return Refusal(f"K = {k} products could overflow the i32 sums")
    return w


def channel_sums(w: np.ndarray, axis: int) -> np.ndarray:
    """sum_k w: one per output channel (``axis``), over the contracted axes (i64)."""
    return w.sum(axis=tuple(i for i in range(w.ndim) if i != axis))


def plan(m: Match) -> IntegerContraction | Refusal | None:
    """How the matmul, gemm or conv2d at ``m`` runs on integers; a Refusal naming why not; None
    when its operands are not both dequantized."""
    node = m.node
    if node.op == "gemm" and node.attrs.trans_a:
        return None
    a = dequantized(m, node.inputs[0])
    b = dequantized(m, node.inputs[1])
    if a is None or b is None or (node.op != "conv2d" and (node.inputs[0].type.rank < 2
                                                           or node.inputs[1].type.rank != 2)):
        return None
    if a.q.type.dtype not in EIGHT_BITS or b.q.type.dtype not in EIGHT_BITS:
        return Refusal(f"the operands are {a.q.type.dtype.value} and {b.q.type.dtype.value}, not 8-bit integers")
    if a.scale.size != 1 or a.zero.size != 1:
        return Refusal("the activations' scale and zero point are not one number each (per-tensor)")
    if not b.q.is_constant:
        return Refusal("the weights are not constant (their sums are needed at compile time)")
    trans = node.op == "gemm" and node.attrs.trans_b
    axis = 0 if node.op == "conv2d" or trans else 1                     # the output channels, as stored
    w = integer_weights(b.q.data, b.zero, axis)
    if isinstance(w, Refusal):
        return w
    w_scale = _per_channel(b.scale, w.shape, axis)
    if w_scale is None:
        return Refusal("the weights' scale varies along the contracted axis (one scale per output channel or tensor only)")
    flip = a.q.type.dtype == DType.i8
    zx = int(np.rint(a.zero.reshape(()))) + (128 if flip else 0)
    correction = zx * channel_sums(w, axis)                             # i64 [N]
    alpha = node.attrs.alpha if node.op == "gemm" else 1.0
    scale = (np.float32(alpha) * np.float32(a.scale.reshape(())) * w_scale.astype(np.float32)).astype(np.float32)
    bias = node.inputs[2] if len(node.inputs) == 3 else None
    retired = a.nodes + b.nodes + (b.q,)
    if bias is not None:
        q = dequantized(m, bias)
        beta = node.attrs.beta if node.op == "gemm" else 1.0
        n = w.shape[axis]
        if (q is not None and beta == 1.0 and q.q.type.dtype == DType.i32 and q.q.is_constant and not q.zero.any()
                and q.q.data.size in (1, n) and q.scale.size in (1, n)
                and np.array_equal(np.broadcast_to(q.scale.reshape(-1), (n,)), np.broadcast_to(scale.reshape(-1), (n,)))):
            correction = correction - q.q.data.reshape(-1).astype(np.int64)   # the bias in the integers
            bias, retired = None, retired + q.nodes + (q.q,)
        elif beta != 1.0:
            return Refusal("a gemm's float bias scaled by beta != 1")
    if np.abs(correction).max(initial=0) > I32_MAX:
        return Refusal("the zero-point correction leaves i32's range")
    w = w.T if trans else w                                             # matmul_integer's [K, N]
    return IntegerContraction(a.q, flip, zx, w.astype(np.int8), correction.astype(np.int32), scale, bias, retired)


def unsigned(m: Match, v: Value, base: str) -> Value:
    """``v`` as u8: an i8 one (activations, or their zero point) fed as v + 128, its top bit flipped."""
    if v.type.dtype != DType.i8:
        return v
    return m.emit("xor", [m.emit("bitcast", [v], base + "_u8", dtype=DType.u8),
                          m.constant(base + "_flip", np.array(0x80, np.uint8))], base + "_x")


def integer_op(m: Match, float_op: Node, x: Value, w: np.ndarray, zero: int | Value) -> Value:
    """The integer form of the float contraction ``float_op``: ``matmul_integer(x, @w)``, or
    ``conv2d_integer(x, @w, zx)`` (its padding reads the zero point ``zero``: a u8 known now,
    or the activations' zero point at run time), with x and a run-time zero point as u8."""
    base = m.node.outputs[0].name
    x, w = unsigned(m, x, base), m.constant(base + "_w", np.ascontiguousarray(w.astype(np.int8)))
    if float_op.op != "conv2d":
        return m.emit("matmul_integer", [x, w], base + "_i32")
    inputs = [x, w]
    if any(float_op.attrs.padding):
        inputs.append(unsigned(m, zero, base + "_zx") if isinstance(zero, Value)
                      else m.constant(base + "_pad", np.array(zero, np.uint8)))
    return m.emit("conv2d_integer", inputs, base + "_i32", **asdict(float_op.attrs))


def channel_constant(m: Match, float_op: Node, base: str, a: np.ndarray) -> Value:
    """A constant of one value per output channel, shaped to broadcast against the output: [N]
    after a matmul, [O, 1, 1] after a conv2d (NCHW)."""
    return m.constant(base, a.reshape(-1, 1, 1) if float_op.op == "conv2d" and a.size > 1 else a)


@rule("matmul", "gemm", "conv2d")
def integer_contraction(m: Match) -> Node | None:
    """matmul((f32(x) - zx) · sx, (f32(@w) - @zw) · @sw) -> f32(matmul_integer(x, @w - @zw) - @c) · @s;  conv2d alike"""
    p = plan(m)
    if not isinstance(p, IntegerContraction):
        return None
    node, base = m.node, m.node.outputs[0].name
    m.retire(*p.retired)
    y = integer_op(m, node, p.x, p.w, p.zero)
    if p.correction.any():
        y = m.emit("sub", [y, channel_constant(m, node, base + "_zero", p.correction)], base + "_i32")
    y = m.emit("cast", [y], base + "_f32", dtype=DType.f32)
    scale = channel_constant(m, node, base + "_scale", p.scale)
    if p.bias is None:
        return m.rebuilt("mul", [y, scale])
    y = m.emit("mul", [y, scale], base + "_scaled")
    bias = p.bias if node.op != "conv2d" else m.emit("reshape", [p.bias], base + "_bias",
                                                     shape=(*p.bias.type.shape, 1, 1))    # [O] -> [O, 1, 1]
    return m.rebuilt("add", [y, bias])


@rule("cast")
def integer_sums(m: Match) -> Value | None:
    """cast(matmul(f32(x) - zx, f32(@w) - @zw), i32) -> matmul_integer(x, @w - @zw) - zx · sum_k(@w - @zw);  conv2d alike"""
    op = m.producer(m.node.inputs[0], "matmul", "conv2d")
    if m.node.attrs.dtype != DType.i32 or op is None or len(op.inputs) != 2 or (
            op.op == "matmul" and (op.inputs[0].type.rank < 2 or op.inputs[1].type.rank != 2)):
        return None
    a, b = shifted(m, op.inputs[0]), shifted(m, op.inputs[1])
    if (a is None or b is None or not b.q.is_constant or isinstance(b.zero, Value)
            or (isinstance(a.zero, np.ndarray) and a.zero.size != 1)
            or (op.op == "conv2d" and isinstance(a.zero, Value) and a.zero.type.dtype != a.q.type.dtype)):
        return None
    axis = 0 if op.op == "conv2d" else 1
    w = integer_weights(b.q.data, b.zero, axis)
    if isinstance(w, Refusal):
        return None
    base = m.node.outputs[0].name
    m.retire(op, *a.nodes, *b.nodes, b.q)
    flip = a.q.type.dtype == DType.i8
    known_zero = isinstance(a.zero, np.ndarray)
    zx = int(np.rint(a.zero.reshape(()))) + 128 * flip if known_zero else a.zero
    y = integer_op(m, op, a.q, w, zx)
    sums = channel_sums(w, axis)
    if known_zero:                               # zx known now: zx · sum_k w, one constant
        if not (zx * sums).any():
            return y
        return m.rebuilt("sub", [y, channel_constant(m, op, base + "_zero", (zx * sums).astype(np.int32))])
    zx = m.emit("cast", [a.zero], base + "_zx", dtype=DType.i32)      # zx at run time
    if flip:
        zx = m.emit("add", [zx, m.constant(base + "_128", np.array(128, np.int32))], base + "_zx")
    zero = m.emit("mul", [zx, channel_constant(m, op, base + "_sums", sums.astype(np.int32))], base + "_zero")
    return m.rebuilt("sub", [y, zero])
