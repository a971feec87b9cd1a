"""ONNX's recurrent layers (RNN, GRU, LSTM): unrolled at import over a static sequence length, a
loop at run time over a symbolic one (``_looped``: one ``loop`` op per direction, its body one step).

One driver serves the three: it splits the weights per direction, walks the time
steps forward (or backward), and hands each step to the layer's cell, which
computes the new state from ``x_t W^T + h R^T + biases`` in the gate order ONNX
fixes (GRU: z r h; LSTM: i o f c).  ``sequence_lens`` masks a step that is past a
batch entry's length: its state is carried over and its output is 0.  Outputs
``Y`` [T, D, B, H] (``layout`` 1: [B, T, D, H]), ``Y_h`` and ``Y_c`` [D, B, H]
(``layout`` 1: [B, D, H]).  ``unroll`` is the driver for ops written as one of these with
something changed (ONNX Runtime's DynamicQuantizeLSTM rounds the state to 8 bits).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend.onnx_builder import Builder, OnnxImportError, converter_table
from minic.frontend.onnx_control import Body, emit_loop, scalar
from minic.ir.graph import Value
from minic.ir.types import DType, TensorType

CONVERTERS = converter_table()
converts = CONVERTERS.add

_ACTIVATIONS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}


@dataclass
class _Step:
    """What a cell sees at one time step of one direction."""
    b: Builder
    x: Value                        # [B, I]
    h: Value                        # [B, H]
    h_weighed: Value                # h as the recurrent weights see it: h, or h rounded
    c: Value | None                 # [B, H] (LSTM)
    w: list[Value]                  # per gate [H, I], transposed for x @ w: [I, H]
    r: list[Value]                  # per gate [H, H] -> [H, H]
    wb: list[Value | None]          # per gate [H]
    rb: list[Value | None]
    p: list[Value] | None           # LSTM peepholes i, o, f: [H]
    act: list[str]
    linear_before_reset: bool = False

    def linear(self, v: Value, weights: Value, bias: Value | None) -> Value:
        y = self.b.one("matmul", v, weights)
        return y if bias is None else self.b.one("add", y, bias)

    def gate(self, k: int) -> Value:
        return self.b.one("add", self.linear(self.x, self.w[k], self.wb[k]),
                          self.linear(self.h_weighed, self.r[k], self.rb[k]))

    def f(self, name: str, v: Value) -> Value:
        return self.b.one(name, v)


def _rnn(s: _Step) -> tuple[Value, Value | None]:
    return s.f(s.act[0], s.gate(0)), None


def _gru(s: _Step) -> tuple[Value, Value | None]:
    b = s.b
    z, r = s.f(s.act[0], s.gate(0)), s.f(s.act[0], s.gate(1))
    xh = s.linear(s.x, s.w[2], s.wb[2])
    if s.linear_before_reset:
        hh = b.one("mul", r, s.linear(s.h_weighed, s.r[2], s.rb[2]))
    else:
        hh = s.linear(b.one("mul", r, s.h), s.r[2], s.rb[2])
    cand = s.f(s.act[1], b.one("add", xh, hh))
    one = b.const(1, like=z)
    return b.one("add", b.one("mul", b.one("sub", one, z), cand), b.one("mul", z, s.h)), None


def _lstm(s: _Step) -> tuple[Value, Value | None]:
    b = s.b
    pre = [s.gate(k) for k in range(4)]                 # i o f c
    if s.p is not None:
        pre[0] = b.one("add", pre[0], b.one("mul", s.p[0], s.c))
        pre[2] = b.one("add", pre[2], b.one("mul", s.p[2], s.c))
    i, f = s.f(s.act[0], pre[0]), s.f(s.act[0], pre[2])
    c = b.one("add", b.one("mul", f, s.c), b.one("mul", i, s.f(s.act[1], pre[3])))
    if s.p is not None:
        pre[1] = b.one("add", pre[1], b.one("mul", s.p[1], c))
    o = s.f(s.act[0], pre[1])
    return b.one("mul", o, s.f(s.act[2], c)), c


_CELLS = {"RNN": _rnn, "GRU": _gru, "LSTM": _lstm}


def _row(b: Builder, v: Value, d: int) -> Value:
    """Direction ``d`` of a [D, ...] input, without its leading axis."""
    return b.one("squeeze", b.one("slice", v, axes=(0,), starts=(d,), ends=(d + 1,), steps=(1,)), axes=(0,))


def _pieces(b: Builder, v: Value, n: int, axis: int) -> list[Value]:
    size = v.type.shape[axis] // n
    return list(b.emit("split", [v], axis=axis, sizes=(size,) * n))


def _weights(b: Builder, gates: int, W: Value, R: Value, B: Value | None, P: Value | None,
             d: int) -> tuple[list[Value], list[Value], list[Value | None], list[Value] | None]:
    """Direction ``d``'s weights per gate, transposed for ``x @ w``, its biases and peepholes."""
    w = [b.one("transpose", g, perm=(1, 0)) for g in _pieces(b, _row(b, W, d), gates, 0)]
    r = [b.one("transpose", g, perm=(1, 0)) for g in _pieces(b, _row(b, R, d), gates, 0)]
    biases = _pieces(b, _row(b, B, d), 2 * gates, 0) if B is not None else [None] * (2 * gates)
    peep = _pieces(b, _row(b, P, d), 3, 0) if P is not None else None
    return w, r, biases, peep


@dataclass
class _Layer:
    """What every step of a layer shares: its kind, sizes, activations per direction."""
    op: str
    gates: int
    hidden: int
    act: list[list[str]]
    linear_before_reset: bool


def _looped(b: Builder, layer: _Layer, dirs: list[bool], X: Value, W: Value, R: Value, B: Value | None,
            lens: Value | None, h0: Value | None, c0: Value | None, P: Value | None, layout: int) -> list[Value]:
    """The layer over a symbolic sequence length: per direction one ``loop`` (minic/ir/ops/control.py)
    whose body is one step of the cell, built once; it runs at run time as many times as X has steps."""
    op, hidden, batch = layer.op, layer.hidden, X.type.shape[1]
    zero = b.one("expand", b.const(np.zeros((), X.type.dtype.numpy)), shape=(batch, hidden))
    length = b.one("reshape", b.one("cast", lens, dtype=DType.i64), shape=(batch, 1)) if lens is not None else None
    state = TensorType((batch, hidden), X.type.dtype)
    ys, hs, cs = [], [], []
    for d, backward in enumerate(dirs):
        h = _row(b, h0, d) if h0 is not None else zero
        c = (_row(b, c0, d) if c0 is not None else zero) if op == "LSTM" else None
        own = [("t", scalar(DType.i64)), ("h", state)] + ([("c", state)] if c is not None else []) + \
              [("x_t", TensorType(X.type.shape[1:], X.type.dtype))]
        body = Body.start(b, f"{op.lower()}_step", own)
        s = body.b
        t, h_in, x_t = body.own[0], body.own[1], body.own[-1]
        c_in = body.own[2] if c is not None else None
        w, r, biases, peep = _weights(s, layer.gates, *(body.capture(v) if v is not None else None
                                                        for v in (W, R, B, P)), d)
        step = _Step(s, x_t, h_in, h_in, c_in, w, r, biases[:layer.gates], biases[layer.gates:], peep,
                     layer.act[d], layer.linear_before_reset)
        h_new, c_new = _CELLS[op](step)
        y = h_new
        if length is not None:                  # past a sequence's end: state kept, output 0 (forward only)
            live = s.one("lt", t, body.capture(length))
            y = s.one("where", live, h_new, s.one("expand", s.const(np.zeros((), X.type.dtype.numpy)),
                                                   shape=(batch, hidden)))
            h_new = s.one("where", live, h_new, h_in)
            c_new = s.one("where", live, c_new, c_in) if c_new is not None else None
        carried = [h_new] + ([c_new] if c_new is not None else [])
        results = emit_loop(b, body, carried + [y], [h] + ([c] if c is not None else []) + [X],
                            carried=len(carried), scanned=1, reverse_in=(backward,), reverse_out=(backward,))
        hs.append(results[0])
        cs.append(results[1] if c is not None else None)
        ys.append(b.one("unsqueeze", results[-1], axes=(1,)))               # [T, 1, B, H]
    return _outputs(b, lambda: b.one("concat", *ys, axis=1), hs, cs, op, layout)     # Y: [T, D, B, H]


@converts("RNN", "GRU", "LSTM")
def _recurrent(b: Builder, x: list[Value], a: dict) -> list[Value]:
    return unroll(b, b.node.op_type, x, a)


def unroll(b: Builder, op: str, x: list[Value | None], a: dict,
           weigh_state: Callable[[Value], Value] | None = None) -> list[Value]:
    """The layer ``op`` (RNN, GRU, LSTM) of ONNX's inputs ``x`` and attributes ``a``, unrolled;
    ``weigh_state`` maps the state h to what R multiplies in ``h R^T`` (default: h itself)."""
    x = x + [None] * (8 - len(x))
    X, W, R, B, lens, h0, c0, P = x
    gates, hidden = _GATES[op], int(a["hidden_size"])
    if a.get("clip") is not None:
        raise UnsupportedError(f"{b.where}: the clip attribute is not supported")
    direction = a.get("direction", "forward")
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
    if dirs is None:
        raise OnnxImportError(f"{b.where}: unknown direction '{direction}'")
    names = list(a.get("activations", [])) or list(_DEFAULTS[op]) * len(dirs)
    if any(n not in _ACTIVATIONS for n in names):
        raise UnsupportedError(f"{b.where}: activations {names} (minic has {', '.join(_ACTIVATIONS)})")
    per_dir = len(_DEFAULTS[op])
    layout = int(a.get("layout", 0))
    if layout:
        X = b.one("transpose", X, perm=(1, 0, 2))
        h0 = b.one("transpose", h0, perm=(1, 0, 2)) if h0 is not None else None
        c0 = b.one("transpose", c0, perm=(1, 0, 2)) if c0 is not None else None
    steps, batch = X.type.shape[0], X.type.shape[1]
    layer = _Layer(op, gates, hidden, [[_ACTIVATIONS[n] for n in names[d * per_dir:(d + 1) * per_dir]]
                                       for d in range(len(dirs))], bool(a.get("linear_before_reset", 0)))
    if not isinstance(steps, int):
        if weigh_state is not None or (lens is not None and any(dirs)):
            raise UnsupportedError(f"{b.where}: minic unrolls {op} here and needs a static sequence length, "
                                   f"got {steps}")
        return _looped(b, layer, dirs, X, W, R, B, lens, h0, c0, P, layout)
    xs = [b.one("squeeze", p, axes=(0,)) for p in _pieces(b, X, steps, 0)] if steps else []
    zero = b.one("expand", b.const(np.zeros((), X.type.dtype.numpy)), shape=(batch, hidden))
    length = b.one("reshape", b.one("cast", lens, dtype=DType.i64), shape=(batch, 1)) if lens is not None else None
    ys, hs, cs = [], [], []
    for d, backward in enumerate(dirs):
        w, r, biases, peep = _weights(b, gates, W, R, B, P, d)
        h = _row(b, h0, d) if h0 is not None else zero
        c = (_row(b, c0, d) if c0 is not None else zero) if op == "LSTM" else None
        out: list[Value | None] = [None] * steps
        for t in (reversed(range(steps)) if backward else range(steps)):
            weighed = weigh_state(h) if weigh_state else h
            step = _Step(b, xs[t], h, weighed, c, w, r, biases[:gates], biases[gates:], peep,
                         layer.act[d], layer.linear_before_reset)
            h_new, c_new = _CELLS[op](step)
            if length is not None:              # past a sequence's end: state kept, output 0
                live = b.one("lt", b.const(np.asarray(t, np.int64)), length)
                out[t] = b.one("where", live, h_new, zero)
                h_new = b.one("where", live, h_new, h)
                c_new = b.one("where", live, c_new, c) if c_new is not None else None
            else:
                out[t] = h_new
            h, c = h_new, c_new
        ys.append(out)
        hs.append(h)
        cs.append(c)
    def y_of() -> Value:
        frames = [b.one("concat", *[b.one("unsqueeze", ys[d][t], axes=(0,)) for d in range(len(dirs))], axis=0)
                  for t in range(steps)]                                   # each [D, B, H]
        return b.one("concat", *[b.one("unsqueeze", f, axes=(0,)) for f in frames], axis=0)   # [T, D, B, H]
    return _outputs(b, y_of, hs, cs, op, layout)


def _outputs(b: Builder, y_of, hs: list, cs: list, op: str, layout: int) -> list[Value | None]:
    """Y ([T, D, B, H], built by ``y_of`` only when the node's first output is wanted), Y_h and
    (LSTM) Y_c from each direction's last states, in the node's layout."""
    results: list[Value | None] = []
    if b.node.output and b.node.output[0]:
        y = y_of()
        results.append(b.one("transpose", y, perm=(2, 0, 1, 3)) if layout else y)
    else:
        results.append(None)
    for states in (hs, cs)[:2 if op == "LSTM" else 1]:
        s = b.one("concat", *[b.one("unsqueeze", v, axes=(0,)) for v in states], axis=0)       # [D, B, H]
        results.append(b.one("transpose", s, perm=(1, 0, 2)) if layout else s)
    return results
