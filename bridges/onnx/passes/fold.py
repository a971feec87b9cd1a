"""Fold constant Gather, and the Shape -> Gather -> Unsqueeze -> Concat chains around it.

PyTorch's TorchScript exporter writes ``x.view(B, T, H, D // H)`` as a small
integer program: ``Shape(x)``, one ``Gather`` per dim, ``Div``/``Cast`` on the
dims, ``Unsqueeze`` each to 1-D, ``Concat`` them into the target shape.  Every dim
that shape inference proves *static* (an int, not a named axis such as ``B``) can
be computed now; the dynamic axes must stay as run-time arithmetic so that the
folded model still runs at every (batch, seq).

The passes feed each other, and the pass manager runs them to a fixed point:
``fold_shape_gather`` turns static dims into constants, ``fold_constant_gather``
and ``fold_constant_nodes`` then evaluate whatever became all-constant (results
are stored as initializers named like the value they replace, so no reader
changes), and ``fold_reshape_dims`` replaces the dynamic dims of a Reshape target
by 0 ("copy from the input") where shape inference proves that is the same dim.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from bridges.onnx.graph_tools import (attribute, constants, copy_model, fresh_name,
                                      graph_output_names, remove_nodes, set_initializer,
                                      static_shapes)

# Ops of the shape-arithmetic chains; evaluated only when every input is constant.
SHAPE_CHAIN_OPS = {"Unsqueeze", "Squeeze", "Concat", "Cast", "Add", "Sub", "Mul", "Div",
                   "Pow", "Sqrt", "Floor", "Ceil", "Neg", "Slice", "Reshape", "Range",
                   "Equal", "Where", "Not", "Min", "Max", "Expand", "ConstantOfShape"}
# Never materialise a large tensor: folding is for shapes and scalars, not weights.
MAX_FOLDED_ELEMENTS = 4096


def _replace_with_constant(graph: onnx.GraphProto, node: onnx.NodeProto,
                           value: np.ndarray) -> None:
    set_initializer(graph, node.output[0], value)
    remove_nodes(graph, [node])


def fold_shape_gather(model: onnx.ModelProto) -> onnx.ModelProto:
    """gather(shape(x), k) -> x.shape[k]  and  shape(x) -> x.shape, for static dims only"""
    shapes = static_shapes(model)
    out = copy_model(model)
    g, outputs = out.graph, graph_output_names(out.graph)
    shape_of = {n.output[0]: n for n in g.node if n.op_type == "Shape"}
    known = constants(g)
    for node in list(g.node):
        if node.output and node.output[0] in outputs:
            continue
        if node.op_type == "Shape":
            dims = _sliced(shapes.get(node.input[0]), node)
            if dims is not None and all(isinstance(d, int) for d in dims):
                _replace_with_constant(g, node, np.array(dims, dtype=np.int64))
        elif node.op_type == "Gather" and node.input[0] in shape_of \
                and node.input[1] in known:
            shape_node = shape_of[node.input[0]]
            dims = _sliced(shapes.get(shape_node.input[0]), shape_node)
            index = known[node.input[1]]
            if dims is None or not np.all((-len(dims) <= index) & (index < len(dims))):
                continue
            picked = [dims[int(i)] for i in index.reshape(-1)]
            if all(isinstance(d, int) for d in picked):   # never a named axis B/T
                value = np.array(picked, dtype=np.int64).reshape(index.shape)
                _replace_with_constant(g, node, value)
    return out


def _sliced(dims: list | None, shape_node: onnx.NodeProto) -> list | None:
    """The dims a ``Shape`` node returns (opset 15 added start/end attributes)."""
    if dims is None:
        return None
    start, end = attribute(shape_node, "start", 0), attribute(shape_node, "end", len(dims))
    return dims[start:end]


def fold_constant_gather(model: onnx.ModelProto) -> onnx.ModelProto:
    """gather(c1, c2, axis) -> np.take(c1, c2, axis)   when both inputs are constants"""
    out = copy_model(model)
    g, outputs = out.graph, graph_output_names(out.graph)
    known = constants(g)
    for node in list(g.node):
        if node.op_type != "Gather" or node.output[0] in outputs:
            continue
        if node.input[0] in known and node.input[1] in known:
            data, index = known[node.input[0]], known[node.input[1]]
            if index.size > MAX_FOLDED_ELEMENTS:
                continue
            value = np.take(data, index, axis=attribute(node, "axis", 0))
            if value.size <= MAX_FOLDED_ELEMENTS:
                _replace_with_constant(g, node, value)
    return out


def fold_constant_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """op(c1, ..., cn) -> c   for the shape-chain ops (Unsqueeze, Concat, Cast, Div, ...)"""
    out = copy_model(model)
    g, outputs = out.graph, graph_output_names(out.graph)
    known = constants(g)
    opset = next((o.version for o in out.opset_import if o.domain in ("", "ai.onnx")), 17)
    for node in list(g.node):
        if node.op_type not in SHAPE_CHAIN_OPS or len(node.output) != 1 \
                or node.output[0] in outputs:
            continue
        inputs = [name for name in node.input if name]
        if not all(name in known for name in inputs):
            continue
        if any(known[name].size > MAX_FOLDED_ELEMENTS for name in inputs):
            continue
        value = evaluate_node(node, [known[name] for name in node.input if name], opset)
        if value.size <= MAX_FOLDED_ELEMENTS:
            _replace_with_constant(g, node, value)
            known[node.output[0]] = value      # so the next node of the chain folds too
    return out


def evaluate_node(node: onnx.NodeProto, values: list[np.ndarray], opset: int) -> np.ndarray:
    """Run one node on numpy inputs with ONNX's own reference implementation."""
    inputs = [name for name in node.input if name]
    graph = helper.make_graph(
        [node], "fold",
        [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for name, v in zip(inputs, values)],
        [helper.make_tensor_value_info(node.output[0], onnx.TensorProto.UNDEFINED, None)])
    one_node = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    (result,) = ReferenceEvaluator(one_node).run(None, dict(zip(inputs, values)))
    return np.asarray(result)



def fold_reshape_dims(model: onnx.ModelProto) -> onnx.ModelProto:
    """reshape(x, concat(.., unsqueeze(gather(shape(y), j)), ..)) -> reshape(x, [.., 0, ..])

    PyTorch export spells ``x.view(B, T, H, D)`` with B and T read from some
    tensor ``y`` at run time.  When shape inference proves that dim j of y *is*
    dim k of x (the same named axis, e.g. both ``B``), the k-th target dim can be
    the constant 0, which Reshape reads as "copy dim k of the input" (allowzero=0).
    The target becomes a constant and stays correct at every (batch, seq); the
    Shape/Gather/Unsqueeze/Concat chain then dies.
    """
    shapes = static_shapes(model)
    out = copy_model(model)
    g = out.graph
    known = constants(g)
    producer = {o: n for n in g.node for o in n.output}
    for node in g.node:
        if node.op_type != "Reshape" or attribute(node, "allowzero", 0) != 0:
            continue
        concat = producer.get(node.input[1])
        x_dims = shapes.get(node.input[0])
        if concat is None or concat.op_type != "Concat" or x_dims is None:
            continue
        target: list[int] = []
        for part in concat.input:
            k = len(target)               # the target dim this part starts at
            if part in known:
                target.extend(int(v) for v in known[part].reshape(-1))
            elif k < len(x_dims) and isinstance(x_dims[k], str) \
                    and _symbolic_dim(part, producer, known, shapes) == x_dims[k]:
                target.append(0)
            else:
                break
        else:
            name = fresh_name(g, node.input[1] + "_folded")
            set_initializer(g, name, np.array(target, dtype=np.int64))
            node.input[1] = name
    return out


def _symbolic_dim(name, producer, known, shapes) -> int | str | None:
    """The dim that ``unsqueeze(gather(shape(y), j))`` computes, as shape inference names it."""
    unsqueeze = producer.get(name)
    if unsqueeze is None or unsqueeze.op_type != "Unsqueeze":
        return None
    gather = producer.get(unsqueeze.input[0])
    if gather is None or gather.op_type != "Gather" or gather.input[1] not in known:
        return None
    shape = producer.get(gather.input[0])
    index = known[gather.input[1]]
    if shape is None or shape.op_type != "Shape" or index.size != 1:
        return None
    dims = _sliced(shapes.get(shape.input[0]), shape)
    j = int(index.reshape(-1)[0])
    return None if dims is None or not -len(dims) <= j < len(dims) else dims[j]
