"""Recurrent layers (RNN, GRU, LSTM), written once for both importers: ONNX's RNN, GRU and
LSTM nodes (onnx_recurrent.py) and PyTorch's nn.RNN, nn.GRU and nn.LSTM (torch_recurrent.py).

``layer`` runs one layer over ``X`` [T, B, I] in each of its directions and returns, per
direction, the outputs of every step stacked [T, B, H] and the last states.  Over a static
T it is unrolled: T copies of the step, each reading the states of the one before.  Over a
symbolic T (a length known only at run time) it is one ``loop`` op per direction
(minic/ir/ops/control.py) whose body is one step, built once: the loop runs it as many
times as X has steps.

A step computes each gate from ``x_t W + h R + biases``, in the gate order ONNX fixes (an
importer puts its own order into it: torch's LSTM is i f g o, its GRU r z n):

    RNN   h' = f(x Wi + h Ri + b)
    GRU   z = f(.z),  r = f(.r),  n = g(x Wn + (r*h) Rn + b)  (linear_before_reset, torch's
          form: x Wn + r*(h Rn + bRn)),  h' = (1 - z)*n + z*h
    LSTM  i, f = f(.) (peepholes add p*c), c' = f*c + i*g(.c), o = f(.o + p*c'),
          h' = o*h(c')  (torch's proj_size: h' P)

``lengths`` (ONNX's sequence_lens, [B, 1]) mask a step past a batch entry's length: its
states are carried over and its output is 0.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from minic.errors import UnsupportedError
from minic.ir.build import GraphBuilder
from minic.ir.graph import Graph, Value, constant
from minic.ir.types import DType, TensorType

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


@dataclass(frozen=True)
class Layer:
    """What every step of a layer shares."""
    cell: str                                  # "RNN", "GRU" or "LSTM"
    activations: tuple[tuple[str, ...], ...]   # per direction, minic op names: (f,) (f, g) (f, g, h)
    linear_before_reset: bool = False          # GRU: r scales h R + b (torch) rather than h


@dataclass
class Weights:
    """One direction's weights as a step reads them, per gate in ONNX's order."""
    w: list[Value]                   # [I, H]: x @ w
    r: list[Value]                   # [H, H] ([P, H] with a projection): h @ r
    wb: list[Value | None]           # [H]
    rb: list[Value | None]
    peepholes: list[Value] | None = None   # LSTM i, o, f: [H]
    projection: Value | None = None        # LSTM [H, P]: torch's proj_size


# Builds a direction's weights with a builder, from outer values read through ``capture``
# (the identity when unrolled; a loop body's capture, so that constants stay constants there).
WeightsOf = Callable[[Any, Callable[[Value | None], Value | None]], Weights]


@dataclass
class Direction:
    weights: WeightsOf
    h0: Value                        # [B, H] ([B, P] with a projection)
    c0: Value | None = None          # [B, H], LSTM
    backward: bool = False


@dataclass
class Result:
    """Per direction: every step's output stacked [T, B, H], the last h and (LSTM) c."""
    ys: list[Value]
    hs: list[Value]
    cs: list[Value | None]


# Maps h, with a builder, to what R multiplies (ONNX Runtime's DynamicQuantizeLSTM rounds it to 8 bits).
WeighState = Callable[[Any, Value], Value]


def layer(b: Any, spec: Layer, X: Value, directions: list[Direction], lengths: Value | None = None,
          weigh_state: WeighState | None = None) -> Result:
    """The layer over X [T, B, I], unrolled over a static T, a loop per direction over a symbolic one."""
    run = _unrolled if isinstance(X.type.shape[0], int) else _looped
    return run(b, spec, X, directions, lengths, weigh_state)


@dataclass
class _Step:
    """What a cell sees at one time step."""
    b: Any
    x: Value                         # [B, I]
    h: Value                         # [B, H]
    h_weighed: Value                 # h as R sees it
    c: Value | None
    w: Weights
    act: tuple[str, ...]
    linear_before_reset: bool

    def linear(self, v: Value, weights: Value, bias: Value | None) -> Value:
        y = self.b.one("matmul", v, weights)
        return y if bias is None else self.b.one("add", y, bias)

    def gate(self, k: int) -> Value:
        return self.b.one("add", self.linear(self.x, self.w.w[k], self.w.wb[k]),
                          self.linear(self.h_weighed, self.w.r[k], self.w.rb[k]))


def _rnn(s: _Step) -> tuple[Value, Value | None]:
    return s.b.one(s.act[0], s.gate(0)), None


def _gru(s: _Step) -> tuple[Value, Value | None]:
    b, f, g = s.b, s.act[0], s.act[1]
    z, r = b.one(f, s.gate(0)), b.one(f, s.gate(1))
    xh = s.linear(s.x, s.w.w[2], s.w.wb[2])
    if s.linear_before_reset:
        hh = b.one("mul", r, s.linear(s.h_weighed, s.w.r[2], s.w.rb[2]))
    else:
        hh = s.linear(b.one("mul", r, s.h), s.w.r[2], s.w.rb[2])
    n = b.one(g, b.one("add", xh, hh))
    one = b.const(1, like=z)
    return b.one("add", b.one("mul", b.one("sub", one, z), n), b.one("mul", z, s.h)), None


def _lstm(s: _Step) -> tuple[Value, Value | None]:
    b, f, g, h = s.b, *s.act
    pre = [s.gate(k) for k in range(4)]                 # i o f c
    p = s.w.peepholes
    if p is not None:
        pre[0] = b.one("add", pre[0], b.one("mul", p[0], s.c))
        pre[2] = b.one("add", pre[2], b.one("mul", p[2], s.c))
    i, fg = b.one(f, pre[0]), b.one(f, pre[2])
    c = b.one("add", b.one("mul", fg, s.c), b.one("mul", i, b.one(g, pre[3])))
    if p is not None:
        pre[1] = b.one("add", pre[1], b.one("mul", p[1], c))
    out = b.one("mul", b.one(f, pre[1]), b.one(h, c))
    return (out if s.w.projection is None else b.one("matmul", out, s.w.projection)), c


_CELLS = {"RNN": _rnn, "GRU": _gru, "LSTM": _lstm}


def _step(b: Any, spec: Layer, d: int, w: Weights, x: Value, h: Value, c: Value | None, t: Value,
          lengths: Value | None, weigh_state: WeighState | None) -> tuple[Value, Value, Value | None]:
    """One step at time ``t``: (its output, the next h, the next c)."""
    s = _Step(b, x, h, weigh_state(b, h) if weigh_state else h, c, w, spec.activations[d], spec.linear_before_reset)
    h_new, c_new = _CELLS[spec.cell](s)
    if lengths is None:
        return h_new, h_new, c_new
    live = b.one("lt", t, lengths)                         # [B, 1]: this step is inside the entry's sequence
    zero = b.one("expand", b.const(np.zeros((), h_new.type.dtype.numpy)), shape=h_new.type.shape)
    c_kept = b.one("where", live, c_new, c) if c_new is not None else None
    return b.one("where", live, h_new, zero), b.one("where", live, h_new, h), c_kept


def _stack(b: Any, frames: list[Value]) -> Value:
    return b.one("concat", *[b.one("unsqueeze", f, axes=(0,)) for f in frames], axis=0)


def _unrolled(b: Any, spec: Layer, X: Value, directions: list[Direction], lengths: Value | None,
              weigh_state: WeighState | None) -> Result:
    steps = X.type.shape[0]
    if steps == 0:
        raise UnsupportedError(f"{b.where}: a sequence of length 0")
    xs = [b.one("squeeze", p, axes=(0,)) for p in b.many("split", X, axis=0, sizes=(1,) * steps)]
    result = Result([], [], [])
    for d, direction in enumerate(directions):
        w = direction.weights(b, lambda v: v)
        h, c = direction.h0, direction.c0
        out: list[Value] = [X] * steps
        for t in (reversed(range(steps)) if direction.backward else range(steps)):
            out[t], h, c = _step(b, spec, d, w, xs[t], h, c, b.const(np.asarray(t, np.int64)), lengths, weigh_state)
        result.ys.append(_stack(b, out))
        result.hs.append(h)
        result.cs.append(c)
    return result


class _Body:
    """One step as a graph of its own, a loop body: its own inputs (the iteration, the states,
    one step of X), then the outer values it reads (``capture``: a constant is copied in and
    stays one, so weights fold and pack when the body compiles; anything else becomes an input)."""

    def __init__(self, b: Any, name: str, own: list[tuple[str, TensorType]]):
        self.graph = Graph(name, [Value(n, t) for n, t in own], [])
        self.b = GraphBuilder(self.graph, where=b.where)
        self.own = list(self.graph.inputs)
        self.captured: list[Value] = []
        self.inner: list[Value] = []
        self.seen: dict[Value, Value] = {}

    def capture(self, v: Value | None) -> Value | None:
        if v is None:
            return None
        if v not in self.seen:
            if v.is_constant:
                inner = constant(self.b.fresh(v.name), v.data)
                self.graph.constants.append(inner)
            else:
                inner = Value(self.b.fresh(v.name), v.type)
                self.captured.append(v)
                self.inner.append(inner)
            self.seen[v] = inner
        return self.seen[v]

    def loop(self, outer: Any, outputs: list[Value], inputs: list[Value], **attrs: Any) -> list[Value]:
        """One ``loop`` node in ``outer`` running this body: the loop's own ``inputs``, then the captured values."""
        self.graph.inputs = self.own + self.inner
        made = {v for node in self.graph.nodes for v in node.outputs}
        self.graph.outputs = [v if v in made else self.b.one("identity", v) for v in outputs]
        return outer.many("loop", *inputs, *self.captured, body=self.graph, **attrs)


def _looped(b: Any, spec: Layer, X: Value, directions: list[Direction], lengths: Value | None,
            weigh_state: WeighState | None) -> Result:
    result = Result([], [], [])
    # A backward loop's iteration k is time T-1-k, which the lengths' mask needs: T, from X's shape.
    last = b.one("sub", row(b, b.one("shape", X), 0), b.const(np.asarray(1, np.int64))) \
        if lengths is not None and any(d.backward for d in directions) else None
    for d, direction in enumerate(directions):
        states = [("h", direction.h0.type)] + ([("c", direction.c0.type)] if direction.c0 is not None else [])
        body = _Body(b, f"{spec.cell.lower()}{'_backward' if direction.backward else ''}_step",
                     [("t", TensorType((), DType.i64)), *states, ("x_t", TensorType(X.type.shape[1:], X.type.dtype))])
        t, h, *rest = body.own
        c, x_t = (rest[0], rest[1]) if direction.c0 is not None else (None, rest[0])
        w = direction.weights(body.b, body.capture)
        time = body.b.one("sub", body.capture(last), t) if direction.backward and last is not None else t
        y, h_new, c_new = _step(body.b, spec, d, w, x_t, h, c, time, body.capture(lengths), weigh_state)
        carried = [h_new] + ([c_new] if c_new is not None else [])
        results = body.loop(b, [*carried, y], [direction.h0] + ([direction.c0] if c is not None else []) + [X],
                            carried=len(carried), scanned=1, reverse_in=(direction.backward,),
                            reverse_out=(direction.backward,))
        result.hs.append(results[0])
        result.cs.append(results[1] if c is not None else None)
        result.ys.append(results[-1])
    return result


def row(b: Any, v: Value, k: int) -> Value:
    """Entry ``k`` of ``v``'s axis 0, without that axis."""
    return b.one("squeeze", b.one("slice", v, axes=(0,), starts=(k,), ends=(k + 1,), steps=(1,)), axes=(0,))


def gates(b: Any, v: Value, n: int, order: tuple[int, ...] | None = None) -> list[Value]:
    """``v`` [n*H, ...] cut into its ``n`` gates along axis 0, put in ``order`` (ONNX's)."""
    pieces = b.many("split", v, axis=0, sizes=(v.type.shape[0] // n,) * n)
    return [pieces[k] for k in (order or range(n))]


def transposed(b: Any, vs: list[Value]) -> list[Value]:
    return [b.one("transpose", v, perm=(1, 0)) for v in vs]
