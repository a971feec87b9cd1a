"""ONNX's control flow (If, Scan, Loop): inlined at import where the import knows the way, else
ops that carry their bodies as graphs of their own (``loop``, ``if``) and run them at run time.

- ``If`` whose condition is known at import (a constant, or computed from
  constants and static shapes) becomes the nodes of its taken branch; a condition
  computed from a graph input makes one ``if`` op (minic/ir/ops/control.py) that carries
  both branches, each converted once into a graph of its own (``Body``): the runtime picks.
  Branches that make sequences or optionals make the backend specialise on the
  condition's inputs' values instead (``NeedsConstantError``), as for a shape-deciding input.
- ``Scan`` is unrolled over its static sequence length: each iteration converts
  the body with the states and the slices of the scan inputs bound, and the
  per-iteration outputs are stacked.
- ``Loop`` is unrolled while its trip count and condition are known at import;
  its scan outputs are stacked like Scan's.
- Where the import cannot know the number of iterations (a ``Loop`` whose trip count
  is a graph input or whose condition the body computes from data, a ``Scan`` over a
  symbolic sequence length), the node becomes one ``loop`` op (minic/ir/ops/control.py)
  that carries its body converted once into a graph of its own (``Body``): the
  iterations run at run time, whatever their number, and the model compiles once.
  A body that minic cannot state on its own (it needs the iteration's value at import)
  is specialized on the input's value instead, as before.

A body sees the outer graph's values by name; its own names shadow them only
while it is converted.  At most ``MAX_ITERATIONS`` iterations of one Scan or Loop
are unrolled, and at most ``UNROLL_BUDGET`` nodes and constants made by all the
unrolling of one import (nested loops multiply their trip counts): a model over
the budget is refused, naming the loop, before it takes minutes or gigabytes.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from minic.errors import UnsupportedError, UserError
from minic.frontend.onnx_builder import (Builder, NeedsConstantError, OnnxImportError, clean_name, converter_table,
                                         tensor_array)
from minic.ir.graph import Graph, Value, constant
from minic.ir.ops.control import joined_outputs
from minic.ir.types import DType, TensorType

CONVERTERS = converter_table()
converts = CONVERTERS.add

MAX_ITERATIONS = 1024
UNROLL_BUDGET = 50_000


class UnrollBudgetError(UnsupportedError):
    """Unrolling would make more than UNROLL_BUDGET nodes; the message names the loops from the outside in."""


class RunTimeConditionError(UnsupportedError):
    """A Loop's condition, computed by its body, depends on run-time data: it cannot be unrolled."""


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


@dataclass
class Body:
    """A loop body being built as a graph of its own (for the ``loop`` op): a Builder over it,
    its own inputs (the iteration, the carried values, one slice of each scanned input), and
    the outer values it reads, captured as inputs of their own after those."""
    outer: Builder
    b: Builder
    own: list[Value]
    captured: list[Value] = field(default_factory=list)       # outer values, in the order of ...
    inner: list[Value] = field(default_factory=list)          # ... the body inputs that stand for them
    seen: dict[Value, Value] = field(default_factory=dict)

    @classmethod
    def start(cls, outer: Builder, name: str, own: list[tuple[str, TensorType]]) -> "Body":
        graph = Graph(name, [Value(clean_name(n), t) for n, t in own], [])
        b = Builder(graph, outer.opset, convert_nodes=outer.convert_nodes, where=outer.where, node=outer.node)
        return cls(outer, b, list(graph.inputs))

    def capture(self, v: Value) -> Value:
        """The outer value ``v`` as the body sees it: a constant where the import knows its
        data (weights, and what is computed from them), else an input of the body."""
        if not isinstance(v, Value):
            raise UnsupportedError(f"{self.outer.where}: its body reads a sequence or optional of the outer graph")
        if v not in self.seen:
            data = self.outer.known(v)
            if data is not None:
                inner = constant(self.b.fresh(v.name), data)
                self.b.graph.constants.append(inner)
            else:
                inner = Value(self.b.fresh(v.name), v.type)
                self.b.graph.inputs.append(inner)
                self.captured.append(v)
                self.inner.append(inner)
            self.seen[v] = inner
        return self.seen[v]

    def convert(self, proto, bindings: dict[str, Value]) -> list[Value]:
        """The outputs of the ONNX graph ``proto`` converted into the body, its inputs bound to
        ``bindings`` and the outer names it reads captured."""
        self.b.env = {n: self.capture(self.outer.env[n]) for n in outer_names(proto) if n in self.outer.env}
        return inline(self.b, proto, bindings)

    def graph(self, outputs: list[Value]) -> Graph:
        """The finished body: its own inputs then the captured ones; each output made by a node."""
        g = self.b.graph
        g.inputs = self.own + self.inner
        made = {v for node in g.nodes for v in node.outputs}
        g.outputs = [v if v in made else self.b.one("identity", v) for v in outputs]
        return g


def outer_names(proto) -> list[str]:
    """The names an ONNX (sub)graph reads from the graphs around it, its own subgraphs' included."""
    from onnx import AttributeProto
    defined = {i.name for i in proto.input} | {t.name for t in proto.initializer}
    found: dict[str, None] = {}
    for node in proto.node:
        read = list(node.input)
        for a in node.attribute:
            subgraphs = [a.g] if a.type == AttributeProto.GRAPH else list(a.graphs) if a.type == AttributeProto.GRAPHS else []
            for sub in subgraphs:
                read += outer_names(sub)
        found.update((n, None) for n in read if n and n not in defined)
        defined.update(node.output)
    return list(found)


def emit_loop(b: Builder, body: Body, outputs: list[Value], inputs: list[Value], **attrs) -> list[Value]:
    """One ``loop`` node over ``body`` (its outputs ``outputs``): the loop's own ``inputs``, then
    the captured outer values."""
    graph = body.graph(outputs)
    graph.name = f"{b.graph.name}_{graph.name}"
    return b.emit("loop", inputs + body.captured, body=graph, **attrs)


def _tensors_only(b: Builder, values: list) -> None:
    if not all(isinstance(v, Value) for v in values):
        raise UnsupportedError(f"{b.where}: a loop at run time carries tensors only, not sequences or optionals")


def scalar(dtype: DType) -> TensorType:
    return TensorType((), dtype)


def _marks(b: Builder) -> tuple[int, int]:
    return len(b.graph.nodes), len(b.graph.constants)


def _rollback(b: Builder, marks: tuple[int, int]) -> None:
    """Forget what an abandoned unrolling added to the graph."""
    del b.graph.nodes[marks[0]:]
    del b.graph.constants[marks[1]:]


@converts("If")
def _if(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """The taken branch inlined where the condition is known at import; else an ``if`` at run time."""
    cond = b.known(x[0])
    if cond is None:
        return _run_time_if(b, x[0], a["then_branch"], a["else_branch"])
    if np.size(cond) != 1:
        raise OnnxImportError(f"{b.where}: the condition must hold one element, got shape {list(np.shape(cond))}")
    branch = a["then_branch"] if bool(np.asarray(cond).reshape(-1)[0]) else a["else_branch"]
    return inline(b, branch, {})


def _run_time_if(b: Builder, cond: Value, then_proto, else_proto) -> list[Value]:
    """One ``if`` op whose branches are converted once each, as graphs of their own that take the
    outer values either reads.  Where minic cannot state the branches so (they make sequences or
    optionals, or need a value at import), the condition's value is needed instead: the model is
    specialized on the inputs it is computed from, as before (``NeedsConstantError``)."""
    if cond.type.rank and all(isinstance(d, int) for d in cond.type.shape) and np.prod(cond.type.shape) != 1:
        raise OnnxImportError(f"{b.where}: the condition must hold one element, got shape {list(cond.type.shape)}")
    marks = _marks(b)
    try:
        return _branches(b, cond, then_proto, else_proto)
    except UserError as e:
        _rollback(b, marks)
        reason = str(e).removeprefix(f"{b.where}: ")
        raise NeedsConstantError(f"{b.where}: the condition is computed from values unknown at compile time, and "
                                 f"its branches cannot be compiled for run time ({reason})",
                                 b.sources(cond)) from None


def _branches(b: Builder, cond: Value, then_proto, else_proto) -> list[Value]:
    k = len(b.graph.nodes)
    bodies = []
    for which, proto in (("then", then_proto), ("else", else_proto)):
        body = Body.start(b, f"if{k}_{which}", [])
        outs = body.convert(proto, {})
        if not all(isinstance(v, Value) for v in outs):
            raise UnsupportedError(f"{b.where}: an if at run time returns tensors only, not sequences or optionals")
        bodies.append((body, outs))
    captured = list(dict.fromkeys(v for body, _ in bodies for v in body.captured))
    graphs = [_branch_graph(b, body, outs, captured) for body, outs in bodies]
    joined = joined_outputs(*graphs, [v.type for v in captured])
    sizes = tuple(b.fresh_symbol("if") for shape, _ in joined for d in shape if d is None)
    one = cond if cond.type.shape == () else b.one("reshape", cond, shape=())
    return b.emit("if", [one] + captured, then_branch=graphs[0], else_branch=graphs[1], sizes=sizes)


def _branch_graph(b: Builder, body: Body, outputs: list[Value], captured: list[Value]) -> Graph:
    """The finished branch, taking every value in ``captured`` (the other branch's too) as an input."""
    graph = body.graph(outputs)
    graph.name = f"{b.graph.name}_{graph.name}"
    inner = dict(zip(body.captured, body.inner))
    graph.inputs = [inner[v] if v in inner else Value(body.b.fresh(v.name), v.type) for v in captured]
    return graph


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
    if len(lengths) != 1:
        raise UnsupportedError(f"{b.where}: the scanned inputs differ in length: {sorted(map(str, lengths))}")
    steps = lengths.pop()
    if not isinstance(steps, int):                  # a symbolic length: a loop at run time
        return _run_time_scan(b, body, states, scanned, in_axes, in_dirs, out_axes, out_dirs)
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


def _front(b: Builder, v: Value, axis: int) -> Value:
    """``v`` with ``axis`` moved to the front."""
    rest = tuple(i for i in range(v.type.rank) if i != axis)
    return v if axis == 0 else b.one("transpose", v, perm=(axis,) + rest)


def _run_time_scan(b: Builder, body, states: list[Value], scanned: list[Value], in_axes: list[int],
                   in_dirs: list[int], out_axes: list[int], out_dirs: list[int]) -> list[Value]:
    """Scan over a symbolic sequence length: one ``loop`` whose body is the Scan's, converted once."""
    n, m = len(states), len(scanned)
    _tensors_only(b, states + scanned)
    fronted = [_front(b, v, ax) for v, ax in zip(scanned, in_axes)]
    own = [("iteration", scalar(DType.i64))] + [(p.name, v.type) for p, v in zip(body.input[:n], states)] + \
          [(p.name, TensorType(v.type.shape[1:], v.type.dtype)) for p, v in zip(body.input[n:], fronted)]
    step = Body.start(b, "scan_body", own)
    outs = step.convert(body, _bound(b, body.input, step.own[1:]))
    results = emit_loop(b, step, outs, states + fronted, carried=n, scanned=m,
                        reverse_in=tuple(bool(d) for d in in_dirs), reverse_out=tuple(bool(d) for d in out_dirs))
    stacked = []
    for v, axis in zip(results[n:], out_axes):
        axis %= v.type.rank
        perm = tuple(range(1, axis + 1)) + (0,) + tuple(range(axis + 1, v.type.rank))
        stacked.append(v if axis == 0 else b.one("transpose", v, perm=perm))
    return results[:n] + stacked


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
    """Unrolled where the trip count and the condition are known at import; else a loop at run time."""
    body = a["body"]
    x = x + [None] * (2 - len(x))
    trip, cond, carried = x[0], x[1], list(x[2:])
    if trip is None and cond is None:
        raise UnsupportedError(f"{b.where}: a Loop without trip count or condition never ends")
    if (trip is None or b.known(trip) is not None) and (cond is None or b.known(cond) is not None):
        marks = _marks(b)
        try:
            return _unrolled_loop(b, body, trip, cond, carried)
        except RunTimeConditionError as refusal:          # the body decides when it stops
            _rollback(b, marks)
            try:
                return _run_time_loop(b, body, trip, cond, carried)
            except UserError:
                raise refusal from None
    try:
        return _run_time_loop(b, body, trip, cond, carried)
    except UserError:                      # a body minic cannot state on its own: specialize on the value
        if trip is not None:
            b.need_known(trip, "the trip count")
        b.need_known(cond, "the condition")
        raise


def _run_time_loop(b: Builder, body, trip: Value | None, cond: Value | None, carried: list[Value]) -> list[Value]:
    """Loop as one ``loop`` op: its body converted once, with the iteration as an input and the
    condition it was entered with (always true) as a constant."""
    n = len(carried)
    _tensors_only(b, carried)
    if len(body.input) != 2 + n:
        raise OnnxImportError(f"{b.where}: the body takes {len(body.input)} inputs, the Loop gives {2 + n}")
    step = Body.start(b, "loop_body", [("iteration", scalar(DType.i64))] + [(p.name, v.type)
                                                                           for p, v in zip(body.input[2:], carried)])
    entered = step.b.const(np.asarray(True))
    outs = step.convert(body, _bound(b, body.input, [step.own[0], entered] + step.own[1:]))
    always = _true(step.b.known(outs[0])) and (cond is None or _true(b.known(cond)))    # no while loop
    one = lambda v: v if v.type.shape == () else b.one("reshape", v, shape=())           # noqa: E731
    inputs = [] if trip is None else [one(trip)]
    if not always:
        inputs.append(b.const(np.asarray(True)) if cond is None else one(cond))
    stacked = len(body.output) - 1 - n
    return emit_loop(b, step, outs if not always else outs[1:], inputs + carried, carried=n, trip=trip is not None,
                     condition=not always, count=b.fresh_symbol("loop") if stacked else None)


def _true(known: np.ndarray | None) -> bool:
    return known is not None and bool(np.asarray(known).reshape(-1)[0])


def _unrolled_loop(b: Builder, body, trip: Value | None, cond: Value | None, carried: list[Value]) -> list[Value]:
    limit = int(b.known(trip).reshape(-1)[0]) if trip is not None else None
    going = bool(b.known(cond).reshape(-1)[0]) if cond is not None else True
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
                raise RunTimeConditionError(f"{b.where}: the loop condition depends on run-time data "
                                            "(minic unrolls Loop)")
            going = bool(np.asarray(known).reshape(-1)[0])
            carried = results[1:1 + n]
            outs.append(results[1 + n:])
            i += 1
    k = len(body.output) - 1 - n
    if k and not outs:
        raise UnsupportedError(f"{b.where}: a Loop that runs 0 times has empty scan outputs (not supported)")
    return carried + [_stack(b, [o[j] for o in outs], 0) for j in range(k)]
