"""fold-batchnorm: ``batch_norm(conv2d(x, w, b)) -> conv2d(x, w·k, (b - mean)·k + bias)``,
``k = scale / sqrt(var + eps)`` per output channel; the same for gemm and 2-D matmul."""
from __future__ import annotations

import numpy as np

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.passes.rewrite import add_constant, clone, drop_unused, forward, users


def _scale_shift(bn: Node) -> tuple[np.ndarray, np.ndarray]:
    """batch_norm(y) = y·k + shift per channel; computed in float64, rounded once at the end."""
    scale, bias, mean, var = (v.data.astype(np.float64) for v in bn.inputs[1:])
    k = scale / np.sqrt(var + bn.attrs.eps)
    return k, bias - mean * k


def _fold(g: Graph, lin: Node, bn: Node) -> Node | None:
    """The linear node with the batch norm folded in, or None when its weights are not constants."""
    x, w = lin.inputs[0], lin.inputs[1]
    rest = lin.inputs[2:]
    if not w.is_constant or not all(v.is_constant for v in rest):
        return None
    k, shift = _scale_shift(bn)
    dtype = w.data.dtype
    if lin.op == "conv2d":                          # w is [out channels, in, kh, kw]
        b = rest[0].data if rest else 0.0
        w2 = w.data * k[:, None, None, None]
        c2, attrs = b * k + shift, lin.attrs
    elif lin.op == "gemm":                          # y = alpha·x@w + beta·c, channels are y's columns
        w2 = w.data * (k[:, None] if lin.attrs.trans_b else k[None, :])
        c = lin.attrs.beta * rest[0].data if rest else 0.0
        c2 = c * k + shift
        attrs = ops.get("gemm").make_attrs(trans_a=lin.attrs.trans_a, trans_b=lin.attrs.trans_b,
                                           alpha=lin.attrs.alpha, beta=1.0)
    elif lin.op == "matmul" and x.type.rank == 2 and w.type.rank == 2:
        w2, c2, attrs = w.data * k[None, :], shift, ops.get("gemm").make_attrs()
    else:
        return None
    w_new = add_constant(g, f"{w.name}_bn", w2.astype(dtype))
    c_new = add_constant(g, f"{rest[0].name}_bn" if rest else f"{w.name}_bn_bias", np.asarray(c2).astype(dtype))
    op = "conv2d" if lin.op == "conv2d" else "gemm"
    return Node(op, [x, w_new, c_new], lin.outputs, attrs, lin.group)


def fold_batchnorm(graph: Graph) -> Graph:
    """batch_norm(conv2d(x, w, b)) -> conv2d(x, w·k, (b - mean)·k + bias), k = scale / sqrt(var + eps); gemm alike."""
    g = clone(graph)
    producers = g.producers()
    replaced: list[Value] = []
    for bn in list(g.nodes):
        if bn.op != "batch_norm" or not all(v.is_constant for v in bn.inputs[1:]):
            continue
        lin = producers.get(bn.inputs[0])
        # The un-normalised result must have no other reader.
        if lin is None or lin.op not in ("conv2d", "gemm", "matmul") or users(g, lin.outputs[0]) != 1:
            continue
        folded = _fold(g, lin, bn)
        if folded is not None:                      # the folded node keeps its name; the batch norm goes
            g.nodes[g.nodes.index(lin)] = folded
            forward(g, bn, folded.outputs[0])
            replaced += lin.inputs[1:] + bn.inputs[1:]
    drop_unused(g, [], replaced)                   # the old weights and statistics, unless shared
    return g
