"""How the random-graph generator places each op: one *spec* per kind of op.

An op's definition names its spec (``OpDef.sample``, the op's own name when
unset), so ``SPECS`` -- op name -> spec -- is derived from the op registry.

A spec picks operands from the pool (or makes new inputs and constants of a
shape that fits), picks attributes, and emits the node through
``Builder.emit`` — which runs the op's own shape inference, so a spec may be
loose: an invalid combination raises and the generator tries another op.

Numbers stay finite by construction (and the driver regenerates the rare graph
whose reference output is still not finite or is ill-conditioned):

* ``log``, ``sqrt``, ``rsqrt``, a divisor and a ``pow`` base get ``abs(x) + 0.5``;
* ``exp`` and ``pow``'s exponent get ``tanh(x)`` when ``x`` may be large, ``tan`` always;
* discontinuous ops (``floor``, comparisons, casts to int) only see *exact* values.

What the specs leave out, and why: f16 (its tolerance would hide f32 bugs; the
zoo covers it), ``shape``/``reshape_dynamic`` (ONNX-import artefacts with no torch
spelling), ``range`` (no operand: it is tested against torch.arange on the
corpus and the Core ATen samples), negative slice steps and negative gather indices (torch has no such
indexing, so the torch module could not express them), integer ``div``.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from minic.verify.builder import SYMBOL, Builder, Reject, Slot
from minic.ir import ops
from minic.ir.ops.layout import END
from minic.ir.types import DType
from minic.registry import Registry

Spec = Callable[[Builder], None]
KINDS = Registry("random-graph spec")           # spec name -> fn(builder, op name)
INTS = (DType.i64, DType.i32)
spec = KINDS.add


# --- operand predicates and guards --------------------------------------------------

def floats(s: Slot) -> bool:
    return s.is_float


def numbers(s: Slot) -> bool:
    return s.type.dtype in (DType.f32,) + INTS


def ranked(pred, lo: int = 1, hi: int = 99):
    return lambda s: pred(s) and lo <= s.rank <= hi


def squash(b: Builder, s: Slot, limit: float) -> Slot:
    """``s`` itself when it is small enough, else ``tanh(s)``."""
    return s if s.bound <= limit else b.emit1("tanh", [s], 1.0)


def positive(b: Builder, s: Slot) -> Slot:
    """``abs(s) + 0.5``: a safe argument for log, sqrt, rsqrt, a divisor, a pow base."""
    a = b.emit1("abs", [squash(b, s, 1e3)], min(s.bound, 1e3))
    return b.emit1("add", [a, b.const(np.array(0.5, np.float32))], a.bound + 0.5)


def axis_spelling(b: Builder, axis: int, rank: int) -> int:
    """An axis, written from the front or (half the time) from the back."""
    return axis - rank if b.chance(0.5) else axis


def numel(shape, symbolic: int = 4) -> int:
    return math.prod(d if isinstance(d, int) else symbolic for d in shape)


# --- elementwise ----------------------------------------------------------------------

@spec("unary", "float_unary", "bounded_unary", "gelu", "dropout")
def unary(b: Builder, op: str) -> None:
    """unary: ints too; float_unary: floats, |f(x)| <= |x| + 0.2; bounded_unary: floats, |f(x)| <= 1."""
    kind = ops.get(op).sample or op
    x = b.pick(numbers if kind == "unary" else floats)
    attrs = {"gelu": {"approximate": b.choice(["none", "tanh"])},
             "dropout": {"p": b.choice([0.1, 0.5])}}.get(op, {})
    b.emit1(op, [x], 1.0 if kind == "bounded_unary" else x.bound + 0.2, **attrs)


@spec("exp")
def exp(b: Builder, op: str) -> None:
    x = squash(b, b.pick(), 4.0)
    b.emit1("exp", [x], math.exp(x.bound))


@spec("domain")
def domain(b: Builder, op: str) -> None:
    x = positive(b, b.pick())
    bound = {"log": max(0.7, math.log(x.bound)), "sqrt": math.sqrt(x.bound), "rsqrt": 1.5}[op]
    b.emit1(op, [x], bound)


@spec("tan")
def tan(b: Builder, op: str) -> None:
    b.emit1("tan", [b.emit1("tanh", [b.pick()], 1.0)], 1.6)     # |tanh| < 1 < pi/2


@spec("rounding")
def rounding(b: Builder, op: str) -> None:
    x = b.pick(lambda s: s.is_float and s.exact)
    b.emit1(op, [x], x.bound + 1)


@spec("arithmetic")
def arithmetic(b: Builder, op: str) -> None:
    x = b.pick(numbers)
    y = b.operand(b.partner(x.shape), x.type.dtype)
    if b.chance(0.3):
        x, y = y, x
    bound = {"mul": x.bound * y.bound, "max": max(x.bound, y.bound),
             "min": max(x.bound, y.bound)}.get(op, x.bound + y.bound)
    b.emit1(op, [x, y], bound)


@spec("div")
def div(b: Builder, op: str) -> None:
    x = b.pick()
    y = positive(b, b.operand(b.partner(x.shape)))
    if b.chance(0.3):
        y = b.emit1("neg", [y], y.bound)
    b.emit1("div", [x, y], x.bound * 2)


@spec("pow")
def power(b: Builder, op: str) -> None:
    base = positive(b, squash(b, b.pick(), 8.0))
    if b.chance(0.5):
        e = b.uniform(b.partner(base.shape), -2.0, 2.0)
    else:
        e = squash(b, b.operand(b.partner(base.shape)), 2.0)
    b.emit1("pow", [base, e], max(base.bound ** e.bound, 2.0 ** e.bound))


@spec("compare")
def compare(b: Builder, op: str) -> None:
    x = b.pick(lambda s: numbers(s) and s.exact)
    y = b.operand(b.partner(x.shape), x.type.dtype)
    if not y.exact:
        raise Reject("comparisons take exact operands only")
    b.emit1(op, [x, y] if b.chance(0.5) else [y, x], 1.0)


def bools(s: Slot) -> bool:
    return s.type.dtype == DType.bool


@spec("logical")
def logical(b: Builder, op: str) -> None:
    x = b.pick(bools, fresh=lambda: b.input(b.shape(), DType.bool))
    y = b.operand(b.partner(x.shape), DType.bool)
    b.emit1(op, [x, y], 1.0)


@spec("not")
def logical_not(b: Builder, op: str) -> None:
    b.emit1("not", [b.pick(bools, fresh=lambda: b.input(b.shape(), DType.bool))], 1.0)


@spec("where")
def where(b: Builder, op: str) -> None:
    a = b.pick()
    cond = b.operand(b.partner(a.shape), DType.bool)
    other = b.operand(b.partner(a.shape))
    b.emit1("where", [cond, a, other] if b.chance(0.5) else [cond, other, a], max(a.bound, other.bound))


@spec("cast")
def cast(b: Builder, op: str) -> None:
    kind = b.choice(["to_int", "to_float", "from_bool"])
    if kind == "to_int":
        x = b.pick(lambda s: s.is_float and s.exact)
        b.emit1("cast", [x], x.bound, dtype=b.choice(INTS))
    elif kind == "to_float":
        x = b.pick(lambda s: s.type.dtype in INTS)
        b.emit1("cast", [x], x.bound, dtype=DType.f32)
    else:
        x = b.pick(bools, fresh=lambda: b.input(b.shape(), DType.bool))
        b.emit1("cast", [x], 1.0, dtype=DType.f32)


# --- reductions and normalisations ----------------------------------------------------

@spec("reduce")
def reduce(b: Builder, op: str) -> None:
    x = b.pick(ranked(floats if op == "reduce_mean" else numbers))
    axes = [a for a in range(x.rank) if b.chance(0.5)] or [b.randint(0, x.rank - 1)]
    count = numel([x.shape[a] for a in axes])
    spelled = tuple(axis_spelling(b, a, x.rank) for a in axes)
    b.emit1(op, [x], x.bound * count if op == "reduce_sum" else x.bound,
            axes=spelled, keepdims=b.chance(0.5))


def image(b: Builder) -> Slot:
    """A float NCHW value with static C, H, W (a new input if the pool has none)."""
    def fresh() -> Slot:
        n = SYMBOL if b.dynamic and b.chance(0.5) else b.randint(1, 2)
        return b.input((n, b.randint(1, 4), b.randint(3, 7), b.randint(3, 7)))
    return b.pick(lambda s: s.is_float and s.rank == 4 and all(isinstance(d, int) for d in s.shape[1:]), fresh)


@spec("global_avg_pool")
def global_pool(b: Builder, op: str) -> None:
    x = image(b)
    b.emit1(op, [x], x.bound)


@spec("softmax")
def softmax(b: Builder, op: str) -> None:
    x = b.pick(ranked(floats))
    axis = b.randint(0, x.rank - 1)
    bound = 1.0 if op == "softmax" else 2 * x.bound + math.log(numel(x.shape[axis:axis + 1]))
    b.emit1(op, [x], bound, axis=axis_spelling(b, axis, x.rank))


@spec("layer_norm")
def layer_norm(b: Builder, op: str) -> None:
    x = b.pick(ranked(floats))
    static_tail = [a for a in range(x.rank) if all(isinstance(d, int) for d in x.shape[a:])]
    axis = b.choice(static_tail[-2:])                       # normalise over the last one or two axes
    extra = [b.uniform(x.shape[axis:], 0.5, 1.5) for _ in range(b.randint(0, 2))]
    bound = math.sqrt(numel(x.shape[axis:])) * (1.5 if extra else 1.0) + 1.0
    b.emit1(op, [x, *extra], bound, axis=axis_spelling(b, axis, x.rank), eps=b.choice([1e-5, 1e-3]))


@spec("batch_norm")
def batch_norm(b: Builder, op: str) -> None:
    x = b.pick(lambda s: s.is_float and 2 <= s.rank <= 4 and isinstance(s.shape[1], int))
    c = (x.shape[1],)
    params = [b.uniform(c), b.uniform(c), b.uniform(c), b.uniform(c, 0.5, 2.0)]  # scale, bias, mean, var
    b.emit1(op, [x, *params], (x.bound + 1) * 1.5 + 1, eps=b.choice([1e-5, 1e-3]))


# --- contractions and windows ---------------------------------------------------------

@spec("matmul")
def matmul(b: Builder, op: str) -> None:
    x = b.pick(lambda s: s.is_float and s.rank >= 1 and isinstance(s.shape[-1], int))
    k, n = x.shape[-1], b.randint(1, b.max_dim)
    shape = b.choice([(k,), (k, n)] + ([b.partner(x.shape[:-2]) + (k, n)] if x.rank >= 3 else []))
    w = b.operand(shape)
    b.emit1("matmul", [x, w], x.bound * w.bound * k)


@spec("gemm")
def gemm(b: Builder, op: str) -> None:
    a = b.pick(lambda s: s.is_float and s.rank == 2, fresh=lambda: b.input(b.shape(2)))
    trans_a, trans_b = b.chance(0.3), b.chance(0.5)
    m, k = a.shape[::-1] if trans_a else a.shape
    if not isinstance(k, int):
        raise Reject("gemm: the contracted dim must be static")
    n = b.randint(1, b.max_dim)
    w = b.operand((n, k) if trans_b else (k, n))
    alpha, beta = b.choice([1.0, 0.5, -1.5]), b.choice([1.0, 0.5, -1.5])
    args = [a, w]
    if b.chance(0.7):
        args.append(b.operand(b.partner((m, n))))
    bound = abs(alpha) * a.bound * w.bound * k + (abs(beta) * args[2].bound if len(args) == 3 else 0)
    b.emit1("gemm", args, bound, trans_a=trans_a, trans_b=trans_b, alpha=alpha, beta=beta)


@spec("conv2d")
def conv2d(b: Builder, op: str) -> None:
    x = image(b)
    c = x.shape[1]
    g = b.choice([d for d in range(1, c + 1) if c % d == 0])
    o, kh, kw = g * b.randint(1, 3), b.randint(1, 3), b.randint(1, 3)
    ph, pw = b.randint(0, kh // 2 + 1), b.randint(0, kw // 2 + 1)
    args = [x, b.uniform((o, c // g, kh, kw))] + ([b.uniform((o,))] if b.chance(0.6) else [])
    b.emit1("conv2d", args, x.bound * (c // g) * kh * kw + 1, stride=(b.randint(1, 2), b.randint(1, 2)),
            padding=(ph, pw, ph, pw), dilation=(b.randint(1, 2), 1), groups=g)


@spec("pool")
def pool(b: Builder, op: str) -> None:
    x = image(b)
    kh, kw = b.randint(1, 3), b.randint(1, 3)
    ph, pw = b.randint(0, kh // 2), b.randint(0, kw // 2)       # torch: padding <= kernel / 2
    attrs = dict(kernel=(kh, kw), stride=(b.randint(1, 3), b.randint(1, 2)), padding=(ph, pw, ph, pw),
                 ceil_mode=b.chance(0.4))
    if op == "max_pool2d":
        attrs["dilation"] = (b.randint(1, 2), 1)
    else:
        attrs["count_include_pad"] = b.chance(0.5)
    b.emit1(op, [x], x.bound, **attrs)


# --- layout ---------------------------------------------------------------------------

def any_value(s: Slot) -> bool:
    return s.rank >= 1


def factor(b: Builder, n: int) -> list[int]:
    """``n`` as a product of a random number of random factors (1s included)."""
    primes, p = [], 2
    while n > 1:
        while n % p == 0:
            primes.append(p)
            n //= p
        p += 1
    dims = [1] * b.randint(1, 3)
    for q in primes:
        dims[b.randint(0, len(dims) - 1)] *= q
    return dims


@spec("reshape")
def reshape(b: Builder, op: str) -> None:
    x = b.pick(lambda s: True)
    symbolic = [d for d in x.shape if not isinstance(d, int)]
    if len(symbolic) > 1 or (symbolic and symbolic[0] != SYMBOL):
        raise Reject("reshape: at most one symbolic dim, B")
    dims: list = factor(b, numel([d for d in x.shape if isinstance(d, int)]))
    if symbolic:
        i = b.randint(0, len(dims) - 1)
        dims[i] = SYMBOL if dims[i] == 1 else f"{dims[i]}*{SYMBOL}"
    b.emit1("reshape", [x], x.bound, shape=tuple(dims))


@spec("expand")
def expand(b: Builder, op: str) -> None:
    x = b.pick(lambda s: True)
    target = [b.randint(2, b.max_dim) if d == 1 and b.chance(0.6) else (1 if b.chance(0.15) else d)
              for d in x.shape]
    target = [b.randint(1, 3) for _ in range(b.randint(0, 1))] + target
    b.emit1("expand", [x], x.bound, shape=tuple(target))


@spec("flatten")
def flatten(b: Builder, op: str) -> None:
    x = b.pick(any_value)
    b.emit1("flatten", [x], x.bound, axis=b.randint(-x.rank, x.rank))


@spec("squeeze")
def squeeze(b: Builder, op: str) -> None:
    x = b.pick(lambda s: 1 in s.shape)
    ones = [a for a, d in enumerate(x.shape) if d == 1]
    axes = [a for a in ones if b.chance(0.6)] or ones[:1]
    b.emit1("squeeze", [x], x.bound, axes=tuple(axis_spelling(b, a, x.rank) for a in axes))


@spec("unsqueeze")
def unsqueeze(b: Builder, op: str) -> None:
    x = b.pick(lambda s: s.rank <= 3)
    out_rank = x.rank + b.randint(1, 2)
    axes = sorted(int(a) for a in b.rng.choice(out_rank, out_rank - x.rank, replace=False))
    b.emit1("unsqueeze", [x], x.bound, axes=tuple(axis_spelling(b, a, out_rank) for a in axes))


@spec("transpose")
def transpose(b: Builder, op: str) -> None:
    x = b.pick(lambda s: s.rank >= 2)
    b.emit1("transpose", [x], x.bound, perm=tuple(int(p) for p in b.rng.permutation(x.rank)))


@spec("concat")
def concat(b: Builder, op: str) -> None:
    x = b.pick(any_value)
    axis = b.choice([a for a, d in enumerate(x.shape) if isinstance(d, int)])
    parts = [x]
    for _ in range(b.randint(1, 2)):
        shape = list(x.shape)
        shape[axis] = b.randint(1, b.max_dim)
        parts.insert(b.randint(0, len(parts)), b.operand(tuple(shape), x.type.dtype))
    b.emit1("concat", parts, max(p.bound for p in parts), axis=axis_spelling(b, axis, x.rank))


@spec("split")
def split(b: Builder, op: str) -> None:
    x = b.pick(lambda s: any(isinstance(d, int) and d >= 2 for d in s.shape))
    axis = b.choice([a for a, d in enumerate(x.shape) if isinstance(d, int) and d >= 2])
    cuts = sorted(set(int(c) for c in b.rng.integers(1, x.shape[axis], b.randint(1, 2))))
    sizes = tuple(np.diff([0, *cuts, x.shape[axis]]).tolist())
    b.emit("split", [x], x.bound, axis=axis_spelling(b, axis, x.rank), sizes=sizes)


@spec("slice")
def slice_(b: Builder, op: str) -> None:
    x = b.pick(any_value)
    axes = sorted(set(b.randint(0, x.rank - 1) for _ in range(b.randint(1, 2))))
    starts, ends, steps = [], [], []
    for a in axes:
        d = x.shape[a]
        if not isinstance(d, int):
            start, end, step = 0, b.choice([d, END]), 1          # the forms a symbolic axis allows
        else:
            start = b.randint(-d, d - 1)
            first = start % d
            end = b.choice([END, b.randint(first + 1, d + 2), b.randint(first + 1, d) - d - 1])
            step = b.choice([1, 1, 2, 3])
        starts.append(start)
        ends.append(end)
        steps.append(step)
    b.emit1("slice", [x], x.bound, axes=tuple(axis_spelling(b, a, x.rank) for a in axes),
            starts=tuple(starts), ends=tuple(ends), steps=tuple(steps))


@spec("gather")
def gather(b: Builder, op: str) -> None:
    x = b.pick(lambda s: any(isinstance(d, int) for d in s.shape))
    axis = b.choice([a for a, d in enumerate(x.shape) if isinstance(d, int)])
    shape = tuple(b.randint(1, 3) for _ in range(b.randint(0, 2)))
    idx = b.const(b.rng.integers(0, x.shape[axis], shape).astype(np.int64))
    b.emit1("gather", [x, idx], x.bound, axis=axis_spelling(b, axis, x.rank))


@spec("pad")
def pad(b: Builder, op: str) -> None:
    x = b.pick(any_value)
    mode = b.choice(["constant", "constant", "edge", "reflect"]) if x.is_float and x.rank in (3, 4) else "constant"
    padded = range(2, x.rank) if mode != "constant" else range(x.rank)   # torch: last 1-2 axes only
    pads = [0] * (2 * x.rank)
    for a in padded:
        d = x.shape[a]
        if isinstance(d, int):
            limit = d - 1 if mode == "reflect" else 2
            pads[a], pads[a + x.rank] = b.randint(0, limit), b.randint(0, limit)
    value = round(float(b.rng.uniform(-1, 1)), 2) if x.is_float else 0.0
    b.emit1("pad", [x], max(x.bound, abs(value)), pads=tuple(pads), mode=mode, value=value)



# op name -> spec, for every op whose definition names a spec (shape and
# reshape_dynamic name none: see the docstring).
SPECS: dict[str, Spec] = {name: (lambda b, fn=KINDS[op.sample or name], name=name: fn(b, name))
                          for name, op in sorted(ops.REGISTRY.items()) if (op.sample or name) in KINDS}

