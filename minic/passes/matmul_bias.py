"""fuse-matmul-bias: ``add(matmul(x, w), b) -> gemm(x, w, b)``, the bias as the matmul's epilogue."""
from __future__ import annotations

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.ops.shapes import broadcast
from minic.passes.rewrite import clone, users


def _bias_fits(bias: Value, product: Value) -> bool:
    """gemm adds c broadcast to [M, N]: c must not widen the product."""
    try:
        return bias.type.rank <= 2 and broadcast(bias.type.shape, product.type.shape) == product.type.shape
    except UserError:                              # shapes that do not broadcast
        return False


def fuse_matmul_bias(graph: Graph) -> Graph:
    """add(matmul(x, w), b) -> gemm(x, w, b) for 2-D x and w;  add(gemm(x, w), b) -> gemm(x, w, b)."""
    g = clone(graph)
    producers = g.producers()
    for add in list(g.nodes):
        if add.op != "add":
            continue
        for product, bias in (add.inputs, add.inputs[::-1]):   # add commutes
            mm = producers.get(product)
            if mm is None or users(g, product) != 1 or not _bias_fits(bias, product):
                continue
            if mm.op == "matmul" and all(v.type.rank == 2 for v in mm.inputs):
                attrs = ops.get("gemm").make_attrs()
            elif mm.op == "gemm" and len(mm.inputs) == 2:
                # beta scales c; this gemm had no c, so its beta meant nothing: now it must be 1.
                attrs = ops.get("gemm").make_attrs(trans_a=mm.attrs.trans_a, trans_b=mm.attrs.trans_b,
                                                   alpha=mm.attrs.alpha, beta=1.0)
            else:
                continue
            fused = Node("gemm", [mm.inputs[0], mm.inputs[1], bias], add.outputs, attrs, add.group)
            g.nodes.remove(mm)
            g.nodes[g.nodes.index(add)] = fused
            break
    return g
