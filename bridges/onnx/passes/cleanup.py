"""Delete what no one reads: dead nodes and unused initializers."""
from __future__ import annotations

import onnx

from bridges.onnx.graph_tools import copy_model, used_names


def eliminate_dead_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """y = op(x) with y never read -> nothing   (repeated until no node is dead)"""
    out = copy_model(model)
    g = out.graph
    while True:
        used = used_names(g)
        live = [n for n in g.node if any(name in used for name in n.output if name)]
        if len(live) == len(g.node):
            return out
        del g.node[:]
        g.node.extend(live)


def eliminate_unused_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """initializer w never read -> nothing   (also drops its stale graph-input entry)"""
    out = copy_model(model)
    g = out.graph
    used = used_names(g)
    dead = {init.name for init in g.initializer if init.name not in used}
    keep = [init for init in g.initializer if init.name not in dead]
    del g.initializer[:]
    g.initializer.extend(keep)
    inputs = [i for i in g.input if i.name not in dead]
    del g.input[:]
    g.input.extend(inputs)
    return out
