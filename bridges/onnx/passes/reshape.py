"""Fuse consecutive Reshape nodes.

Why they arise: PyTorch export writes one ``Reshape`` per ``view``/``reshape``/
``flatten`` call, and model code often chains them (``x.view(B, T, H, D).reshape(
B * T, H * D)``, or a ``flatten`` feeding a ``view``).  Only the last target shape
matters, because a Reshape never moves data: it reinterprets the same row-major
buffer.
"""
from __future__ import annotations

import numpy as np
import onnx

from bridges.onnx.graph_tools import attribute, constants, copy_model


def fuse_consecutive_reshapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """reshape(reshape(x, s1), s2) -> reshape(x, s2)   when s2 is constant and has no 0

    A 0 in ``s2`` means "copy this dim from the *input*" (unless allowzero=1), and
    the input changes from ``reshape(x, s1)`` to ``x``: that case is left alone.
    The inner Reshape is not deleted here; if nothing else reads it, the
    dead-node pass removes it.
    """
    out = copy_model(model)
    g = out.graph
    known = constants(g)
    reshape_of = {n.output[0]: n for n in g.node if n.op_type == "Reshape"}
    for node in g.node:
        if node.op_type != "Reshape" or node.input[0] not in reshape_of:
            continue
        target = known.get(node.input[1])
        if target is None:
            continue
        if attribute(node, "allowzero", 0) == 0 and np.any(target == 0):
            continue
        node.input[0] = reshape_of[node.input[0]].input[0]
    return out
