"""fuse-matmul-bias: ``add(matmul(x, w), b) -> gemm(x, w, b)``, the bias as the matmul's epilogue."""
from __future__ import annotations

from dataclasses import replace

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Node, Value
from minic.ir.ops.shapes import broadcast
from minic.passes.rewrite import Match, rule


def _bias_fits(bias: Value, product: Value) -> bool:
    """gemm adds c broadcast to [M, N]: c must not widen the product."""
    try:
        return bias.type.rank <= 2 and broadcast(bias.type.shape, product.type.shape) == product.type.shape
    except UserError:                              # shapes that do not broadcast
        return False


@rule("add")
def bias_epilogue(m: Match) -> Node | None:
    """add(matmul(x, w), b) -> gemm(x, w, b) for 2-D x and w;  add(gemm(x, w), b) -> gemm(x, w, b);  b + ... alike"""
    for product, bias in (m.node.inputs, m.node.inputs[::-1]):   # add commutes
        mm = m.producer(product, "matmul", "gemm")
        if mm is None or m.users(product) != 1 or not _bias_fits(bias, product):
            continue
        if mm.op == "matmul" and all(v.type.rank == 2 for v in mm.inputs):
            attrs = ops.get("gemm").make_attrs()
        elif mm.op == "gemm" and len(mm.inputs) == 2:
            # beta scales c; this gemm had no c, so its beta meant nothing: now it must be 1.
            attrs = replace(mm.attrs, beta=1.0)
        else:
            continue
        return replace(mm, op="gemm", inputs=[mm.inputs[0], mm.inputs[1], bias], outputs=m.node.outputs,
                       attrs=attrs, group=m.node.group)
    return None
