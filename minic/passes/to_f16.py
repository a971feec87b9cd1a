"""to-f16, to-bf16: store a graph's floats in a 16-bit type, keeping its signature.

    y = op(x, @w) : f32   ->   x' = cast(x) {dtype = f16}
                               y' = op(x', @w') : f16          (@w' = @w rounded to f16)
                               y  = cast(y') {dtype = f32}

Every f32 constant becomes an f16 constant (rounded to the nearest f16: 11
significant bits, and beyond ±65504 it becomes ±inf), every f32 value a node
computes becomes f16, and a ``cast`` to f32 becomes a cast to f16.  The graph's
f32 inputs are cast to f16 where they enter and its f32 results back to f32
where they leave, so callers pass and receive the same arrays as before.

``to-bf16`` is the same rewrite with bf16 as the storage type (8 significant
bits, f32's range: nothing overflows that f32 holds).  One function,
``store_as``, does both; the storage type is its argument.

What an op on f16 computes is the registry's definition (f16 and bf16 are storage
types: each op works in f32 and rounds its result, see ``minic.ir.ops.via_f32``);
how compiled code accumulates is ``CompileOptions.precision``.  These passes are
in no ``-O`` level: they change the numbers, so they run only when asked for.
"""
from __future__ import annotations

import numpy as np

from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value
from minic.ir.ops.elementwise import CastAttrs
from minic.ir.types import DType, TensorType
from minic.passes.rewrite import clone, fresh_name


def _narrow(t: TensorType, storage: DType) -> TensorType:
    return TensorType(t.shape, storage) if t.dtype == DType.f32 else t


def store_as(graph: Graph, storage: DType) -> Graph:
    """op(x: f32, @w: f32) : f32 -> cast(op(cast(x, s), @w: s) : s, f32): ``storage`` (f16 or bf16)
    inside, f32 at the edges."""
    if not storage.is_storage_float:
        raise ValueError(f"storage must be f16 or bf16, got {storage.value}")
    suffix = "_" + storage.value
    g = clone(graph)
    # an f32 input -> the narrow value nodes read instead, cast where it enters
    entry = {v: make_node("cast", [v], CastAttrs(storage), names=[fresh_name(g, v.name + suffix)])
             for v in g.inputs if v.type.dtype == DType.f32}
    narrow = {v: node.outputs[0] for v, node in entry.items()}
    for c in g.constants:
        if c.type.dtype == DType.f32:
            with np.errstate(over="ignore"):         # past ±65504 is inf: that is what f16 stores
                c.data = c.data.astype(storage.numpy)
            c.type = _narrow(c.type, storage)
    for node in g.nodes:
        node.inputs = [narrow.get(v, v) for v in node.inputs]
        for v in node.outputs:
            v.type = _narrow(v.type, storage)
        if node.op == "cast" and node.attrs.dtype == DType.f32:
            node.attrs = CastAttrs(storage)
    # Results: a narrow value that was f32 leaves through a cast back, under its own name.
    exits: dict[Value, Node] = {}
    for old, v in zip(graph.outputs, g.outputs):
        if old.type.dtype == DType.f32 and v.type.dtype == storage and v not in exits:
            exits[v] = make_node("cast", [v], CastAttrs(DType.f32), names=[v.name])   # f32, as `old` was
            v.name = fresh_name(g, v.name + suffix)
    g.nodes = list(entry.values()) + g.nodes + list(exits.values())
    g.outputs = [exits[v].outputs[0] if v in exits else v for v in g.outputs]
    return g


def to_f16(graph: Graph) -> Graph:
    """op(x: f32, @w: f32) : f32 -> cast(op(cast(x, f16), @w: f16) : f16, f32): f16 inside, f32 at the edges."""
    return store_as(graph, DType.f16)


def to_bf16(graph: Graph) -> Graph:
    """op(x: f32, @w: f32) : f32 -> cast(op(cast(x, bf16), @w: bf16) : bf16, f32): bf16 inside, f32 at the edges."""
    return store_as(graph, DType.bf16)
