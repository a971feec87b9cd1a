"""The compute language: what an op's compute rule is written in.

A compute rule says what ONE output element is, as a Loop IR expression of the
element's index (TVM's ``te.compute``).  Inputs are reached through an
``Operand``: ``x.at(index)`` is the input element at ``index`` — a ``Load`` from
a buffer, or, when the producer is fused into the same kernel, the producer's
own expression (inlining is how fusion happens).

A reduction is an expression too: ``Reduce("sum", ((k, K),), a[i, k] * b[k, j])``;
``minic.lowering.compute.emit`` decides where its accumulator lives.  Each op
declares its rule beside its meaning, in ``minic/ir/ops/``.
"""
from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from minic.errors import DataError
from minic.ir.loops import (BINOPS, CALLS, BinOp, BitCast, Buffer, Call, Cast, Const, Expr, Load, Role, Select, Var,
                            bitcast_value, children, const, dim_expr, rebuild)
from minic.ir.types import DType, Dim, TensorType, dim_prod


@dataclass(frozen=True)
class Reduce(Expr):
    """``op`` (sum, prod, max, min) of ``body`` over the variables of ``axes``."""
    op: str
    axes: tuple[tuple[Var, Expr], ...]     # (variable, extent)
    body: Expr

    @property
    def dtype(self) -> DType:
        return self.body.dtype


@dataclass(frozen=True)
class Operand:
    """One input of a compute rule."""
    type: TensorType
    at: Callable[[tuple[Expr, ...]], Expr]
    data: np.ndarray | None = None         # the value, when the input is a constant


class Fresh:
    """Unique variable and buffer names within one kernel."""

    def __init__(self) -> None:
        self.counters: defaultdict[str, Iterator[int]] = defaultdict(itertools.count)    # 0, 1, ...

    def name(self, prefix: str) -> str:
        return f"{prefix}{next(self.counters[prefix])}"

    def var(self, prefix: str = "r") -> Var:
        return Var(self.name(prefix))


# --- small expression helpers used by the rules --------------------------------------

def initial(op: str, dtype: DType) -> Const:
    """The value a Reduce ``op`` starts from (numpy's ``initial``): what reducing no element
    gives.  For max it is the dtype's lowest value, for min its highest."""
    lowest, highest = ((-math.inf, math.inf) if dtype.is_float
                       else (np.iinfo(dtype.numpy).min, np.iinfo(dtype.numpy).max))
    return const({"sum": 0, "prod": 1, "max": lowest, "min": highest}[op], dtype)


def clamp(i: Expr, size: Dim) -> Expr:
    """``i`` forced into ``[0, size)``: loads of a branch a Select does not take stay in bounds."""
    return BinOp("min", BinOp("max", i, const(0)), BinOp("sub", dim_expr(size), const(1)))


def in_range(i: Expr, lo: Expr, hi: Expr) -> Expr:
    return BinOp("and", BinOp("ge", i, lo), BinOp("lt", i, hi))


def broadcast_index(index: Sequence[Expr], shape: tuple[Dim, ...]) -> tuple[Expr, ...]:
    """The element of an input of ``shape`` that numpy broadcasting pairs with output ``index``."""
    offset = len(index) - len(shape)
    return tuple(const(0) if d == 1 else index[offset + k] for k, d in enumerate(shape))


def count(dims: Sequence[Dim], dtype: DType) -> Expr:
    """The number of elements of ``dims``, as a float of ``dtype``."""
    n = dim_prod(tuple(dims))
    return const(n, dtype) if isinstance(n, int) else Cast(dtype, dim_expr(n))


# --- traversal that knows Reduce ----------------------------------------------------------

def r_children(e: Expr) -> tuple[Expr, ...]:
    if isinstance(e, Reduce):
        return (e.body,) + tuple(ext for _, ext in e.axes)
    return children(e)


def r_rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    if isinstance(e, Reduce):
        return Reduce(e.op, tuple((v, ext) for (v, _), ext in zip(e.axes, kids[1:])), kids[0])
    return rebuild(e, kids)


def r_free_vars(e: Expr) -> set[str]:
    if isinstance(e, Var):
        return {e.name}
    out = set().union(*(r_free_vars(k) for k in r_children(e)))
    if isinstance(e, Reduce):
        out -= {v.name for v, _ in e.axes}
    return out


@dataclass
class Site:
    """One node being lowered: what a compute rule may look at."""
    op: str
    attrs: Any
    inputs: list[Operand]
    outputs: list[TensorType]
    output: int                 # which output the rule is asked for (split has several)
    fresh: Fresh

    @property
    def out(self) -> TensorType:
        return self.outputs[self.output]


Rule = Callable[[Site, tuple[Expr, ...]], Expr]      # rule(site, index) -> the element at index


@dataclass(frozen=True)
class DataCheck:
    """A condition an op's input *data* must meet for its result to be defined (a gather
    index inside the table, a nonzero integer divisor): for every index of ``shape``,
    ``fails(index)`` is false.  Compiled code tests it once per element of ``shape``
    (the indices, not the output), before the op's loops, and on failure records the
    node and ``value(index)`` in its status word; the runtime then raises DataError
    with ``message`` (``{value}`` is the offending value)."""
    shape: tuple[Dim, ...]
    fails: Callable[[tuple[Expr, ...]], Expr]
    value: Callable[[tuple[Expr, ...]], Expr]
    message: str


Checks = Callable[[Site], list[DataCheck]]          # checks(site) -> what the node's data must meet


# --- the same checks on numpy arrays (the interpreter, constant folding) ------------------

_ARRAY_BINOPS = {**BINOPS, "div": lambda a, b: np.trunc(a / b) if np.asarray(a).dtype.kind == "f" else
                 np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b)), "mod": np.fmod}


def _evaluate(e: Expr, index: dict[str, np.ndarray], arrays: dict[str, np.ndarray]) -> np.ndarray:
    """``e`` at every point at once: the index variables are broadcastable integer arrays."""
    ev = lambda x: _evaluate(x, index, arrays)          # noqa: E731
    if isinstance(e, Var):
        return index[e.name]
    if isinstance(e, Const):
        return np.asarray(e.value, e.dtype.numpy)
    if isinstance(e, Load):
        return arrays[e.buffer.name][tuple(ev(i).astype(np.int64) for i in e.index)]
    if isinstance(e, BinOp):
        return np.asarray(_ARRAY_BINOPS[e.op](ev(e.a), ev(e.b))).astype(e.dtype.numpy)
    if isinstance(e, Select):
        return np.where(ev(e.cond), ev(e.a), ev(e.b))
    if isinstance(e, Cast):
        v = ev(e.value)
        return v != 0 if e.to == DType.bool else v.astype(e.to.numpy)
    if isinstance(e, BitCast):
        return bitcast_value(ev(e.value), e.to)
    if isinstance(e, Call):
        return CALLS[e.fn](*(ev(a) for a in e.args))
    raise TypeError(f"a data check cannot test {type(e).__name__}")


def check_arrays(op: str, checks: Checks, attrs: Any, outputs: list[TensorType], arrays: Sequence[np.ndarray]) -> None:
    """Raise the DataError compiled code would report, if ``arrays`` (the node's inputs) fail one
    of the op's ``checks``: the references' side of DataCheck, so each condition is written once
    for the compiled code, the interpreter and constant folding (``ops.define`` wraps every
    reference with it)."""
    buffers = [Buffer(f"in{k}", a.shape, DType.of(a.dtype), Role.INPUT) for k, a in enumerate(arrays)]
    site = Site(op, attrs, [Operand(TensorType(b.shape, b.dtype), lambda at, b=b: Load(b, tuple(at)), a)
                            for b, a in zip(buffers, arrays)], outputs, 0, Fresh())
    memory = {b.name: np.asarray(a) for b, a in zip(buffers, arrays)}
    for check in checks(site):
        shape = tuple(int(d) for d in check.shape)
        at = tuple(Var(f"c{a}") for a in range(len(shape)))
        index = dict(zip((v.name for v in at), np.indices(shape, sparse=True)))
        with np.errstate(all="ignore"):
            failed = np.broadcast_to(_evaluate(check.fails(at), index, memory), shape)
            if failed.any():
                first = np.unravel_index(int(np.argmax(failed)), shape)
                value = np.broadcast_to(_evaluate(check.value(at), index, memory), shape)[first]
                raise DataError(f"{op}: {check.message.replace('{value}', str(value))}")


def as_i64(e: Expr) -> Expr:
    return e if e.dtype == DType.i64 else Cast(DType.i64, e)


# Where an index read from a tensor may lie depends on the model's source, so the node says
# (``from_end``, an attribute of the indexing ops that each importer sets): ONNX and numpy
# count a negative index from the end, [-n, n); torch.gather, index_select, nn.Embedding and
# scatter refuse it, [0, n).

def wrap_index(i: Expr, n: Dim, from_end: bool = True) -> Expr:
    """An index read from a tensor, as i64, a negative one counted from the end (``from_end``),
    clamped into [0, n) (one still outside is reported by the op's data check; clamped, it
    never reads outside the table while the kernel finishes)."""
    i = as_i64(i)
    return clamp(Select(BinOp("lt", i, const(0)), BinOp("add", i, dim_expr(n)), i) if from_end else i, n)


def wrap_indices(idx: np.ndarray, n: int, op: str, where: str = "", from_end: bool = True) -> np.ndarray:
    """The references' side of ``wrap_index``: ``idx`` with negative indices counted from
    the end; one outside [-n, n) ([0, n) unless ``from_end``) is a DataError of ``op``."""
    low = -n if from_end else 0
    if idx.size and (idx.min() < low or idx.max() >= n):
        bad = idx.min() if idx.min() < low else idx.max()
        raise DataError(f"{op}: index {bad} is out of range [{low}, {n}){where}")
    return np.where(idx < 0, idx + n, idx)


def index_check(shape: tuple[Dim, ...], index: Callable[[tuple[Expr, ...]], Expr], n: Dim, where: str,
                from_end: bool = True) -> DataCheck:
    """Every ``index(at)``, for ``at`` over ``shape``, inside [-n, n) (negative ones count from the
    end), or [0, n) unless ``from_end``."""
    low = BinOp("sub", const(0), dim_expr(n)) if from_end else const(0)

    def fails(at: tuple[Expr, ...]) -> Expr:
        i = as_i64(index(at))
        return BinOp("or", BinOp("lt", i, low), BinOp("ge", i, dim_expr(n)))
    return DataCheck(shape, fails, lambda at: as_i64(index(at)),
                     f"index {{value}} is out of range [{'-' if from_end else ''}{n if from_end else 0}, {n}){where}")


def reduce_axes(site: Site, x: Operand, axes: tuple[int, ...], keep: bool,
                index: tuple[Expr, ...]) -> tuple[tuple[tuple[Var, Expr], ...], tuple[Expr, ...]]:
    """Fresh reduction variables for ``axes`` of ``x`` and the input index built from
    them and the output ``index`` (which has the reduced axes as size 1 if ``keep``)."""
    loops = {a: (site.fresh.var("r"), dim_expr(d)) for a, d in enumerate(x.type.shape) if a in axes}
    kept = iter([i for a, i in enumerate(index) if not (keep and a in loops)])   # the index of the other axes
    source = tuple(loops[a][0] if a in loops else next(kept) for a in range(x.type.rank))
    return tuple(loops.values()), source


def reduce_over(site: Site, x: Operand, axes: tuple[int, ...], keep: bool, index: tuple[Expr, ...], op: str,
                body: Callable[[Expr], Expr] = lambda element: element) -> Reduce:
    """``op`` of ``body(x's element)`` over ``axes`` of ``x``, along the row through output ``index``
    (fresh variables: see reduce_axes)."""
    loops, source = reduce_axes(site, x, axes, keep, index)
    return Reduce(op, loops, body(x.at(source)))
