"""One TOSA emit rule per minic op: ``RULES[op](emitter, node, attrs) -> MLIR value(s)``.

Grouped like ``ops.py`` (elementwise, contraction, reductions and
normalizations); layout and window ops are in ``tosa_layout.py``.  Helpers on
the emitter (``tosa_emit.py``) do the rank alignment TOSA needs, so a rule
reads like the formula: ``em.binary("mul", x, em.unary("sigmoid", x))`` is silu.
"""
from __future__ import annotations

import math

import numpy as np

from bridges.mlir import tosa_layout as layout
from bridges.mlir.tosa_emit import dims
from minic.errors import UnsupportedError
from minic.ir.types import DType
from minic.registry import Registry


def _ins(em, node):
    return [em.values[v] for v in node.inputs]


def _need_float(node, what: str = "") -> None:
    dt = node.inputs[0].type.dtype
    if not dt.is_float:
        raise UnsupportedError(f"MLIR bridge (tosa): {what or node.op} on {dt.value} "
                               f"(node {node.outputs[0].name})")


# ---- elementwise ---------------------------------------------------------------------
DIRECT = {"exp": "exp", "log": "log", "tanh": "tanh", "sigmoid": "sigmoid", "erf": "erf",
          "abs": "abs", "floor": "floor", "ceil": "ceil", "sin": "sin", "cos": "cos",
          "rsqrt": "rsqrt", "neg": "negate"}


def unary(em, node, attrs):
    (x,) = _ins(em, node)
    name = node.op
    if name not in ("neg", "abs", "relu"):
        _need_float(node)
    if name in DIRECT:
        if name == "neg" and not node.inputs[0].type.dtype.is_float:
            return em.binary("sub", em.scalar(0, x), x)       # tosa.negate on i64 fails to lower
        return em.unary(DIRECT[name], x)
    if name == "relu":
        return relu_value(em, x, node.inputs[0].type.dtype)
    if name == "sqrt":                     # no tosa.sqrt: 1 / rsqrt(x)  (rsqrt(0) = inf -> 0)
        return em.unary("reciprocal", em.unary("rsqrt", x))
    if name == "tan":
        return em.binary("mul", em.unary("sin", x), em.unary("reciprocal", em.unary("cos", x)))
    if name == "silu":
        return em.binary("mul", x, em.unary("sigmoid", x))
    raise UnsupportedError(f"MLIR bridge (tosa): op '{name}' has no TOSA form "
                           f"(node {node.outputs[0].name})")


def relu_value(em, x, dtype: DType):
    """relu is ``tosa.clamp(x, 0, +inf)``; TOSA's profiles have no i64 clamp, so ints use maximum."""
    from mlir import ir
    from mlir.dialects import tosa
    from bridges.mlir.tosa_emit import elem_of
    if not dtype.is_float:
        return em.binary("maximum", x, em.scalar(0, x))
    f = elem_of(x)
    return tosa.clamp(em.like(x), x, ir.FloatAttr.get(f, 0.0), ir.FloatAttr.get(f, float("inf")))


BINARY = {"add": "add", "sub": "sub", "mul": "mul", "max": "maximum", "min": "minimum", "pow": "pow"}


def binary(em, node, attrs):
    a, b = _ins(em, node)
    if node.op == "div":
        if node.inputs[0].type.dtype.is_float:     # no float divide in TOSA
            return em.binary("mul", a, em.unary("reciprocal", b))
        return int_div(em, a, b)                   # its data checks: checks.py, from the op
    if node.op == "pow":
        _need_float(node)
    return em.binary(BINARY[node.op], a, b)


def int_div(em, a, b):
    """``tosa.intdiv`` truncates toward zero, as minic's div.  Its divisor is 1 where ``b`` is
    0 or -1 (x86's idiv traps on MIN / -1; both are data checks' flags, checks.py), and the
    quotient for -1 is 0 - a (ops._safe_divisor, in arith)."""
    rank = max(len(dims(a)), len(dims(b)))      # first, so that no i1 below needs a reshape
    a, b = em.ranked(a, rank), em.ranked(b, rank)
    one, minus_one = em.scalar(1, b), em.scalar(-1, b)
    safe = em.select(em.binary("equal", b, em.scalar(0, b)), one, b)
    safe = em.select(em.binary("equal", b, minus_one), one, safe)
    q = em.binary("intdiv", a, safe)
    return em.select(em.binary("equal", b, minus_one), em.binary("sub", em.scalar(0, a), a), q)


def compare(em, node, attrs):
    a, b = _ins(em, node)
    i1 = em.i1()
    flag = {"eq": lambda: em.binary("equal", a, b),
            "gt": lambda: em.binary("greater", a, b, result_elem=i1),
            "lt": lambda: em.binary("greater", b, a, result_elem=i1),
            "ge": lambda: em.binary("greater_equal", a, b, result_elem=i1),
            "le": lambda: em.binary("greater_equal", b, a, result_elem=i1)}[node.op]()
    return em.byte(flag)


def logical(em, node, attrs):
    """On the stored 0/1 bytes, bitwise ops *are* the logical ones (not x = x xor 1);
    staying in i8 keeps i1 tensors out of reshapes and tiles, where they could not be
    fused away and would reach memory (see the module docstring)."""
    ins = _ins(em, node)
    if node.op == "not":
        return em.binary("bitwise_xor", ins[0], em.scalar(1, ins[0]))
    return em.binary(f"bitwise_{node.op}", *ins)


def where(em, node, attrs):
    return em.select(*_ins(em, node))


def cast(em, node, attrs):
    (x,) = _ins(em, node)
    src, dst = node.inputs[0].type.dtype, attrs.dtype
    if src == dst:
        return x
    if dst == DType.bool:                  # x != 0
        return em.byte(em.unary("logical_not", em.binary("equal", x, em.scalar(0, x))))
    if src.is_float and not dst.is_float:
        x = trunc_value(em, x)             # tosa.cast rounds to nearest; minic truncates
    return em.cast(x, em.elem(dst))


def trunc_value(em, x):
    """Round toward zero: floor for x >= 0, ceil below."""
    from mlir.dialects import tosa
    negative = em.binary("greater", em.scalar(0.0, x), x, result_elem=em.i1())
    return tosa.select(em.like(x), negative, em.unary("ceil", x), em.unary("floor", x))


def gelu(em, node, attrs):
    """0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation."""
    _need_float(node)
    (x,) = _ins(em, node)
    c = lambda v: em.scalar(v, x)            # noqa: E731
    if attrs.approximate == "tanh":
        cube = em.binary("mul", em.binary("mul", x, x), x)
        inner = em.binary("mul", c(math.sqrt(2 / math.pi)), em.binary("add", x, em.binary("mul", c(0.044715), cube)))
        phi = em.binary("add", c(1.0), em.unary("tanh", inner))
    else:
        phi = em.binary("add", c(1.0), em.unary("erf", em.binary("mul", x, c(1 / math.sqrt(2)))))
    return em.binary("mul", em.binary("mul", c(0.5), x), phi)


def passthrough(em, node, attrs):
    return em.values[node.inputs[0]]


def batch_norm(em, node, attrs):
    """(x - mean) * rsqrt(var + eps) * scale + bias, parameters reshaped to [1, C, 1, ...]."""
    _need_float(node)
    x, scale, bias, mean, var = _ins(em, node)
    rank = len(dims(x))
    per_c = lambda v: em.reshape(v, [1, dims(v)[0]] + [1] * (rank - 2))   # noqa: E731
    inv = em.unary("rsqrt", em.binary("add", per_c(var), em.scalar(attrs.eps, x)))
    out = em.binary("mul", em.binary("sub", x, per_c(mean)), em.binary("mul", inv, per_c(scale)))
    return em.binary("add", out, per_c(bias))


# ---- contraction ------------------------------------------------------------------------
def matmul_values(em, a, b):
    """Batched, broadcasting matmul of two rank >= 2 tensors via rank-3 ``tosa.matmul``."""
    from mlir.dialects import tosa
    ash, bsh = dims(a), dims(b)
    m, k, n = ash[-2], ash[-1], bsh[-1]
    batch = list(np.broadcast_shapes(tuple(ash[:-2]), tuple(bsh[:-2])))
    nb = int(np.prod(batch, dtype=np.int64))
    if int(np.prod(bsh[:-2], dtype=np.int64)) == 1:
        # One right-hand matrix: fold a's batch into its rows, [B*M, K] @ [K, N].
        a3, b3, rows, count = em.reshape(a, [1, nb * m, k]), em.reshape(b, [1, k, n]), nb * m, 1
    else:
        a_full = em.tile(em.ranked(a, len(batch) + 2), batch + [m, k])
        b_full = em.tile(em.ranked(b, len(batch) + 2), batch + [k, n])
        a3, b3, rows, count = em.reshape(a_full, [nb, m, k]), em.reshape(b_full, [nb, k, n]), m, nb
    zp = em.zero_point(a)
    out = tosa.matmul(em.like(a, [count, rows, n]), a3, b3, zp, zp)
    return em.reshape(out, batch + [m, n])


def matmul(em, node, attrs):
    _need_float(node)
    a, b = _ins(em, node)
    ash, bsh = dims(a), dims(b)
    a2 = em.reshape(a, [1] + ash) if len(ash) == 1 else a      # [K] -> [1, K]
    b2 = em.reshape(b, bsh + [1]) if len(bsh) == 1 else b      # [K] -> [K, 1]
    return em.reshape(matmul_values(em, a2, b2), em.shape(node.outputs[0]))


def gemm(em, node, attrs):
    """alpha * op(a) @ op(b) + beta * c."""
    _need_float(node)
    a, b = _ins(em, node)[:2]
    if attrs.trans_a:
        a = em.transpose(a, (1, 0))
    if attrs.trans_b:
        b = em.transpose(b, (1, 0))
    y = matmul_values(em, a, b)
    if attrs.alpha != 1.0:
        y = em.binary("mul", em.scalar(attrs.alpha, y), y)
    if len(node.inputs) == 3:
        c = em.values[node.inputs[2]]
        if attrs.beta != 1.0:
            c = em.binary("mul", em.scalar(attrs.beta, c), c)
        y = em.binary("add", y, c)
    return y


# ---- reductions and normalizations ----------------------------------------------------
def mean_value(em, x, axes, keepdims: bool):
    shape = dims(x)
    count = int(np.prod([shape[a % len(shape)] for a in axes], dtype=np.int64))
    total = em.reduce("sum", x, axes, keepdims)
    return em.binary("mul", total, em.scalar(1.0 / count, total))


def _reduce(kind):
    def rule(em, node, attrs):
        _need_float(node, f"reduce_{kind}")
        (x,) = _ins(em, node)
        if kind == "mean":
            return mean_value(em, x, attrs.axes, attrs.keepdims)
        return em.reduce(kind, x, attrs.axes, attrs.keepdims)
    return rule


def _softmax(log: bool):
    def rule(em, node, attrs):
        """exp(x - max) / sum(exp(x - max))  (log: x - max - log(sum))."""
        _need_float(node)
        (x,) = _ins(em, node)
        axis = attrs.axis % len(dims(x))
        shifted = em.binary("sub", x, em.reduce("max", x, (axis,), True))
        e = em.unary("exp", shifted)
        total = em.reduce("sum", e, (axis,), True)
        if log:
            return em.binary("sub", shifted, em.unary("log", total))
        return em.binary("mul", e, em.unary("reciprocal", total))
    return rule


def layer_norm(em, node, attrs):
    """(x - mean) * rsqrt(var + eps) [* weight] [+ bias] over axes axis..rank-1."""
    _need_float(node)
    x, *params = _ins(em, node)
    rank = len(dims(x))
    axes = tuple(range(attrs.axis % rank, rank))
    centered = em.binary("sub", x, mean_value(em, x, axes, True))
    var = mean_value(em, em.binary("mul", centered, centered), axes, True)
    out = em.binary("mul", centered, em.unary("rsqrt", em.binary("add", var, em.scalar(attrs.eps, var))))
    for p, op in zip(params, ("mul", "add")):
        out = em.binary(op, out, p)
    return out


def global_avg_pool(em, node, attrs):
    _need_float(node)
    return mean_value(em, em.values[node.inputs[0]], (2, 3), True)


RULES = Registry.of("op of the MLIR bridge (TOSA)", {
    **{n: unary for n in ("neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                          "silu", "erf", "sin", "cos", "tan", "floor", "ceil", "round")},
    **{n: binary for n in ("add", "sub", "mul", "div", "pow", "max", "min")},
    **{n: compare for n in ("eq", "lt", "gt", "ge", "le")},
    **{n: logical for n in ("and", "or", "xor", "not")},
    "where": where, "cast": cast, "gelu": gelu, "identity": passthrough, "dropout": passthrough,
    "batch_norm": batch_norm, "matmul": matmul, "gemm": gemm,
    **{f"reduce_{k}": _reduce(k) for k in ("sum", "mean", "max", "min")},
    "softmax": _softmax(False), "log_softmax": _softmax(True), "layer_norm": layer_norm,
    "global_avg_pool": global_avg_pool,
    **layout.RULES,
}, UnsupportedError)
