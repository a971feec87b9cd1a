"""ONNX's control flow (If, Scan, Loop), inlined at import: minic's graphs have no sub-graphs.

- ``If`` whose condition is known at import (a constant, or computed from
  constants and static shapes) becomes the nodes of its taken branch; a condition
  computed from a graph input makes the backend specialise on that input's value
  (``NeedsConstantError``), as for a shape-deciding input.
- ``Scan`` is unrolled over its static sequence length: each iteration converts
  the body with the states and the slices of the scan inputs bound, and the
  per-iteration outputs are stacked.
- ``Loop`` is unrolled while its trip count and condition are known at import
  (a condition that depends on run-time data is refused); its scan outputs are
  stacked like Scan's.

A body sees the outer graph's values by name; its own names shadow them only
while it is converted.  At most ``MAX_ITERATIONS`` iterations of one Scan or Loop
are unrolled, and at most ``UNROLL_BUDGET`` nodes and constants made by all the
unrolling of one import (nested loops multiply their trip counts): a model over
the budget is refused, naming the loop, before it takes minutes or gigabytes.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend.onnx_builder import (Builder, NeedsConstantError, OnnxImportError, clean_name, converter_table,
                                         tensor_array)
from minic.ir.graph import Value, constant

CONVERTERS = converter_table()
converts = CONVERTERS.add

MAX_ITERATIONS = 1024
UNROLL_BUDGET = 50_000


class UnrollBudgetError(UnsupportedError):
    """Unrolling would make more than UNROLL_BUDGET nodes; the message names the loops from the outside in."""


def _made(b: Builder) -> int:
    return len(b.graph.nodes) + len(b.graph.constants)


@contextmanager
def _unrolling(b: Builder):
    """The outermost Scan or Loop being unrolled sets the budget; nested ones share it."""
    outermost = b.unroll_limit is None
    if outermost:
        b.unroll_limit = _made(b) + UNROLL_BUDGET
    try:
        yield
    finally:
        if outermost:
            b.unroll_limit = None


def _within_budget(b: Builder, iteration: int) -> None:
    if _made(b) > b.unroll_limit:
        raise UnrollBudgetError(f"{b.where}: unrolling stopped at iteration {iteration}: the control flow of this "
                               f"model makes more than {UNROLL_BUDGET} nodes (nested loops multiply their trip counts)")


def inline(b: Builder, body, bindings: dict[str, Value]) -> list[Value]:
    """The values of ``body``'s outputs, its nodes converted with its inputs bound to ``bindings``."""
    saved = dict(b.env), b.node, b.where, b.opset
    try:
        for init in body.initializer:
            v = constant(clean_name(b.fresh(init.name)), tensor_array(init, f"{b.where}: initializer '{init.name}'"))
            b.graph.constants.append(v)
            b.env[init.name] = v
        b.env.update(bindings)
        try:
            b.convert_nodes(b, list(body.node), b.opset, {})
        except UnrollBudgetError as e:
            raise UnrollBudgetError(f"{saved[2]}: in its body: {e}") from None
        missing = [o.name for o in body.output if o.name not in b.env]
        if missing:
            raise OnnxImportError(f"{saved[2]}: its body does not produce {missing}")
        return [b.env[o.name] for o in body.output]
    finally:
        b.env, b.node, b.where, b.opset = saved


def _bound(b: Builder, names, values) -> dict[str, Value]:
    return {p.name: v for p, v in zip(names, values)}


@converts("If")
def _if(b: Builder, x: list[Value], a: dict) -> list[Value]:
    cond = b.known(x[0])
    if cond is None:
        raise NeedsConstantError(f"{b.where}: the condition is computed from values unknown at compile time",
                                 b.sources(x[0]))
    if np.size(cond) != 1:
        raise OnnxImportError(f"{b.where}: the condition must hold one element, got shape {list(np.shape(cond))}")
    branch = a["then_branch"] if bool(np.asarray(cond).reshape(-1)[0]) else a["else_branch"]
    return inline(b, branch, {})


def _slice(b: Builder, v: Value, axis: int, t: int) -> Value:
    piece = b.one("slice", v, axes=(axis,), starts=(t,), ends=(t + 1,), steps=(1,))
    return b.one("squeeze", piece, axes=(axis,))


def _stack(b: Builder, frames: list[Value], axis: int) -> Value:
    return b.one("concat", *[b.one("unsqueeze", f, axes=(axis,)) for f in frames], axis=axis)


@converts("Scan")
def _scan(b: Builder, x: list[Value], a: dict) -> list[Value]:
    body, m = a["body"], int(a["num_scan_inputs"])
    if m > len(x):
        raise OnnxImportError(f"{b.where}: attribute 'num_scan_inputs' is {m}, but the node has {len(x)} inputs")
    states, scanned = x[:len(x) - m], x[len(x) - m:]
    in_axes = [ax % v.type.rank for ax, v in zip(a.get("scan_input_axes", [0] * m), scanned)]
    k = len(body.output) - len(states)
    return _unrolled_scan(b, body, states, scanned, in_axes, a.get("scan_input_directions", [0] * m),
                          a.get("scan_output_axes", [0] * k), a.get("scan_output_directions", [0] * k))


def _unrolled_scan(b: Builder, body, states: list[Value], scanned: list[Value], in_axes: list[int],
                   in_dirs: list[int], out_axes: list[int], out_dirs: list[int]) -> list[Value]:
    """Scan (opset 9 on): the final states, then the scan outputs stacked along their axes."""
    lengths = {v.type.shape[ax] for v, ax in zip(scanned, in_axes)}
    if len(lengths) != 1 or not isinstance(next(iter(lengths)), int):
        raise UnsupportedError(f"{b.where}: minic unrolls Scan and needs one static sequence length, got {lengths}")
    steps = lengths.pop()
    if steps > MAX_ITERATIONS:
        raise UnsupportedError(f"{b.where}: {steps} iterations (minic unrolls at most {MAX_ITERATIONS})")
    n = len(states)
    outs: list[list[Value]] = []
    with _unrolling(b):
        for t in range(steps):
            _within_budget(b, t)
            elems = [_slice(b, v, ax, steps - 1 - t if d else t) for v, ax, d in zip(scanned, in_axes, in_dirs)]
            results = inline(b, body, _bound(b, body.input, list(states) + elems))
            states = results[:n]
            outs.append(results[n:])
    stacked = []
    for j in range(len(body.output) - n):
        frames = [o[j] for o in outs]
        if out_dirs[j]:
            frames = frames[::-1]
        stacked.append(_stack(b, frames, out_axes[j] % (frames[0].type.rank + 1)))
    return list(states) + stacked


def scan_with_batch_axis(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Scan of opset 8, whose inputs and outputs have a batch axis first (and per-entry
    sequence lengths, here only the full length): one opset-9 Scan per batch entry, the
    results stacked along the batch axis.  (onnx.py's _upgraded keeps these nodes out of
    ONNX's version converter, which drops the batch axis, in the domain SCAN8_DOMAIN.)"""
    body, m = a["body"], int(a["num_scan_inputs"])
    lens, x = x[0], x[1:]
    if m > len(x):
        raise OnnxImportError(f"{b.where}: attribute 'num_scan_inputs' is {m}, but the node has {len(x)} inputs")
    states, scanned = x[:len(x) - m], x[len(x) - m:]
    batch = {v.type.shape[0] for v in x}
    if len(batch) != 1 or not isinstance(next(iter(batch)), int):
        raise UnsupportedError(f"{b.where}: Scan (opset 8) needs one static batch size, got {batch}")
    batch = batch.pop()
    if lens is not None:
        steps = scanned[0].type.shape[1]
        known = b.need_known(lens, "sequence_lens").reshape(-1)
        if np.any(known != steps):
            raise UnsupportedError(f"{b.where}: Scan (opset 8) with sequence lengths {known.tolist()} shorter "
                                   f"than the inputs' {steps} steps is not supported")
    k = len(body.output) - len(states)
    per_entry = []
    for i in range(batch):
        entry = lambda vs: [_slice(b, v, 0, i) for v in vs]              # noqa: E731
        per_entry.append(_unrolled_scan(b, body, entry(states), entry(scanned), [0] * m,
                                        a.get("directions", [0] * m), [0] * k, [0] * k))
    return [_stack(b, [r[j] for r in per_entry], 0) for j in range(len(body.output))]


@converts("Loop")
def _loop(b: Builder, x: list[Value], a: dict) -> list[Value]:
    body = a["body"]
    x = x + [None] * (2 - len(x))
    trip, cond, carried = x[0], x[1], list(x[2:])
    limit = int(b.need_known(trip, "the trip count").reshape(-1)[0]) if trip is not None else None
    going = bool(b.need_known(cond, "the condition").reshape(-1)[0]) if cond is not None else True
    if limit is None and cond is None:
        raise UnsupportedError(f"{b.where}: a Loop without trip count or condition never ends")
    n = len(carried)
    outs: list[list[Value]] = []
    i = 0
    with _unrolling(b):
        while going and (limit is None or i < limit):
            if i >= MAX_ITERATIONS:
                raise UnsupportedError(f"{b.where}: more than {MAX_ITERATIONS} iterations (minic unrolls Loop)")
            _within_budget(b, i)
            counter = b.const(np.asarray(i, np.int64))
            flag = b.const(np.asarray(going))
            results = inline(b, body, _bound(b, body.input, [counter, flag] + carried))
            known = b.known(results[0])
            if known is None:
                raise UnsupportedError(f"{b.where}: the loop condition depends on run-time data (minic unrolls Loop)")
            going = bool(np.asarray(known).reshape(-1)[0])
            carried = results[1:1 + n]
            outs.append(results[1 + n:])
            i += 1
    k = len(body.output) - 1 - n
    if k and not outs:
        raise UnsupportedError(f"{b.where}: a Loop that runs 0 times has empty scan outputs (not supported)")
    return carried + [_stack(b, [o[j] for o in outs], 0) for j in range(k)]
