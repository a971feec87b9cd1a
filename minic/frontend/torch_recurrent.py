"""PyTorch's nn.RNN, nn.GRU and nn.LSTM, kept whole through ``torch.export`` and converted by
the recurrent driver both importers share (compose_recurrent.py).

Why they are not exported as ATen: ``nn.LSTM.forward`` calls ``torch._VF.lstm``, which
torch.export keeps as one ``aten.lstm`` node, but only after tracing its decomposition,
which loops over the time steps in Python: a dynamic time axis is specialized to the
example's length ("You marked T as dynamic but your code specialized it").  So while
minic exports (``keep_recurrent``), a ``TorchFunctionMode`` sends each call of
``torch._VF.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` to a custom op of minic's
(``minic::lstm``, ...) that runs the same ``_VF`` function eagerly and whose fake
implementation only states the output shapes [T, B, D*H] — no loop to trace, so T stays
a symbol.  The converter then builds the layers: unrolled over a static T, a ``loop`` at
run time over a symbolic one.

PyTorch's weights, per layer and direction, are ``w_ih`` [G*H, I], ``w_hh`` [G*H, H],
``b_ih``, ``b_hh`` [G*H] and (LSTM with ``proj_size``) ``w_hr`` [P, H]; its gate orders
(LSTM i f g o, GRU r z n) are put in ONNX's (i o f g, z r n); its GRU is ONNX's
``linear_before_reset``.  Packed sequences and training-mode dropout are left to torch's
own decomposition.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode

from minic.errors import UnsupportedError
from minic.frontend import compose_recurrent as rec
from minic.frontend.torch_ops import handler_table

HANDLERS = handler_table()
handles = HANDLERS.add

# torch's name -> (minic's cell, its activations, torch's gate order in ONNX's order)
_KINDS = {"lstm": ("LSTM", ("sigmoid", "tanh", "tanh"), (0, 3, 1, 2)),
          "gru": ("GRU", ("sigmoid", "tanh"), (1, 0, 2)),
          "rnn_tanh": ("RNN", ("tanh",), (0,)),
          "rnn_relu": ("RNN", ("relu",), (0,))}


def _stacked_shape(input: Tensor, hx: Tensor, bidirectional: bool, batch_first: bool) -> tuple:
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    width = (2 if bidirectional else 1) * hx.shape[2]
    return (batch, steps, width) if batch_first else (steps, batch, width)


@torch.library.custom_op("minic::lstm", mutates_args=())
def lstm(input: Tensor, hx: list[Tensor], params: list[Tensor], has_biases: bool, num_layers: int,
         bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
    out, h, c = torch._VF.lstm(input, hx, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
    return out, h, c


@lstm.register_fake
def _lstm_shapes(input, hx, params, has_biases, num_layers, bidirectional, batch_first):
    return (input.new_empty(_stacked_shape(input, hx[0], bidirectional, batch_first)),
            hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape))


def _single_state(kind: str):
    """``minic::gru`` and ``minic::rnn_tanh``/``rnn_relu``: one state tensor in, two outputs."""
    vf = getattr(torch._VF, kind)

    @torch.library.custom_op(f"minic::{kind}", mutates_args=())
    def op(input: Tensor, hx: Tensor, params: list[Tensor], has_biases: bool, num_layers: int,
           bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor]:
        out, h = vf(input, hx, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)
        return out, h

    @op.register_fake
    def _(input, hx, params, has_biases, num_layers, bidirectional, batch_first):
        return input.new_empty(_stacked_shape(input, hx, bidirectional, batch_first)), hx.new_empty(hx.shape)
    return op


_OPS = {"lstm": lstm, **{kind: _single_state(kind) for kind in ("gru", "rnn_tanh", "rnn_relu")}}
_VF_OF = {getattr(torch._VF, kind): kind for kind in _OPS}


class _KeepRecurrent(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kind = _VF_OF.get(func)
        # (input, hx, params: a list, has_biases, num_layers, dropout, train, bidirectional, batch_first);
        # the packed-sequence overload has batch_sizes second and is left alone.
        if kind is not None and not kwargs and len(args) == 9 and isinstance(args[2], (list, tuple)) \
                and not args[6]:
            input, hx, params, has_biases, layers, _, _, bidirectional, batch_first = args
            hx = list(hx) if kind == "lstm" else hx
            return _OPS[kind](input, hx, list(params), has_biases, layers, bidirectional, batch_first)
        return func(*args, **(kwargs or {}))


@contextmanager
def keep_recurrent() -> Iterator[None]:
    """While torch.export traces: recurrent layers as minic's custom ops."""
    with _KeepRecurrent():
        yield


@handles(*(getattr(torch.ops.minic, kind).default for kind in _OPS))
def _recurrent(cx, node, a):
    kind = node.target.name().split("::")[1]
    cell, activations, order = _KINDS[kind]
    layers, directions = int(a["num_layers"]), 2 if a["bidirectional"] else 1
    params = [cx.value(p) for p in a["params"]]
    per = len(params) // (layers * directions)
    has_biases = bool(a["has_biases"])
    projected = per == 2 + 2 * has_biases + 1
    if per * layers * directions != len(params) or per not in (2 + 2 * has_biases, 2 + 2 * has_biases + 1):
        raise UnsupportedError(f"{cx.where}: {len(params)} weights for {layers} layers x {directions} directions")
    states = [cx.value(h) for h in a["hx"]] if kind == "lstm" else [cx.value(a["hx"])]
    X = cx.value(a["input"])
    if a["batch_first"]:
        X = cx.one("transpose", X, perm=(1, 0, 2))
    spec = rec.Layer(cell, (activations,) * directions, linear_before_reset=True)
    hs, cs = [], []
    for layer in range(layers):
        runs = []
        for d in range(directions):
            k = layer * directions + d
            runs.append(rec.Direction(_weights_of(params[k * per:(k + 1) * per], order, has_biases, projected),
                                      rec.row(cx, states[0], k),
                                      rec.row(cx, states[1], k) if kind == "lstm" else None, backward=d == 1))
        result = rec.layer(cx, spec, X, runs)
        X = result.ys[0] if directions == 1 else cx.one("concat", *result.ys, axis=2)       # [T, B, D*H]
        hs += result.hs
        cs += result.cs
    out = cx.one("transpose", X, perm=(1, 0, 2)) if a["batch_first"] else X
    stack = lambda vs: cx.one("concat", *[cx.one("unsqueeze", v, axes=(0,)) for v in vs], axis=0)  # noqa: E731
    return (out, stack(hs), stack(cs)) if kind == "lstm" else (out, stack(hs))


def _weights_of(params: list, order: tuple[int, ...], has_biases: bool, projected: bool) -> rec.WeightsOf:
    """One direction's weights from torch's (w_ih, w_hh[, b_ih, b_hh][, w_hr])."""
    def weights(s, capture) -> rec.Weights:
        w_ih, w_hh, *rest = (capture(p) for p in params)
        n = len(order)
        wb = rec.gates(s, rest[0], n, order) if has_biases else [None] * n
        rb = rec.gates(s, rest[1], n, order) if has_biases else [None] * n
        projection = s.one("transpose", rest[-1], perm=(1, 0)) if projected else None
        return rec.Weights(rec.transposed(s, rec.gates(s, w_ih, n, order)),
                           rec.transposed(s, rec.gates(s, w_hh, n, order)), wb, rb, projection=projection)
    return weights
