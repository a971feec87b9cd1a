"""Control flow at run time (minic/ir/ops/control.py): an ONNX Loop whose trip count is a graph
input, a while loop, a Scan over a symbolic length, and torch's LSTM and GRU exported over a
dynamic time axis each compile ONCE and serve every trip count and length, on minic (the body
compiled once, run per iteration between compiled parts: minic/runtime/split.py) and on the
interpreter, against ONNX Runtime."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto as T
from onnx import helper as h

import minic
from minic.errors import DataError, UserError
from minic.frontend.onnx import from_onnx_file
from minic.runtime.specialize import Specialized
from minic.runtime.split import SplitModel

BACKENDS = ["minic", "interp"]


def _save(tmp_path, name, nodes, inputs, outputs, initializers=()):
    model = h.make_model(h.make_graph(nodes, name, inputs, outputs, list(initializers)),
                         opset_imports=[h.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _ort(path, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _compile(path, examples, backend, tmp_path):
    options = {"cache_dir": tmp_path / "cache"} if backend == "minic" else {}
    return minic.compile(path, examples, backend=backend, **options)


def check_compiled_once(run, backend, compilations, before: int, op: str = "loop") -> None:
    """No compilation after minic.compile returned, and one model (cut at ``op``), not one per length."""
    assert not isinstance(run, Specialized)
    if backend == "minic":
        assert isinstance(run, SplitModel) and op in repr(run)
        assert compilations[0] == before > 0


def _loop_file(tmp_path):
    """acc = acc * w + i for i < m, every acc stacked: a Loop whose trip count m is a graph input."""
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Cast", ["i"], ["fi"], to=T.FLOAT),
                         h.make_node("Mul", ["acc_in", "w"], ["scaled"]),
                         h.make_node("Add", ["scaled", "fi"], ["acc_out"]),
                         h.make_node("Identity", ["acc_out"], ["seen"])], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                         h.make_tensor_value_info("acc_in", T.FLOAT, ["N", 3])],
                        [h.make_tensor_value_info("cond_out", T.BOOL, []),
                         h.make_tensor_value_info("acc_out", T.FLOAT, ["N", 3]),
                         h.make_tensor_value_info("seen", T.FLOAT, ["N", 3])])
    return _save(tmp_path, "loop", [h.make_node("Loop", ["m", "", "x"], ["y", "ys"], body=body)],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]), h.make_tensor_value_info("m", T.INT64, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 3]), h.make_tensor_value_info("ys", T.FLOAT, ["K", "N", 3])],
                 [h.make_tensor("w", T.FLOAT, [3], [0.5, -1.0, 2.0])])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_over_a_trip_count_given_at_run_time_compiles_once(backend, tmp_path, compilations):
    path = _loop_file(tmp_path)
    assert [n.op for n in from_onnx_file(path).nodes][-1] == "loop"      # not unrolled, not specialized
    rng = np.random.default_rng(0)
    run = _compile(path, [np.zeros((2, 3), np.float32), np.array(3)], backend, tmp_path)
    before = compilations[0]
    for m, n in [(3, 2), (1, 1), (7, 4)]:
        x = rng.standard_normal((n, 3)).astype(np.float32)
        got, want = run(x, np.array(m)), _ort(path, {"x": x, "m": np.array(m)})
        assert got[1].shape == (m, n, 3)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    y, ys = run(x, np.array(0))                         # no iteration: x itself, nothing stacked
    np.testing.assert_array_equal(y, x)
    assert ys.shape == (0, 4, 3)
    check_compiled_once(run, backend, compilations, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_that_runs_zero_times_returns_fresh_arrays(backend, tmp_path):
    """The carried values come back as they went in, but as copies: writing into the result
    must change neither the caller's input nor anything the model keeps."""
    run = _compile(_loop_file(tmp_path), [np.zeros((2, 3), np.float32), np.array(3)], backend, tmp_path)
    x = np.ones((2, 3), np.float32)
    y, _ = run(x, np.array(0))
    assert (y == x).all() and not np.shares_memory(y, x)


def test_a_loop_refuses_a_trip_count_beside_scanned_inputs():
    """Its stacked outputs are typed as long as the scanned inputs: a trip count that stopped
    it earlier would give a shorter array than its type says."""
    from minic.ir.graph import Graph, Value
    from minic.ir.ops.control import LoopAttrs
    from minic.ir.types import DType, TensorType
    body = Graph("b", [Value("i", TensorType((), DType.i64)), Value("s", TensorType((3,), DType.f32))],
                 [], [], [])
    body.outputs = [body.inputs[1]]
    with pytest.raises(UserError, match="a trip count or condition with them is not supported"):
        LoopAttrs(body, carried=0, scanned=1, trip=True).check()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_trip_count_is_a_data_error_naming_the_node(backend, tmp_path):
    run = _compile(_loop_file(tmp_path), [np.zeros((2, 3), np.float32), np.array(3)], backend, tmp_path)
    with pytest.raises(DataError, match=r"node #\d+ \(.*= loop.*the trip count is negative \(-2\)"):
        run(np.zeros((2, 3), np.float32), np.array(-2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_while_loop_whose_condition_the_body_computes(backend, tmp_path, compilations):
    """Doubles x while its sum stays under a limit given at run time; trip count 10**6."""
    body = h.make_graph([h.make_node("Mul", ["acc_in", "two"], ["acc_out"]),
                         h.make_node("ReduceSum", ["acc_out"], ["total"], keepdims=0),
                         h.make_node("Less", ["total", "limit"], ["cond_out"]),
                         h.make_node("Identity", ["total"], ["trace"])], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                         h.make_tensor_value_info("acc_in", T.FLOAT, [3])],
                        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, [3]),
                         h.make_tensor_value_info("trace", T.FLOAT, [])],
                        [h.make_tensor("two", T.FLOAT, [], [2.0])])
    path = _save(tmp_path, "while", [h.make_node("Loop", ["M", "", "x"], ["y", "traces"], body=body)],
                 [h.make_tensor_value_info("x", T.FLOAT, [3]), h.make_tensor_value_info("limit", T.FLOAT, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, [3]), h.make_tensor_value_info("traces", T.FLOAT, ["K"])],
                 [h.make_tensor("M", T.INT64, [], [10 ** 6])])
    x = np.array([1.0, 2.0, 0.5], np.float32)
    run = _compile(path, [x, np.array(10.0, np.float32)], backend, tmp_path)
    before = compilations[0]
    for limit, iterations in [(10.0, 2), (1000.0, 9), (1.0, 1)]:
        got, want = run(x, np.array(limit, np.float32)), _ort(path, {"x": x, "limit": np.array(limit, np.float32)})
        assert got[1].shape == (iterations,)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    check_compiled_once(run, backend, compilations, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scan_over_a_symbolic_length_compiles_once(backend, tmp_path, compilations):
    """s += x_t * w + u_t, y_t = tanh(s): x scanned forward along axis 0, u backward along axis 1,
    y stacked backward along axis 1."""
    body = h.make_graph([h.make_node("Mul", ["x_t", "w"], ["xw"]), h.make_node("Add", ["s_in", "xw"], ["s_mid"]),
                         h.make_node("Add", ["s_mid", "u_t"], ["s_out"]), h.make_node("Tanh", ["s_out"], ["y_t"])],
                        "body", [h.make_tensor_value_info(n, T.FLOAT, [4]) for n in ("s_in", "x_t", "u_t")],
                        [h.make_tensor_value_info(n, T.FLOAT, [4]) for n in ("s_out", "y_t")])
    scan = h.make_node("Scan", ["s0", "x", "u"], ["sN", "ys"], body=body, num_scan_inputs=2,
                       scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[1],
                       scan_output_directions=[1])
    path = _save(tmp_path, "scan", [scan],
                 [h.make_tensor_value_info("s0", T.FLOAT, [4]), h.make_tensor_value_info("x", T.FLOAT, ["L", 4]),
                  h.make_tensor_value_info("u", T.FLOAT, [4, "L"])],
                 [h.make_tensor_value_info("sN", T.FLOAT, [4]), h.make_tensor_value_info("ys", T.FLOAT, [4, "L"])],
                 [h.make_tensor("w", T.FLOAT, [4], [0.5, -1.0, 2.0, 0.1])])
    rng = np.random.default_rng(1)
    run = _compile(path, [np.zeros(4, np.float32), np.zeros((3, 4), np.float32), np.zeros((4, 3), np.float32)],
                   backend, tmp_path)
    before = compilations[0]
    for length in (3, 1, 8):
        feeds = {"s0": rng.standard_normal(4).astype(np.float32),
                 "x": rng.standard_normal((length, 4)).astype(np.float32),
                 "u": rng.standard_normal((4, length)).astype(np.float32)}
        for g, w in zip(run(*feeds.values()), _ort(path, feeds)):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    check_compiled_once(run, backend, compilations, before)


class Recurrent(torch.nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(6, 8, num_layers=2, bidirectional=True, batch_first=True)
        self.fc = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc(self.rnn(x)[0])


def _export(kind: str, path, dynamo: bool) -> None:
    torch.manual_seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            dims = {0: torch.export.Dim("B", min=1, max=64), 1: torch.export.Dim("T", min=1, max=64)}
            torch.onnx.export(Recurrent(kind).eval(), (torch.randn(2, 5, 6),), str(path), dynamo=True,
                              dynamic_shapes=(dims,), verbose=False)
        else:
            torch.onnx.export(Recurrent(kind).eval(), (torch.randn(2, 5, 6),), str(path), input_names=["x"],
                              dynamic_axes={"x": {0: "B", 1: "T"}}, dynamo=False)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each file exported once per process (a second dynamo export of the model in one process
    came out with T static)."""
    folder, made = tmp_path_factory.mktemp("recurrent"), {}

    def export(kind: str, dynamo: bool):
        if (kind, dynamo) not in made:
            made[kind, dynamo] = folder / f"{kind.lower()}{'_dynamo' if dynamo else ''}.onnx"
            _export(kind, made[kind, dynamo], dynamo)
        return made[kind, dynamo]
    return export


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind,dynamo", [("LSTM", False), ("GRU", False), ("LSTM", True)])
def test_torch_recurrent_layers_over_a_dynamic_time_axis_compile_once(kind, dynamo, backend, exported, tmp_path,
                                                                      compilations):
    """A 2-layer bidirectional LSTM (GRU) over (B, T): one loop per layer and direction, each
    body one step of the cell; before, each length was a compilation of its own, unrolled."""
    path = exported(kind, dynamo)
    assert sum(n.op == "loop" for n in from_onnx_file(path).nodes) == 4
    rng = np.random.default_rng(2)
    run = _compile(path, [np.zeros((2, 5, 6), np.float32)], backend, tmp_path)
    before = compilations[0]
    name = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).get_inputs()[0].name
    for shape in [(2, 5, 6), (1, 9, 6), (3, 2, 6)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(x), _ort(path, {name: x})[0], rtol=1e-5, atol=1e-5)
    check_compiled_once(run, backend, compilations, before)


def test_static_trip_counts_and_lengths_still_unroll(tmp_path):
    """The same Loop with its trip count a constant, and an LSTM at a static length: no loop op."""
    loop = onnx.load(str(_loop_file(tmp_path)))
    loop.graph.initializer.append(h.make_tensor("m", T.INT64, [], [4]))
    del loop.graph.input[1]
    onnx.save(loop, str(tmp_path / "static_loop.onnx"))
    path = tmp_path / "lstm.onnx"
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(torch.nn.LSTM(4, 5).eval(), (torch.randn(3, 2, 4),), str(path), dynamo=False)
    for file in (tmp_path / "static_loop.onnx", path):
        assert "loop" not in {n.op for n in from_onnx_file(file).nodes}


class TorchRecurrent(torch.nn.Module):
    """A recurrent layer of torch.nn over (B, T, 6), its output and last states returned."""

    def __init__(self, make):
        super().__init__()
        torch.manual_seed(5)
        self.rnn = make()

    def forward(self, x):
        out, state = self.rnn(x)
        return (out, *state) if isinstance(state, tuple) else (out, state)


TORCH_LAYERS = {
    "lstm_2_layers_bidirectional": lambda: torch.nn.LSTM(6, 8, num_layers=2, bidirectional=True, batch_first=True),
    "lstm_projected_no_bias": lambda: torch.nn.LSTM(6, 8, proj_size=3, bias=False, batch_first=True),
    "gru_bidirectional": lambda: torch.nn.GRU(6, 8, bidirectional=True, batch_first=True),
    "rnn_relu_2_layers": lambda: torch.nn.RNN(6, 8, num_layers=2, nonlinearity="relu", batch_first=True),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layer", sorted(TORCH_LAYERS))
def test_torch_recurrent_modules_over_a_dynamic_time_axis_compile_once(layer, backend, tmp_path, compilations):
    """nn.LSTM / GRU / RNN from PyTorch itself (no ONNX file) with T dynamic: one loop per layer and
    direction, compiled once, right at three lengths.  torch.export alone specializes T (its
    decomposition of aten.lstm loops over the steps in Python): minic keeps the layer whole."""
    model = TorchRecurrent(TORCH_LAYERS[layer]).eval()
    options = {"cache_dir": tmp_path / "cache"} if backend == "minic" else {}
    run = minic.compile(model, [torch.zeros(2, 5, 6)], backend=backend, dynamic={"x": {1: "T"}}, **options)
    before = compilations[0]
    rng = np.random.default_rng(4)
    for steps in (5, 2, 11):
        x = rng.standard_normal((2, steps, 6)).astype(np.float32)
        with torch.no_grad():
            want = [t.numpy() for t in model(torch.from_numpy(x))]
        got = run(x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    check_compiled_once(run, backend, compilations, before)


def test_a_static_torch_lstm_is_unrolled_by_the_same_driver():
    """At a static length the custom op converts to the unrolled steps: no loop, eager's answer."""
    from minic.frontend.torch import from_torch
    from minic.ir.interpret import interpret
    model = TorchRecurrent(TORCH_LAYERS["lstm_2_layers_bidirectional"]).eval()
    x = torch.randn(2, 4, 6, generator=torch.Generator().manual_seed(1))
    graph = from_torch(model, (x,))
    assert "loop" not in {n.op for n in graph.nodes}
    with torch.no_grad():
        want = [t.numpy() for t in model(x)]
    for g, w in zip(interpret(graph, [x.numpy()]), want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bidirectional_lstm_with_sequence_lens_over_a_symbolic_length(backend, tmp_path, compilations):
    """ONNX's LSTM, both directions, each batch entry as long as ``sequence_lens`` says: the
    backward loop starts at each entry's own last step (its iteration k is time T-1-k, which the
    mask compares with the length).  It used to be specialized per length."""
    rng = np.random.default_rng(6)
    hidden, size = 5, 3
    inits = [h.make_tensor(n, T.FLOAT, v.shape, v.ravel()) for n, v in [
        ("W", rng.standard_normal((2, 4 * hidden, size)).astype(np.float32) * 0.5),
        ("R", rng.standard_normal((2, 4 * hidden, hidden)).astype(np.float32) * 0.5),
        ("B", rng.standard_normal((2, 8 * hidden)).astype(np.float32) * 0.5)]]
    node = h.make_node("LSTM", ["x", "W", "R", "B", "lens"], ["y", "y_h", "y_c"], hidden_size=hidden,
                       direction="bidirectional")
    path = _save(tmp_path, "lstm_lens", [node],
                 [h.make_tensor_value_info("x", T.FLOAT, ["T", 2, size]), h.make_tensor_value_info("lens", T.INT32, [2])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["T", 2, 2, hidden])] +
                 [h.make_tensor_value_info(n, T.FLOAT, [2, 2, hidden]) for n in ("y_h", "y_c")], inits)
    run = _compile(path, [np.zeros((4, 2, size), np.float32), np.array([4, 2], np.int32)], backend, tmp_path)
    before = compilations[0]
    for steps, lens in [(4, [4, 2]), (7, [3, 7]), (2, [1, 2])]:
        feeds = {"x": rng.standard_normal((steps, 2, size)).astype(np.float32), "lens": np.array(lens, np.int32)}
        for got, want in zip(run(*feeds.values()), _ort(path, feeds)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    check_compiled_once(run, backend, compilations, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_dynamically_quantized_lstm_over_a_dynamic_length(backend, tmp_path, compilations):
    """quantize_dynamic's com.microsoft DynamicQuantizeLSTM over (B, T): the state rounded to u8 at
    each step inside the loop's body; compiled once, against one-threaded ONNX Runtime."""
    from onnxruntime.quantization import quantize_dynamic
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.LSTM(6, 12, batch_first=True)).eval()

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm, self.fc = model[0], torch.nn.Linear(12, 4)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Tagger().eval(), (torch.randn(2, 5, 6),), str(tmp_path / "f32.onnx"), input_names=["x"],
                          dynamic_axes={"x": {0: "B", 1: "T"}}, dynamo=False, opset_version=17)
    path = tmp_path / "q.onnx"
    quantize_dynamic(str(tmp_path / "f32.onnx"), str(path))
    assert "DynamicQuantizeLSTM" in {n.op_type for n in onnx.load(str(path)).graph.node}
    run = _compile(path, [np.zeros((2, 5, 6), np.float32)], backend, tmp_path)
    before = compilations[0]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    for shape in [(2, 5, 6), (1, 9, 6), (3, 2, 6)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(x), session.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)
    check_compiled_once(run, backend, compilations, before)
