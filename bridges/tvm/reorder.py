"""The seed's extension: a custom TIR pass, written in Python, that reorders loops.

``interchange_for_unit_stride`` looks at every perfect loop nest whose body is
one store, works out how far each access moves in memory when a loop variable
steps by one (its *stride*, in elements), and moves innermost the loop whose
accesses are most often unit-stride (consecutive addresses: one cache line
serves 16 floats, and LLVM can vectorize the loop).  On a naive matmul::

    for i, j, k:  C[i, j] = C[i, j] + A[i, k] * B[k, j]     # k inner: B jumps by N
    for i, k, j:  C[i, j] = C[i, j] + A[i, k] * B[k, j]     # j inner: C, B unit stride

Legality, kept simple and safe: the store writes ``X[v1, v2, ...]`` with
distinct loop variables (the *spatial* loops), every read of X uses the same
indices, and the other loops (the *reductions*) keep their relative order.  Then
each output element sees the same additions in the same order: the result is
bit-for-bit identical.  Nests the pass cannot prove legal are left alone.
(Distinct buffers are assumed not to overlap, as TVM's kernels declare with
``tirx.noalias``.)

This is what MetaSchedule's ``sch.reorder`` does on request; here the pass
decides by itself, from the access strides, the way a classic compiler would.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Access:
    """One buffer access in a nest body: its buffer, and its index as an affine form."""

    buffer: Any                      # the buffer Var
    coefficients: tuple[tuple[int, ...], ...]    # per index dim: coefficient of each loop var
    offsets: tuple[int, ...]                     # per index dim: the constant part

    def stride(self, loop: int, shape: tuple[int, ...]) -> int:
        """Elements moved in row-major memory when loop ``loop`` steps by one."""
        row_major = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
        return sum(c[loop] * s for c, s in zip(self.coefficients, row_major))


class NotAffine(Exception):
    """The nest has an index or expression this pass does not analyse."""


def interchange_for_unit_stride(func: Any) -> Any:
    """PrimFunc → PrimFunc with each legal perfect nest's best unit-stride loop innermost."""
    return func.with_body(_rewrite(func.body))


def pass_() -> Any:
    """The same rewrite as a TVM pass (a prim_func pass), to put in a ``Sequential``."""
    import tvm
    return tvm.tirx.transform.prim_func_pass(
        lambda func, _mod, _ctx: interchange_for_unit_stride(func), opt_level=0,
        name="InterchangeForUnitStride")


def _rewrite(stmt: Any) -> Any:
    from tvm import tirx
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_rewrite(s) for s in stmt.seq])
    if not isinstance(stmt, tirx.For):
        return stmt
    loops, body = [], stmt
    while isinstance(body, tirx.For):           # peel the perfect nest
        loops.append(body)
        body = body.body
    if not isinstance(body, tirx.BufferStore):
        return _rebuild(loops, _rewrite(body))
    order = best_order(loops, body)
    return _rebuild([loops[i] for i in order], body)


def best_order(loops: list[Any], store: Any) -> list[int]:
    """Loop positions, outermost first: the unit-stride winner moved innermost if legal."""
    identity = list(range(len(loops)))
    if any(int(loop.kind) != 0 for loop in loops):        # only serial loops
        return identity
    loop_vars = [loop.loop_var for loop in loops]
    try:
        accesses = [_access(store.buffer, store.indices, loop_vars)]          # the store first
        accesses += [_access(src, idx, loop_vars) for src, idx in _loads(store.value)]
        strides = [[abs(a.stride(loop, _shape(a.buffer))) for a in accesses] for loop in identity]
    except NotAffine:
        return identity
    spatial = _spatial_loops(accesses)
    if spatial is None:
        return identity
    # cost of a loop as the innermost: fewer accesses that jump, then more that are unit-stride
    cost = [(sum(s > 1 for s in row), -sum(s == 1 for s in row)) for row in strides]
    winner = min(identity, key=lambda loop: (cost[loop], -loop))   # ties: keep the inner one
    order = [i for i in identity if i != winner] + [winner]
    reductions = [i for i in identity if i not in spatial]
    if [i for i in order if i in reductions] != reductions:       # would reorder a sum
        return identity
    return order


def _spatial_loops(accesses: list[Access]) -> set[int] | None:
    """Loops indexing the stored buffer; None if the nest is not provably legal to permute."""
    store = accesses[0]
    spatial = set()
    for coefficients in store.coefficients:                       # each index: exactly one var
        ones = [i for i, c in enumerate(coefficients) if c != 0]
        if len(ones) != 1 or coefficients[ones[0]] != 1 or ones[0] in spatial:
            return None
        spatial.add(ones[0])
    for a in accesses[1:]:
        if a.buffer.same_as(store.buffer) and (a.coefficients, a.offsets) != (store.coefficients, store.offsets):
            return None                                          # reads another element of X
    return spatial


def _access(buffer: Any, indices: Any, loop_vars: list[Any]) -> Access:
    forms = [_affine(index, loop_vars) for index in indices]
    return Access(buffer, tuple(tuple(f[:-1]) for f in forms), tuple(f[-1] for f in forms))


def _affine(expr: Any, loop_vars: list[Any]) -> list[int]:
    """``expr`` as [c_0, ..., c_n-1, constant]: sum(c_i * loop_var_i) + constant."""
    from tvm.ir.prim import expr as E
    n = len(loop_vars)
    if isinstance(expr, E.IntImm):
        return [0] * n + [int(expr.value)]
    if isinstance(expr, E.Var):
        for i, v in enumerate(loop_vars):
            if expr.same_as(v):
                return [int(i == j) for j in range(n)] + [0]
        raise NotAffine(f"index uses a variable that is not a loop of the nest: {expr}")
    if isinstance(expr, (E.Add, E.Sub)):
        a, b = _affine(expr.a, loop_vars), _affine(expr.b, loop_vars)
        sign = 1 if isinstance(expr, E.Add) else -1
        return [x + sign * y for x, y in zip(a, b)]
    if isinstance(expr, E.Mul):
        a, b = _affine(expr.a, loop_vars), _affine(expr.b, loop_vars)
        if any(a[:-1]) and any(b[:-1]):
            raise NotAffine(f"product of loop variables: {expr}")
        scale, form = (a[-1], b) if not any(a[:-1]) else (b[-1], a)
        return [scale * x for x in form]
    raise NotAffine(f"index is not affine: {expr}")


def _loads(expr: Any) -> list[tuple[Any, Any]]:
    """Every (buffer, indices) read in ``expr``; NotAffine for expression kinds not handled."""
    from tvm.ir import expr as IE
    from tvm.ir.prim import expr as E
    if isinstance(expr, IE.TensorLoad):
        return [(expr.source, expr.indices)]
    if isinstance(expr, E.BinaryOpExpr):
        return _loads(expr.a) + _loads(expr.b)
    if isinstance(expr, E.Cast):
        return _loads(expr.value)
    if isinstance(expr, (E.IntImm, E.FloatImm, E.Var)):
        return []
    raise NotAffine(f"expression kind not analysed: {type(expr).__name__}")


def _shape(buffer: Any) -> tuple[int, ...]:
    if len(buffer.strides) != 0:
        raise NotAffine("buffer with explicit strides")
    return tuple(int(d) for d in buffer.shape)


def _rebuild(loops: list[Any], body: Any) -> Any:
    from tvm import tirx
    for loop in reversed(loops):
        body = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                        loop.thread_binding, loop.annotations)
    return body


# ---- the demonstration: a naive matmul before and after the pass ----------------

@dataclass
class Demo:
    """The matmul's TIR before and after, its median run times, and whether outputs agree."""

    before: str
    after: str
    before_s: float
    after_s: float
    identical: bool

    def summary(self) -> str:
        return (f"// ----- TIR before -----\n{self.before}\n// ----- TIR after InterchangeForUnitStride -----\n"
                f"{self.after}\nbefore: {self.before_s * 1e3:.2f} ms   after: {self.after_s * 1e3:.2f} ms   "
                f"speedup {self.before_s / self.after_s:.1f}x   outputs identical: {self.identical}")


def naive_matmul(n: int) -> Any:
    """C = A @ B for n x n float32, written the textbook way: i, j, k with k innermost."""
    from tvm.script import tirx as T

    @T.prim_func
    def matmul(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"),
               C: T.Buffer((n, n), "float32")):
        T.func_attr({"global_symbol": "matmul", "tirx.noalias": True})
        for i, j in T.grid(n, n):
            C[i, j] = T.float32(0)
        for i, j, k in T.grid(n, n, n):
            C[i, j] = C[i, j] + A[i, k] * B[k, j]

    return matmul


def demo(n: int = 256, repeat: int = 5, target: Any = None) -> Demo:
    """Apply the pass to ``naive_matmul(n)`` as a TVM pass, build both, time both."""
    import tvm
    from bridges.tvm.build import as_target

    before = tvm.IRModule({"matmul": naive_matmul(n)})
    after = pass_()(before)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(2))
    times, outputs = [], []
    for mod in (before, after):
        lib = tvm.compile(mod, target=as_target(target))
        args = [tvm.runtime.tensor(x) for x in (a, b, np.zeros((n, n), np.float32))]
        timer = lib.mod.time_evaluator("matmul", tvm.cpu(), number=1, repeat=repeat)
        times.append(float(np.median(timer(*args).results)))
        outputs.append(args[2].numpy())
    return Demo(before["matmul"].script(), after["matmul"].script(), times[0], times[1],
                bool(np.array_equal(outputs[0], outputs[1])))
