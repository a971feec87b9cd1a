"""fold-batchnorm: ``batch_norm(conv2d(x, w, b)) -> conv2d(x, w·k, (b - mean)·k + bias)``,
``k = scale / sqrt(var + eps)`` per output channel; the same for gemm and 2-D matmul."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from minic.ir import ops
from minic.ir.graph import Node, Value
from minic.passes.rewrite import Match, rule


def _scale_shift(bn: Node) -> tuple[np.ndarray, np.ndarray]:
    """batch_norm(y) = y·k + shift per channel; computed in float64, rounded once at the end."""
    scale, bias, mean, var = (v.data.astype(np.float64) for v in bn.inputs[1:])
    k = scale / np.sqrt(var + bn.attrs.eps)
    return k, bias - mean * k


@rule("batch_norm")
def fold(m: Match) -> Node | None:
    """batch_norm(conv2d(x, w, b)) -> conv2d(x, w·k, (b - mean)·k + bias);  gemm and 2-D matmul alike"""
    bn = m.node
    lin = m.producer(bn.inputs[0], "conv2d", "gemm", "matmul")
    # Constant statistics, constant weights, and no other reader of the un-normalised result.
    if lin is None or not all(v.is_constant for v in bn.inputs[1:] + lin.inputs[1:]) or m.users(lin.outputs[0]) != 1:
        return None
    x, w, *rest = lin.inputs
    k, shift = _scale_shift(bn)
    dtype = w.data.dtype
    if lin.op == "conv2d":                          # w is [out channels, in, kh, kw]
        b = rest[0].data if rest else 0.0
        w2, c2, attrs = w.data * k[:, None, None, None], b * k + shift, lin.attrs
    elif lin.op == "gemm":                          # y = alpha·x@w + beta·c, channels are y's columns
        w2 = w.data * (k[:, None] if lin.attrs.trans_b else k[None, :])
        c = lin.attrs.beta * rest[0].data if rest else 0.0
        c2, attrs = c * k + shift, replace(lin.attrs, beta=1.0)        # c is scaled already
    elif x.type.rank == 2 and w.type.rank == 2:     # matmul
        w2, c2, attrs = w.data * k[None, :], shift, ops.get("gemm").make_attrs()
    else:
        return None
    w_new = m.constant(f"{w.name}_bn", w2.astype(dtype))
    c_new = m.constant(f"{rest[0].name}_bn" if rest else f"{w.name}_bn_bias", np.asarray(c2).astype(dtype))
    m.retire(*lin.inputs[1:], *bn.inputs[1:])      # the old weights and statistics, unless shared
    out = Value(lin.outputs[0].name, bn.outputs[0].type)     # the folded node keeps the linear node's name
    return replace(lin, op="conv2d" if lin.op == "conv2d" else "gemm", inputs=[x, w_new, c_new], outputs=[out],
                   attrs=attrs)
