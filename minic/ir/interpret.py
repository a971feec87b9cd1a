"""The reference interpreter: run a Graph with the ops' numpy implementations.

Symbolic dims (``B``, ``T``) are bound from the shapes of the actual inputs, then
substituted into attributes that mention them (a reshape to ``[B*T, 256]``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from minic.errors import DataError, UserError
from minic.limits import contiguous, ensure_values_fit
from minic.ir import ops
from minic.ir.graph import Graph, Value, attr_items
from minic.ir.ops.control import IfAttrs, LoopAttrs, run_if, run_loop
from minic.ir.ops.data_sized import sized_outputs
from minic.ir.types import dim_eval, symbols


def bind_symbols(inputs: Sequence[Value], arrays: Sequence[np.ndarray]) -> dict[str, int]:
    """Check actual input arrays against the graph's input types; return symbol values."""
    if len(arrays) != len(inputs):
        raise UserError(f"the model takes {len(inputs)} inputs, got {len(arrays)}")
    env: dict[str, int] = {}
    for v, a in zip(inputs, arrays):
        if a.dtype != v.type.dtype.numpy:
            raise UserError(f"input '{v.name}': expected dtype {v.type.dtype.value}, got {a.dtype}")
        if a.ndim != v.type.rank:
            raise UserError(f"input '{v.name}': expected rank {v.type.rank} ({v.type}), got shape {list(a.shape)}")
        for axis, (d, n) in enumerate(zip(v.type.shape, a.shape)):
            if isinstance(d, str) and d.isidentifier():
                if env.setdefault(d, n) != n:
                    raise UserError(f"input '{v.name}' axis {axis}: {d} = {n} contradicts {d} = {env[d]} bound earlier")
    for v, a in zip(inputs, arrays):
        for axis, (d, n) in enumerate(zip(v.type.shape, a.shape)):
            if dim_eval(d, env) != n:
                want = d if isinstance(d, int) else f"{d} = {dim_eval(d, env)}"
                raise UserError(f"input '{v.name}' axis {axis}: expected {want}, got {n} (shape {list(a.shape)})")
    return env


def resolve(attrs: Any, env: Mapping[str, int]) -> Any:
    """Substitute bound symbols into an attribute dataclass.  Dims only ever
    appear inside tuple fields (shapes, slice bounds), so only those are touched."""
    changes = {name: tuple(dim_eval(v, env) if isinstance(v, str) else v for v in value)
               for name, value in attr_items(attrs)
               if isinstance(value, tuple) and any(isinstance(v, str) for v in value)}
    return replace(attrs, **changes) if changes else attrs


def interpret(graph: Graph, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run ``graph`` on numpy ``arrays``; return its outputs.  An op whose output size is
    decided by the data (ops/data_sized.py) binds its size symbol from its result; a ``loop``
    (ops/control.py) runs its body graph, interpreted, once per iteration, an ``if`` the branch
    its condition picks."""
    arrays = contiguous(arrays)
    env = bind_symbols(graph.inputs, arrays)
    sized = [v for node in graph.nodes for v in node.outputs
             if all(s in env for d in v.type.shape for s in symbols(d))]
    ensure_values_fit(sized, env, f"interpreting @{graph.name}" + (f" with {env}" if env else ""))
    memory: dict[Value, np.ndarray] = dict(zip(graph.inputs, arrays))
    memory.update((c, c.data) for c in graph.constants)
    returned = set(graph.outputs)
    last = {v: i for i, node in enumerate(graph.nodes) for v in node.inputs if v not in returned}
    for i, node in enumerate(graph.nodes):
        op = ops.get(node.op)
        try:
            args = [memory[v] for v in node.inputs]
            if isinstance(node.attrs, LoopAttrs):
                body = node.attrs.body
                result = run_loop(node.attrs, args, lambda *a: tuple(interpret(body, a)))
            elif isinstance(node.attrs, IfAttrs):
                then, other = node.attrs.then_branch, node.attrs.else_branch
                result = run_if(node.attrs, args, lambda *a: tuple(interpret(then, a)),
                                lambda *a: tuple(interpret(other, a)))
            else:
                result = op.reference(resolve(node.attrs, env), *args)
        except DataError as e:                   # name the node, as compiled code does
            raise DataError(f"{graph.name}: {node.describe(i)}: {e}") from None
        results = result if isinstance(result, tuple) else (result,)
        if op.sized_by_data:
            env.update(sized_outputs(node.attrs.decided, [v.type for v in node.outputs], results))
        memory.update((v, np.asarray(r, dtype=v.type.dtype.numpy)) for v, r in zip(node.outputs, results))
        for v in node.inputs:                    # read for the last time: freed, as a runtime's arena reuses it
            if last.get(v) == i:
                memory.pop(v, None)
    # Each output an array of its own, as compiled code returns: not the caller's input, a
    # constant of the graph, a view of either (reshape), nor an output listed twice.
    return [np.array(memory[v]) for v in graph.outputs]
