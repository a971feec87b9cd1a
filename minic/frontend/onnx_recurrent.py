"""ONNX's recurrent layers (RNN, GRU, LSTM), through the shared driver (compose_recurrent.py:
unrolled over a static sequence length, a ``loop`` at run time over a symbolic one).

What is ONNX's here: the attributes (direction, activations, layout, linear_before_reset),
the weights of all directions in one tensor each (W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H],
peepholes P [D, 3*H]) already in the driver's gate order, and the outputs ``Y`` [T, D, B, H]
(``layout`` 1: [B, T, D, H]), ``Y_h`` and ``Y_c`` [D, B, H] (``layout`` 1: [B, D, H]).
``unroll`` is the entry for ops written as one of these with something changed (ONNX
Runtime's DynamicQuantizeLSTM rounds the state to 8 bits).
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose_recurrent as rec
from minic.frontend.onnx_builder import Builder, OnnxImportError, converter_table
from minic.ir.graph import Value
from minic.ir.types import DType

CONVERTERS = converter_table()

_ACTIVATIONS = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}
_DEFAULTS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}


def _layer(op: str):
    """The converter of ONNX's ``op`` (RNN, GRU or LSTM)."""
    def convert(b: Builder, x: list[Value], a: dict) -> list[Value | None]:
        return unroll(b, op, x, a)
    return convert


for _op in rec.GATES:
    CONVERTERS.put(_op, _layer(_op))


def _weights_of(W: Value, R: Value, B: Value | None, P: Value | None, gates: int, d: int) -> rec.WeightsOf:
    def weights(s, capture) -> rec.Weights:
        w = rec.transposed(s, rec.gates(s, rec.row(s, capture(W), d), gates))
        r = rec.transposed(s, rec.gates(s, rec.row(s, capture(R), d), gates))
        biases = rec.gates(s, rec.row(s, capture(B), d), 2 * gates) if B is not None else [None] * (2 * gates)
        peep = rec.gates(s, rec.row(s, capture(P), d), 3) if P is not None else None
        return rec.Weights(w, r, biases[:gates], biases[gates:], peep)
    return weights


def unroll(b: Builder, op: str, x: list[Value | None], a: dict,
           weigh_state: rec.WeighState | None = None) -> list[Value | None]:
    """The layer ``op`` (RNN, GRU, LSTM) of ONNX's inputs ``x`` and attributes ``a``;
    ``weigh_state(builder, h)`` is what R multiplies in ``h R^T`` (default: h itself)."""
    x = x + [None] * (8 - len(x))
    X, W, R, B, lens, h0, c0, P = x
    gates, hidden = rec.GATES[op], int(a["hidden_size"])
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
        X, h0, c0 = (b.one("transpose", v, perm=(1, 0, 2)) if v is not None else None for v in (X, h0, c0))
    spec = rec.Layer(op, tuple(tuple(_ACTIVATIONS[n] for n in names[d * per_dir:(d + 1) * per_dir])
                               for d in range(len(dirs))), bool(a.get("linear_before_reset", 0)))
    zero = b.one("expand", b.const(np.zeros((), X.type.dtype.numpy)), shape=(X.type.shape[1], hidden))
    directions = [rec.Direction(_weights_of(W, R, B, P, gates, d),
                                rec.row(b, h0, d) if h0 is not None else zero,
                                (rec.row(b, c0, d) if c0 is not None else zero) if op == "LSTM" else None, backward)
                  for d, backward in enumerate(dirs)]
    lengths = b.one("reshape", b.one("cast", lens, dtype=DType.i64), shape=(X.type.shape[1], 1)) \
        if lens is not None else None
    result = rec.layer(b, spec, X, directions, lengths, weigh_state)
    outputs: list[Value | None] = []
    if b.node.output and b.node.output[0]:
        y = b.one("concat", *[b.one("unsqueeze", y, axes=(1,)) for y in result.ys], axis=1)    # [T, D, B, H]
        outputs.append(b.one("transpose", y, perm=(2, 0, 1, 3)) if layout else y)
    else:
        outputs.append(None)
    for states in (result.hs, result.cs)[:2 if op == "LSTM" else 1]:
        s = b.one("concat", *[b.one("unsqueeze", v, axes=(0,)) for v in states], axis=0)       # [D, B, H]
        outputs.append(b.one("transpose", s, perm=(1, 0, 2)) if layout else s)
    return outputs
