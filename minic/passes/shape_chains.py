"""fold-constant-gather: ``gather(@c, @i) -> @c[i]``, ``shape(x) -> @[static dims]``, and
``reshape_dynamic(x, concat(unsqueeze(gather(shape(y), k)), @c)) -> reshape(x, [y.shape[k], c])``.

PyTorch's ONNX exporter writes ``x.view(x.size(0), -1)`` as a small program over
shape vectors.  This pass evaluates that program on the *types*: each entry of a
shape vector is an int or a symbolic dim (``B``) read off a tensor's type.
"""
from __future__ import annotations

import numpy as np

from minic.ir.graph import Node, Value
from minic.ir.types import DType, Dim, canon, dim_div, dim_mul, dim_prod
from minic.passes.fold_constants import evaluate, foldable
from minic.passes.rewrite import Match, rule

# The ops of a shape program: each maps vectors of entries to a vector of entries.
CHAIN_OPS = {"shape", "gather", "unsqueeze", "squeeze", "concat", "slice", "identity", "cast", "reshape",
             "mul", "div", "add", "sub"}


def arithmetic(op: str, a: Dim, b: Dim) -> Dim | None:
    """a op b on entries: ints exactly as the i64 ops compute them; a symbolic
    dim only where the result is again a monomial (B*4, 4*T / 2)."""
    if isinstance(a, int) and isinstance(b, int):
        if op == "div":                            # C division, toward zero, like the op
            return None if b == 0 else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
        return {"mul": a * b, "add": a + b, "sub": a - b}[op]
    symbolic = {"mul": dim_mul, "div": dim_div}.get(op)     # B + 1 is no monomial
    return symbolic(a, b) if symbolic else None


class ShapeValues:
    """The entries of i64 vectors (and scalars) that are known from types alone."""

    def __init__(self, producers: dict[Value, Node], seen: list | None = None) -> None:
        self.producers = producers
        self.memo: dict[Value, list[Dim] | None] = {}
        self.seen = [] if seen is None else seen   # the chain nodes looked through are appended here

    def of(self, v: Value) -> list[Dim] | None:
        """The entries of ``v`` in row-major order, or None when some entry is unknown."""
        if v not in self.memo:
            self.memo[v] = self._of(v) if v.type.dtype == DType.i64 and v.type.rank <= 1 else None
        return self.memo[v]

    def _of(self, v: Value) -> list[Dim] | None:
        if v.is_constant:
            return [int(e) for e in v.data.reshape(-1)]
        node = self.producers.get(v)
        if node is None or node.op not in CHAIN_OPS:
            return None
        self.seen.append(node)
        if node.op == "shape":
            return list(node.inputs[0].type.shape)
        args = [self.of(x) for x in node.inputs]
        if node.op == "gather" and args[0] is not None and node.inputs[1].is_constant:
            n, indices = len(args[0]), [int(i) for i in node.inputs[1].data.reshape(-1)]
            return [args[0][i % n] for i in indices] if all(-n <= i < n for i in indices) else None
        if node.op == "slice" and args[0] is not None:
            start, end, step = node.attrs.starts[0], node.attrs.ends[0], node.attrs.steps[0]
            return args[0][start:end:step] if isinstance(start, int) and isinstance(end, int) else None
        if node.op == "concat" and all(a is not None for a in args):
            return [e for a in args for e in a]
        if node.op in ("unsqueeze", "squeeze", "identity", "cast", "reshape"):   # same entries, other shape
            return args[0]
        if node.op in ("mul", "div", "add", "sub") and all(a is not None for a in args):
            a, b = args
            if len(a) != len(b) and 1 not in (len(a), len(b)):
                return None
            n = max(len(a), len(b))                  # a scalar (one entry) broadcasts
            out = [arithmetic(node.op, a[i % len(a)], b[i % len(b)]) for i in range(n)]
            return out if None not in out else None
        return None


def static_reshape(x: Value, entries: list[Dim]) -> tuple[Dim, ...] | None:
    """The target shape of ONNX Reshape(x, entries): 0 copies x's dim, -1 is inferred;
    None when the entries do not name a shape."""
    if any(isinstance(e, int) and e < -1 for e in entries) or entries.count(-1) > 1:
        return None
    if any(e == 0 for e in entries[x.type.rank:]):
        return None                                # nothing to copy from
    dims = [x.type.shape[i] if e == 0 else e for i, e in enumerate(entries)]
    if -1 in dims:
        rest = dim_prod(tuple(d for d in dims if d != -1))
        dims[dims.index(-1)] = dim_div(dim_prod(x.type.shape), rest)
    return tuple(canon(d) for d in dims) if None not in dims else None


def _known(m: Match) -> ShapeValues:
    """The rewrite's one ShapeValues: what it learns lasts the whole pass; the chain nodes it looks
    through are retired (dropped at the end when nothing reads them any more)."""
    return m.memo.setdefault("shapes", ShapeValues(m.producers, m.retired))


@rule("reshape_dynamic")
def static_target(m: Match) -> Node | None:
    """reshape_dynamic(x, s) -> reshape(x, [entries of s]) when types tell every entry"""
    x, out = m.node.inputs[0], m.node.outputs[0]
    entries = _known(m).of(m.node.inputs[1])
    if entries is None or static_reshape(x, entries) != out.type.shape:     # the declared type must be proven
        return None
    return m.rebuilt("reshape", [x], shape=out.type.shape)


@rule("gather")
def constant_gather(m: Match) -> tuple[Value, ...] | None:
    """gather(@c, @i) -> @c[i]"""
    if not foldable(m.node):
        return None
    made = m.folded(evaluate(m.node))
    m.retire(*made)                                 # dropped at the end when the chain is gone
    return made


@rule(*CHAIN_OPS)
def static_entries(m: Match) -> tuple[Value, ...] | None:
    """shape(x) -> @[x's static dims];  a shape program over such entries -> @[its entries]"""
    out = m.node.outputs[0]
    entries = _known(m).of(out)
    if entries is None or not all(isinstance(e, int) for e in entries):
        return None
    made = m.folded([np.array(entries, dtype=np.int64).reshape(out.type.shape)])
    m.retire(*made)
    return made
