"""One fusion group -> one kernel.

Inside a group, a value that no other kernel needs is never stored: its
consumers inline its compute rule.  Each value the group hands on (a graph
output, or an input of another kernel) gets one loop nest that stores it; a
later nest of the same kernel that needs it loads it back.  A stored constant
``pad(x)`` gets two: ``x`` into the interior (``x``'s loops, the store index
shifted), the constant into the border, so no element tests whether it is inside;
a stored ``concat`` one per part, each at its offset.
"""
from __future__ import annotations

from minic.ir.graph import Node, Value
from minic.ir.loops import (STATUS, BinOp, Buffer, Cast, Const, Expr, Function, If, Load, Role, Stmt, Store, Var,
                            const, dim_expr, seq, stmt_exprs, walk, walk_stmts)
from minic.errors import UnsupportedError
from minic.ir import ops
from minic.ir.compute import DataCheck, Fresh, Operand, Site
from minic.ir.ops.layout import concat_offsets
from minic.ir.loops_simplify import simplify_stmt
from minic.ir.types import DType
from minic.lowering.compute import emit, fill_border

BIG = 2**62                      # an upper bound for symbolic sizes in range analysis


def _loops_over(shape: tuple, prefix: str = "i") -> tuple[list[tuple[Var, Expr]], tuple[Var, ...]]:
    """One loop per axis of ``shape`` (variables i0, i1, ...) and the index they make."""
    loops = [(Var(f"{prefix}{a}"), dim_expr(d)) for a, d in enumerate(shape)]
    return loops, tuple(v for v, _ in loops)


def _params(body: Stmt, outputs: list[Buffer]) -> tuple[Buffer, ...]:
    """Every non-local buffer the body touches: those it reads, then those it writes."""
    loads = [x for s in walk_stmts(body) for e in stmt_exprs(s) for x in walk(e) if isinstance(x, Load)]
    seen = {x.buffer.name: x.buffer for x in loads if x.buffer.role != Role.LOCAL}      # in order of first use
    return tuple(b for b in seen.values() if b not in outputs) + tuple(outputs)


def build_kernel(name: str, nodes: list[Node], stores: list[Value], buffers: dict[Value, Buffer],
                 sizes: tuple[str, ...], checks: dict[int, str] | None = None,
                 describe=lambda node: node.op, round_inlined: bool = True) -> Function:
    """The kernel computing ``stores`` (values of ``nodes``) into their buffers.

    The data checks of its nodes' ops (``OpDef.checks``) come first, one small loop
    nest each over the data it tests; each gets a code in ``checks`` (code -> message,
    the node named by ``describe``)."""
    fresh = Fresh()
    produced = {v: (node, k) for node in nodes for k, v in enumerate(node.outputs)}

    def operand(v: Value) -> Operand:
        if v.is_constant and v.data.size == 1:       # a scalar weight becomes a literal
            c = const(v.data.reshape(()).item(), v.type.dtype)
            return Operand(v.type, lambda index: c, v.data)
        if v in produced and v not in stores:
            node, k = produced[v]
            return Operand(v.type, lambda index: rounded(v, compute(node, k, index)), v.data)
        return Operand(v.type, lambda index: Load(buffers[v], tuple(index)), v.data)

    def rounded(v: Value, e: Expr) -> Expr:
        # An inlined f16/bf16 value is rounded to its type as if stored: the op's result *is* f16,
        # whatever precision its arithmetic used (a load or a literal is that type already).  Spelled
        # as a round trip through f32, which simplification keeps and widening turns into a rounding.
        t = v.type.dtype
        rounded_already = isinstance(e, (Load, Const)) or (isinstance(e, Cast) and e.to == t)
        return Cast(t, Cast(DType.f32, e)) if round_inlined and t.is_storage_float and not rounded_already else e

    def compute(node: Node, k: int, index: tuple[Expr, ...]) -> Expr:
        rule = ops.get(node.op).compute
        if rule is None:
            raise UnsupportedError(f"lowering: op '{node.op}' has no compute rule")
        return rule(site(node, k), tuple(index))

    def site(node: Node, k: int = 0) -> Site:
        return Site(node.op, node.attrs, [operand(v) for v in node.inputs], [v.type for v in node.outputs], k, fresh)

    nests = []
    for node in nodes:
        rule = ops.get(node.op).checks
        for check in (rule(site(node)) if rule is not None and checks is not None else ()):
            code = len(checks) + 1
            checks[code] = f"{describe(node)}: {check.message}"
            nests.append(check_nest(check, code, fresh))
    for v in stores:
        out = buffers[v]
        node, k = produced[v]
        if node.op == "pad" and node.attrs.mode == "constant":
            nests += padded_nests(out, node, operand(node.inputs[0]), fresh)
        elif node.op == "concat":
            nests += concat_nests(out, node.attrs.axis, [operand(x) for x in node.inputs], fresh)
        else:
            loops, index = _loops_over(out.shape)
            nests.append(emit(loops, lambda e: Store(out, index, e), compute(node, k, index), fresh))
    # operand, compute and site reach each other through their closures' cells, a cycle holding
    # the graph's values (and weights): emptied, they go with this call, not at the next collection
    del operand, compute, site
    body = simplify_stmt(seq(*nests), {s: (0, BIG) for s in sizes})
    origin = "; ".join(f"{', '.join('%' + o.name for o in n.outputs)} = {n.op}({', '.join('%' + i.name for i in n.inputs)})"
                       for n in nodes)
    return Function(name, _params(body, [buffers[v] for v in stores]), sizes, body, origin)


def check_nest(check: DataCheck, code: int, fresh: Fresh) -> Stmt:
    """for c... in check.shape: if check fails at c: status = [code, value].  The tested
    data may itself be a fused reduction (a cumsum as gather index): ``emit`` computes it."""
    loops, index = _loops_over(check.shape, "c")

    def record(value: Expr) -> Stmt:
        return seq(Store(STATUS, (const(0),), const(code)), Store(STATUS, (const(1),), value))
    return emit(loops, lambda fails: If(fails, emit([], record, check.value(index), fresh)), check.fails(index), fresh)


def padded_nests(out: Buffer, node: Node, x: Operand, fresh: Fresh) -> list[Stmt]:
    """``out = pad(x)``: x[i] stored at out[i + lo], then the pad value into the border."""
    rank = x.type.rank
    lo, hi = node.attrs.pads[:rank], node.attrs.pads[rank:]
    loops, index = _loops_over(x.type.shape)
    shifted = tuple(BinOp("add", i, const(p)) if p else i for i, p in zip(index, lo))
    interior = emit(loops, lambda e: Store(out, shifted, e), x.at(index), fresh)
    return [interior, fill_border(out, lo, hi, const(node.attrs.value, out.dtype))]


def concat_nests(out: Buffer, axis: int, parts: list[Operand], fresh: Fresh) -> list[Stmt]:
    """``out = concat(x0, x1, ...)``: each part stored at its offset along ``axis``, one nest
    each, so no element chooses between the parts."""
    axis %= len(out.shape)
    nests = []
    for x, offset in zip(parts, concat_offsets([x.type.shape[axis] for x in parts])):
        loops, index = _loops_over(x.type.shape)
        at = index[:axis] + (BinOp("add", index[axis], offset),) + index[axis + 1:]
        nests.append(emit(loops, lambda e, at=at: Store(out, at, e), x.at(index), fresh))
    return nests


def copy_kernel(name: str, source: Buffer, target: Buffer, sizes: tuple[str, ...]) -> Function:
    """target[...] = source[...]: a graph output that is an input, a constant or a repeat."""
    loops, index = _loops_over(target.shape)
    body = emit(loops, lambda e: Store(target, index, e), Load(source, index), Fresh())
    return Function(name, (source, target), sizes, body, f"copy {source.name} -> {target.name}")
