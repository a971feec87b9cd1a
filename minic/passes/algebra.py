"""simplify-algebra: ``x*1 -> x``, ``x+0 -> x``, ``x-0 -> x``, ``x/1 -> x``, ``x**1 -> x``,
``neg(neg(x)) -> x``, ``transpose(transpose(x, p), q) -> transpose(x, p∘q)``,
``f(max_pool2d(x)) -> max_pool2d(f(x))`` for an elementwise f that keeps order, and a constant
factor into the terms that multiply by constants already: ``(x·k + c)·s -> x·(k·s) + c·s``."""
from __future__ import annotations

import numpy as np

from minic.ir.graph import Node, Value
from minic.ir.types import DType
from minic.passes.rewrite import Match, rule

# op -> (the constant that leaves the other operand unchanged, may it stand on the left?)
# x + 0 -> x holds up to the sign of zero (-0.0 + 0.0 = +0.0), as in every ML
# compiler; the other identities hold bit for bit.
NEUTRAL = {"add": (0, True), "sub": (0, False), "mul": (1, True), "div": (1, False), "pow": (1, False)}


def is_splat(v: Value, number: float) -> bool:
    """v is a constant whose every element equals ``number``."""
    return v.is_constant and v.data.size > 0 and bool(np.all(v.data == number))


@rule(*NEUTRAL)
def neutral_operand(m: Match) -> Value | None:
    """x*1, 1*x, x+0, 0+x, x-0, x/1, x**1 -> x  (when the constant does not broadcast x larger)"""
    number, commutes = NEUTRAL[m.node.op]
    a, b = m.node.inputs
    out = m.node.outputs[0].type
    if is_splat(b, number) and a.type == out:
        return a
    if commutes and is_splat(a, number) and b.type == out:
        return b
    return None


@rule("neg")
def double_negation(m: Match) -> Value | None:
    """neg(neg(x)) -> x"""
    inner = m.producer(m.node.inputs[0], "neg")
    return inner.inputs[0] if inner else None


@rule("transpose")
def transpose_pair(m: Match) -> Value | Node | None:
    """transpose(transpose(x, p), q) -> transpose(x, p∘q);  -> x when the permutations cancel"""
    inner = m.producer(m.node.inputs[0], "transpose")
    if inner is None:
        return None
    perm = tuple(inner.attrs.perm[i] for i in m.node.attrs.perm)     # p∘q: out axis i reads x axis p[q[i]]
    if perm == tuple(range(len(perm))):
        return inner.inputs[0]
    return m.rebuilt("transpose", [inner.inputs[0]], perm=perm)


# Elementwise ops that keep order (x <= y gives f(x) <= f(y)), their other operand a scalar
# constant c where they have one: then f(max(x, y)) = max(f(x), f(y)), so f may run before a
# max pool as well as after it.
ORDER_KEEPING = ("relu", "round", "floor", "ceil", "cast", "add", "sub", "mul", "div", "max", "min")


@rule(*ORDER_KEEPING)
def order_keeping_before_max_pool(m: Match) -> Node | None:
    """f(max_pool2d(x)) -> max_pool2d(f(x)), when f keeps order and x is made by a node: f joins
    the kernel that makes x.  A quantization (x · rx, round, clamp, cast to u8) after a max pool
    then pools bytes, and the kernel before it stores bytes, not floats."""
    node = m.node
    pooled = [v for v in node.inputs if not v.is_constant]
    pool = m.producer(pooled[0], "max_pool2d") if len(pooled) == 1 else None
    if pool is None or m.users(pooled[0]) != 1 or m.producer(pool.inputs[0]) is None:
        return None
    x = pool.inputs[0]
    if not _keeps_order(m, node, pooled[0], x):
        return None
    moved = m.emit(node.op, [x if v is pooled[0] else v for v in node.inputs], f"{node.outputs[0].name}_unpooled",
                   **vars(node.attrs))
    return m.rebuilt("max_pool2d", [moved], **vars(pool.attrs))


def _keeps_order(m: Match, node: Node, pooled: Value, x: Value) -> bool:
    """``node`` keeps the order of ``pooled``'s values (and of ``x``'s, which it will read instead)."""
    if len(node.inputs) == 1:
        return node.op != "cast" or _fits(m, x, node.attrs.dtype)
    a, b = node.inputs
    c = b if a is pooled else a
    if not c.is_constant or c.data.size != 1 or node.op in ("relu", "round", "floor", "ceil", "cast"):
        return False
    if node.op in ("mul", "div"):
        return float(c.data) > 0 and (node.op == "mul" or c is b)
    return node.op != "sub" or c is b                       # x - c keeps order, c - x reverses it


def _fits(m: Match, x: Value, target: DType) -> bool:
    """A cast to ``target`` keeps order on x's values: a float target, or x clamped into the
    integer target's range (``min(max(x, lo), hi)``, as a quantization clamps)."""
    if target.is_float:
        return True
    if not target.is_int or x.type.dtype.is_int:
        return False
    bounds = {}
    v = x
    for _ in range(2):
        node = m.producer(v, "min", "max")
        if node is None or not node.inputs[1].is_constant or node.inputs[1].data.size != 1:
            return False
        bounds[node.op], v = float(node.inputs[1].data), node.inputs[0]
    info = np.iinfo(target.numpy)
    return len(bounds) == 2 and bounds["max"] >= info.min and bounds["min"] <= info.max


# A constant factor s moves into an expression whose every term multiplies by a constant (or is
# one): (x·k + c)·s = x·(k·s) + c·s, and relu(y)·s = relu(y·s) where s >= 0.  Its products fold,
# and the multiply is gone: a requantization's 1/scale joins the scale and bias of the
# dequantization before it (what ONNX Runtime's QLinearConv computes as one multiplier).
# In floats this reassociates (the sums differ in their last bits), as folding a batch norm does.
ABSORBING = ("mul", "add", "sub", "relu")


@rule("mul")
def constant_factor_into_terms(m: Match) -> Value | None:
    """(x·k + c)·s -> x·(k·s) + c·s;  (x·k)·s -> x·(k·s);  relu(y)·s -> relu(y·s), s >= 0  (s, k, c constants)"""
    a, b = m.node.inputs
    x, s = (a, b) if b.is_constant else (b, a)
    if not s.is_constant or x.is_constant or not x.type.dtype.is_float or s.type.dtype != x.type.dtype:
        return None
    if m.producer(x, *ABSORBING) is None or not _absorbs(m, x, s):
        return None
    return _scaled(m, x, s)


def _absorbs(m: Match, v: Value, s: Value) -> bool:
    """v·s can be written without a multiply of its own: v is a constant, or a term read only here
    that multiplies by a constant, or a sum, difference or relu (s >= 0) of such terms."""
    if v.is_constant:
        return True
    node = m.producer(v, *ABSORBING)
    if node is None or m.users(v) != 1:
        return False
    if node.op == "mul":
        return any(u.is_constant for u in node.inputs)
    if node.op == "relu":
        return bool(np.all(s.data >= 0)) and _absorbs(m, node.inputs[0], s)
    return all(_absorbs(m, u, s) for u in node.inputs)


def _scaled(m: Match, v: Value, s: Value) -> Value:
    """v·s, where ``_absorbs``: the constants multiplied now, the terms rebuilt around them (what
    they replace is retired: dropped unless something else reads it)."""
    if v.is_constant:
        m.retire(v)
        return m.constant(f"{v.name}_scaled", (v.data * s.data).astype(v.data.dtype))
    node = m.producer(v)
    m.retire(node)
    if node.op == "mul":
        x, k = node.inputs if node.inputs[1].is_constant else node.inputs[::-1]
        return m.emit("mul", [x, _scaled(m, k, s)], v.name)
    return m.emit(node.op, [_scaled(m, u, s) for u in node.inputs], v.name)
