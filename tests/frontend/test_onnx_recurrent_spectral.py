"""RNN/GRU/LSTM (unrolled at import) and DFT/STFT (constant linear maps) against ONNX's reference,
with the attributes the node suite leaves out: sequence lengths with both directions and the
batch-first layout, GRU's linear_before_reset, DFT lengths that pad and cut, odd irfft lengths."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend


def _model(op: str, names: list[str], given: dict, n_out: int, opset: int = 22, **attrs):
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_out)], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                                         v.shape) for k, v in given.items()],
                              [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(n_out)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _check(op: str, inputs: dict, n_out: int, backend: str = "interp", opset: int = 22, rtol=1e-5, atol=1e-6,
           **attrs):
    names = [k if v is not None else "" for k, v in inputs.items()]
    given = {k: v for k, v in inputs.items() if v is not None}
    model = _model(op, names, given, n_out, opset, **attrs)
    want = ReferenceEvaluator(model).run(None, given)
    got = MinicBackend.prepare(model, backend=backend).run(list(given.values()))
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _weights(rng, d, gates, hidden, inputs):
    f = lambda *s: rng.standard_normal(s).astype(np.float32) * 0.5
    return f(d, gates * hidden, inputs), f(d, gates * hidden, hidden), f(d, 2 * gates * hidden)


@pytest.mark.parametrize("layout", [0, 1])
def test_lstm_bidirectional_with_peepholes_and_initial_state(layout):
    rng = np.random.default_rng(0)
    t, batch, i, h = 4, 3, 2, 3
    w, r, bias = _weights(rng, 2, 4, h, i)
    x = rng.standard_normal((batch, t, i) if layout else (t, batch, i)).astype(np.float32)
    state = lambda: rng.standard_normal((batch, 2, h) if layout else (2, batch, h)).astype(np.float32)
    _check("LSTM", {"x": x, "w": w, "r": r, "b": bias, "lens": None, "h0": state(), "c0": state(),
                    "p": rng.standard_normal((2, 3 * h)).astype(np.float32)}, 3,
           hidden_size=h, direction="bidirectional", layout=layout)


def test_sequence_lengths_end_each_batch_entry_early():
    # ONNX's reference ignores sequence_lens; the spec: entry b runs its first lens[b] steps (a reverse
    # direction starts at its own last one), its later outputs are 0, and Y_h is its state after them.
    rng = np.random.default_rng(9)
    t, batch, i, h = 4, 3, 2, 3
    w, r, bias = _weights(rng, 2, 1, h, i)
    x = rng.standard_normal((t, batch, i)).astype(np.float32)
    lens = np.array([4, 1, 3], np.int32)
    attrs = dict(hidden_size=h, direction="bidirectional")
    y, y_h = MinicBackend.prepare(_model("RNN", ["x", "w", "r", "b", "lens"], dict(x=x, w=w, r=r, b=bias, lens=lens),
                                         2, **attrs), backend="interp").run([x, w, r, bias, lens])
    for k, n in enumerate(lens):
        alone = dict(x=x[:n, k:k + 1], w=w, r=r, b=bias)
        want_y, want_h = ReferenceEvaluator(_model("RNN", list(alone), alone, 2, **attrs)).run(None, alone)
        np.testing.assert_allclose(y[:n, :, k:k + 1], want_y, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(y[n:, :, k], 0)
        np.testing.assert_allclose(y_h[:, k:k + 1], want_h, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("before_reset", [0, 1])
def test_gru_reverse(before_reset):
    rng = np.random.default_rng(1)
    w, r, bias = _weights(rng, 1, 3, 4, 3)
    _check("GRU", {"x": rng.standard_normal((5, 2, 3)).astype(np.float32), "w": w, "r": r, "b": bias}, 2,
           hidden_size=4, direction="reverse", linear_before_reset=before_reset)


def test_rnn_compiled():
    rng = np.random.default_rng(2)
    w, r, bias = _weights(rng, 1, 1, 4, 3)
    _check("RNN", {"x": rng.standard_normal((3, 2, 3)).astype(np.float32), "w": w, "r": r, "b": bias}, 2,
           backend="minic", hidden_size=4)


@pytest.mark.parametrize("length, inverse, onesided, parts", [
    (12, 0, 0, 2), (6, 0, 1, 1), (7, 1, 0, 2), (9, 1, 1, 2), (10, 1, 1, 2)])
def test_dft_lengths_that_pad_and_cut(length, inverse, onesided, parts):
    x = np.random.default_rng(3).standard_normal((2, 8, 3, parts)).astype(np.float32)
    _check("DFT", {"x": x, "n": np.array(length, np.int64), "axis": np.array(1, np.int64)}, 1, opset=20,
           inverse=inverse, onesided=onesided, rtol=1e-4, atol=1e-5)


def test_stft_two_sided_with_a_window_compiled():
    rng = np.random.default_rng(4)
    _check("STFT", {"signal": rng.standard_normal((2, 40, 1)).astype(np.float32), "step": np.array(6, np.int64),
                    "window": np.hanning(10).astype(np.float32)}, 1, backend="minic", opset=17, onesided=0,
           rtol=1e-4, atol=1e-5)
