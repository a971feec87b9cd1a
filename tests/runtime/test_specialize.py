"""Shapes known at run time: a model whose ops need static sizes of symbolic dims is
specialized per run-time shape (minic/runtime/specialize.py) and matches ONNX Runtime
at every size; a model that compiles with its symbols stays one compiled model."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import minic
from minic.errors import UserError
from minic.runtime.compiled import CompiledModel
from minic.runtime.specialize import CAPACITY, Specialized, bind_graph

ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

BACKENDS = ("minic", "interp")


def _ort(path, feeds):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def _model(tmp_path, name, nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    return path


class SmallCNN(torch.nn.Module):
    def __init__(self, ceil_mode: bool = False):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 4, 3, stride=2)
        self.ceil_mode = ceil_mode

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2, ceil_mode=self.ceil_mode)
        return self.c2(y).mean(dim=(2, 3))


def _export_cnn(path, ceil_mode: bool):
    torch.manual_seed(0)
    torch.onnx.export(SmallCNN(ceil_mode).eval(), (torch.randn(2, 3, 40, 48),), str(path), input_names=["x"],
                      output_names=["y"], dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}}, dynamo=False)
    return path


@pytest.fixture(scope="module")
def cnn_dyn(tmp_path_factory):
    """Convolutions and a pool over N, H, W: their output sizes are derived dims ((H + 1)/2)."""
    return _export_cnn(tmp_path_factory.mktemp("cnn") / "cnn_dyn.onnx", ceil_mode=False)


@pytest.fixture(scope="module")
def cnn_ceil(tmp_path_factory):
    """The same with a ceil_mode pool, whose last window depends on H: specialized per H and W."""
    return _export_cnn(tmp_path_factory.mktemp("cnn") / "cnn_ceil.onnx", ceil_mode=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_cnn_with_dynamic_n_h_w_compiles_once_and_matches_onnxruntime_at_three_sizes(cnn_dyn, backend, tmp_path):
    rng = np.random.default_rng(0)
    example = rng.standard_normal((2, 3, 40, 48)).astype(np.float32)
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(cnn_dyn, [example], backend=backend, **options)
    assert not isinstance(run, Specialized)             # one compilation: H and W stay symbols
    if backend == "minic":
        assert isinstance(run, CompiledModel) and set(run.layout.sizes) == {"N", "H", "W"}
    for shape in [(2, 3, 40, 48), (1, 3, 32, 32), (3, 3, 57, 41), (1, 3, 6, 6)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(x), _ort(cnn_dyn, {"x": x})[0], rtol=1e-4, atol=1e-5)
    with pytest.raises(UserError, match=r"size \(\(H \+ 2\)/4 - 1\) is 0 at .*H': 5.*too small"):
        run(np.zeros((1, 3, 5, 9), np.float32))          # the second convolution has no row left


def test_a_derived_size_reads_as_its_formula(cnn_dyn):
    from minic.frontend.onnx import from_onnx_file
    from minic.ir.text import parse_graph, print_graph
    text = print_graph(from_onnx_file(cnn_dyn), inline_limit=0)
    assert "= max_pool2d(%Relu_output_0) {" in text and ": f32[N, 8, (H/2), (W/2)]\n" in text
    assert ": f32[N, 4, ((H + 2)/4 - 1), ((W + 2)/4 - 1)]\n" in text     # a window over a window: one floor
    assert print_graph(parse_graph(text), inline_limit=0) == text


@pytest.mark.parametrize("backend", BACKENDS)
def test_cnn_with_a_ceil_mode_pool_is_specialized_per_h_and_w(cnn_ceil, backend, tmp_path):
    rng = np.random.default_rng(0)
    example = rng.standard_normal((2, 3, 40, 48)).astype(np.float32)
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(cnn_ceil, [example], backend=backend, **options)
    assert isinstance(run, Specialized) and run.compilations == 1
    for shape in [(2, 3, 40, 48), (1, 3, 32, 32), (3, 3, 57, 41)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(x), _ort(cnn_ceil, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert run.compilations == 3
    assert run.keep == {"N"}                             # the batch stays symbolic: convolutions take it
    run(example)                                         # seen before: no new compilation
    run(rng.standard_normal((5, 3, 32, 32)).astype(np.float32))          # a new N at a known H, W: none either
    assert run.compilations == 3


def test_specializations_are_kept_in_the_compile_cache_on_disk(cnn_ceil, tmp_path, monkeypatch):
    from minic import pipeline
    rng = np.random.default_rng(4)
    shapes = [(1, 3, 20, 24), (2, 3, 33, 17)]
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    first = minic.compile(cnn_ceil, [xs[0]], cache_dir=tmp_path)
    want = [first(x) for x in xs]

    def no_compilation(*args, **kwargs):
        raise AssertionError("compiled again: the compile cache was not used")
    monkeypatch.setattr(pipeline, "Compilation", no_compilation)
    again = minic.compile(cnn_ceil, [xs[0]], cache_dir=tmp_path)         # as a new process would
    for x, w in zip(xs, want):
        np.testing.assert_array_equal(again(x), w)


class Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)
        self.fc = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_lstm_over_a_dynamic_time_axis_at_three_lengths(backend, tmp_path):
    """Refused at first ("minic unrolls LSTM and needs a static sequence length"), then each
    length was a specialization (unrolled to that length); now the LSTM is a loop at run
    time (minic/ir/ops/control.py): one model serves every length."""
    torch.manual_seed(5)
    path = tmp_path / "lstm.onnx"
    torch.onnx.export(Recurrent().eval(), (torch.randn(2, 5, 8),), str(path), input_names=["x"],
                      dynamic_axes={"x": {0: "B", 1: "T"}}, dynamo=False)
    rng = np.random.default_rng(5)
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(path, [rng.standard_normal((2, 5, 8)).astype(np.float32)], backend=backend, **options)
    for shape in [(2, 5, 8), (1, 9, 8), (3, 3, 8)]:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(x), _ort(path, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert not isinstance(run, Specialized)


def test_the_command_line_runs_a_dynamic_file_at_the_sizes_of_the_inputs_given(cnn_ceil, tmp_path, capsys,
                                                                                monkeypatch):
    from tests.cli_helpers import cli
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    np.savez(tmp_path / "x.npz", x=np.random.default_rng(6).standard_normal((1, 3, 32, 32)).astype(np.float32))
    code, out, err = cli(capsys, "run", str(cnn_ceil), "--inputs", str(tmp_path / "x.npz"), "--repeat", "1")
    assert code == 0, err
    assert "float32[1, 4]" in out and "minic" in out
    code, out, err = cli(capsys, "run", str(cnn_ceil), "--repeat", "1")      # drawn inputs: 2x2 images
    assert code == 1 and "at N=2, H=2, W=2, the example inputs' sizes" in err


def test_dynamic_option_keeps_the_batch_symbolic(cnn_ceil, tmp_path):
    rng = np.random.default_rng(1)
    example = rng.standard_normal((2, 3, 40, 48)).astype(np.float32)
    run = minic.compile(cnn_ceil, [example], dynamic={"x": {0: "N"}}, cache_dir=tmp_path)
    for n in (1, 2, 5):                                  # one compilation serves every N
        x = rng.standard_normal((n, 3, 40, 48)).astype(np.float32)
        np.testing.assert_allclose(run(x), _ort(cnn_ceil, {"x": x})[0], rtol=1e-4, atol=1e-5)
    assert run.compilations == 1 and list(run.compiled) == [(("H", 40), ("W", 48))]


def test_dynamic_option_errors_name_the_input_and_axis(cnn_ceil, tmp_path):
    x = np.zeros((2, 3, 40, 48), np.float32)
    for dynamic, message in [({"y": [0]}, "no input 'y'"), ({"x": [1]}, r"axis 1 is static \(3\)"),
                             ({"x": [7]}, "has no axis 7"), ("N", "dynamic= takes")]:
        with pytest.raises(UserError, match=message):
            minic.compile(cnn_ceil, [x], dynamic=dynamic, cache_dir=tmp_path)
    with pytest.raises(UserError, match="a ceil_mode window over a symbolic size"):   # True: symbolic or nothing
        minic.compile(cnn_ceil, [x], dynamic=True, cache_dir=tmp_path)


def test_symbols_that_inputs_disagree_on_are_a_one_line_error(tmp_path):
    path = _model(tmp_path, "pad2", [helper.make_node("Add", ["a", "b"], ["s"]),
                                     helper.make_node("Pad", ["s", "pads"], ["y"], mode="reflect")],
                  [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", "seq"]),
                   helper.make_tensor_value_info("b", TensorProto.FLOAT, ["batch", "seq"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
                  [helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 2])])
    a = np.ones((2, 5), np.float32)
    for backend in BACKENDS:
        run = minic.compile(path, [a, a], backend=backend, cache_dir=tmp_path) if backend == "minic" else \
            minic.compile(path, [a, a], backend=backend)
        assert isinstance(run, Specialized)
        with pytest.raises(UserError, match=r"input 'b' axis 1: seq = 6 contradicts seq = 5"):
            run(a, np.ones((2, 6), np.float32))


def _pad(tmp_path):
    return _model(tmp_path, "pad", [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
                  [helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 2])]), 2


def _slice(tmp_path):
    return _model(tmp_path, "slice", [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"]),
                                      helper.make_node("Relu", ["y"], ["z"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence"])],
                  [helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, None])],
                  [helper.make_tensor("starts", TensorProto.INT64, [1], [1]),
                   helper.make_tensor("ends", TensorProto.INT64, [1], [-1]),
                   helper.make_tensor("axes", TensorProto.INT64, [1], [1]),
                   helper.make_tensor("steps", TensorProto.INT64, [1], [2])]), 2


def _resize(tmp_path):
    return _model(tmp_path, "resize", [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, "H", "W"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
                  [helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 1.5])]), 4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [_pad, _slice, _resize], ids=["pad", "slice", "resize"])
def test_pad_slice_resize_on_a_symbolic_axis(make, backend, tmp_path):
    path, rank = make(tmp_path)
    rng = np.random.default_rng(2)
    shapes = [(2, 7), (1, 4), (3, 10)] if rank == 2 else [(1, 2, 4, 6), (2, 2, 3, 5), (1, 2, 8, 2)]
    first = rng.standard_normal(shapes[0]).astype(np.float32)
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(path, [first], backend=backend, **options)
    for shape in shapes:
        x = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(run(x), _ort(path, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_a_later_symbol_is_kept_when_an_earlier_one_cannot_be(tmp_path):
    # time first, batch second: the reflect pad needs T static, B can stay symbolic
    path = _model(tmp_path, "pad_tb", [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "B"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, None])],
                  [helper.make_tensor("pads", TensorProto.INT64, [4], [1, 0, 2, 0])])
    run = minic.compile(path, [np.ones((4, 2), np.float32)], backend="interp")
    assert run.keep == {"B"}
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(run(x), np.pad(x, ((1, 2), (0, 0)), mode="reflect"))


def test_a_model_that_compiles_with_its_symbols_stays_one_compiled_model(tmp_path):
    path = _model(tmp_path, "relu", [helper.make_node("Relu", ["x"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "sequence"])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "sequence"])])
    x = np.array([[-1.0, 2.0]], np.float32)
    assert isinstance(minic.compile(path, [x], cache_dir=tmp_path), CompiledModel)
    run = minic.compile(path, [x], dynamic=False, cache_dir=tmp_path)       # every symbol specialized
    assert isinstance(run, Specialized)
    np.testing.assert_array_equal(run(np.array([[3.0, -4.0, 5.0]], np.float32)), [[3.0, 0.0, 5.0]])


def test_memory_keeps_the_last_capacity_shapes(tmp_path):
    path, _ = _pad(tmp_path)
    run = minic.compile(path, [np.zeros((1, 3), np.float32)], backend="interp")
    for n in range(3, 3 + CAPACITY + 2):
        run(np.zeros((1, n), np.float32))
    assert len(run.compiled) == CAPACITY
    assert run.keep == {"batch"}
    assert [k[0][1] for k in run.compiled] == list(range(5, 13))      # the least recently used went first


def test_torch_module_with_a_dynamic_option_is_exported_with_those_axes(tmp_path):
    torch.manual_seed(3)
    module = SmallCNN().eval()
    x = torch.randn(2, 3, 24, 20)
    run = minic.compile(module, (x,), dynamic={"x": {0: "N"}}, cache_dir=tmp_path)
    assert isinstance(run, CompiledModel)                 # N symbolic: one compilation serves every N
    for n in (1, 3):
        x = torch.randn(n, 3, 24, 20)
        np.testing.assert_allclose(run(x.numpy()), module(x).detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(UserError, match="no input 'y'; its inputs are x"):
        minic.compile(module, (x,), dynamic={"y": [0]}, cache_dir=tmp_path)


def test_specializations_share_one_copy_of_the_weights(cnn_ceil):
    from minic.api import load
    from minic.runtime.specialize import share_constants, static_graph
    source = load(cnn_ceil, [np.zeros((1, 3, 16, 16), np.float32)])
    inputs = source.extra["symbolic inputs"]
    pool: dict = {}
    first = share_constants(static_graph(source, {"H": 20, "W": 24}, inputs), pool)
    second = share_constants(static_graph(source, {"H": 30, "W": 18}, inputs), pool)
    weights = {c.name: c.data for c in first.constants if c.data.size > 100}
    assert weights and all(c.data is weights[c.name] for c in second.constants if c.name in weights)


def test_bind_graph_infers_types_again():
    from minic.ir.text import parse_graph
    g = parse_graph("graph @g(%x: f32[B, T]) -> (f32[B*T]) {\n  %y = reshape(%x) {shape = [B*T]} : f32[B*T]\n"
                    "  return %y\n}\n")
    bound = bind_graph(g, {"T": 4})
    assert str(bound.inputs[0].type) == "f32[B, 4]" and str(bound.outputs[0].type) == "f32[4*B]"


def _branching(tmp_path, dims, name):
    """y = relu(x) if sr == 16000 else -x: an If whose condition is computed from a graph input."""
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    return _model(tmp_path, name, [helper.make_node("Equal", ["sr", "k"], ["c"]),
                                   helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims),
                   helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)],
                  [helper.make_tensor("k", TensorProto.INT64, [], [16000])])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dims", [[2, 4], ["N", 4]])
def test_an_if_on_a_graph_input_is_not_specialized_on_its_value(tmp_path, backend, dims):
    """Both branches are compiled once and the runtime picks (tests/runtime/test_run_time_if.py):
    one model for every rate, where there was one per rate."""
    path = _branching(tmp_path, dims, "branch")
    rng = np.random.default_rng(0)
    model = minic.compile(path, [rng.standard_normal((2, 4)).astype(np.float32), np.array(16000)], backend=backend)
    assert not isinstance(model, Specialized)
    for n in (2, 3) if dims[0] == "N" else (2,):
        for rate in (16000, 8000, 16000):
            x, sr = rng.standard_normal((n, 4)).astype(np.float32), np.array(rate)
            np.testing.assert_array_equal(model(x, sr), _ort(path, {"x": x, "sr": sr})[0])
    if backend == "minic":
        assert repr(model) == "SplitModel(branch_part0 -> if)"


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_if_whose_branches_make_optionals_is_still_specialized_on_its_value(tmp_path, backend):
    """An if at run time returns tensors only: an If whose branches make optionals binds its
    condition's input, as before (one compilation per value)."""
    opt = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [2]))
    then = helper.make_graph([helper.make_node("Optional", ["x"], ["o"])], "then", [], [helper.make_value_info("o", opt)])
    other = helper.make_graph([helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(TensorProto.FLOAT, None))],
                              "else", [], [helper.make_value_info("e", opt)])
    path = _model(tmp_path, "optional", [helper.make_node("Equal", ["sr", "k"], ["c"]),
                                         helper.make_node("If", ["c"], ["o"], then_branch=then, else_branch=other),
                                         helper.make_node("OptionalHasElement", ["o"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
                   helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("y", TensorProto.BOOL, [])],
                  [helper.make_tensor("k", TensorProto.INT64, [], [16000])])
    x = np.ones(2, np.float32)
    model = minic.compile(path, [x, np.array(16000)], backend=backend)
    assert isinstance(model, Specialized) and model.values == {"sr"}
    assert [bool(model(x, np.array(rate))) for rate in (16000, 8000, 16000)] == [True, False, True]
    assert model.compilations == 2 and "values of ['sr']" in repr(model)


def test_a_loop_whose_trip_count_is_a_graph_input(tmp_path):
    body = helper.make_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"]),
                              helper.make_node("Mul", ["acc_in", "two"], ["acc_out"])], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc_in", TensorProto.FLOAT, [3])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, [3])],
                             [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    path = _model(tmp_path, "loop", [helper.make_node("Loop", ["m", "", "x"], ["y"], body=body)],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3]),
                   helper.make_tensor_value_info("m", TensorProto.INT64, [])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    x = np.array([1.0, -2.0, 0.5], np.float32)
    model = minic.compile(path, [x, np.array(3)])
    for m in (3, 0, 5):
        np.testing.assert_array_equal(model(x, np.array(m)), _ort(path, {"x": x, "m": np.array(m)})[0])
    assert not isinstance(model, Specialized)          # a loop at run time, not a compilation per value


def test_a_value_computed_from_a_large_input_is_refused_by_name(tmp_path):
    """A reshape whose target shape is read from the *data* of a 2,048-element input."""
    path = _model(tmp_path, "big", [helper.make_node("Slice", ["shape_src", "zero", "two"], ["target"]),
                                    helper.make_node("Reshape", ["x", "target"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
                   helper.make_tensor_value_info("shape_src", TensorProto.INT64, [2048])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])],
                  [helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
                   helper.make_tensor("two", TensorProto.INT64, [1], [2])])
    shape = np.zeros(2048, np.int64)
    shape[:2] = [6, 4]
    with pytest.raises(UserError, match=r"computed from input 'shape_src' \(int64\[2048\]\).* at most 1024 elements"):
        minic.compile(path, [np.zeros((4, 6), np.float32), shape])


def test_a_shape_computed_from_an_inputs_dims_binds_its_sizes_not_its_data(tmp_path):
    """target = [Squeeze(Shape(x)[0:1]) * 2, 2], as torch's dynamo exporter writes a view:
    it depends on x's dims only, so the file is specialized per size of N (never per value
    of x, which would compile at every call)."""
    path = _model(tmp_path, "dims_only", [helper.make_node("Shape", ["x"], ["s"], start=0, end=1),
                                          helper.make_node("Squeeze", ["s"], ["n"]),
                                          helper.make_node("Mul", ["n", "two"], ["n2"]),
                                          helper.make_node("Reshape", ["n2", "one"], ["n2v"]),
                                          helper.make_node("Concat", ["n2v", "last"], ["target"], axis=0),
                                          helper.make_node("Reshape", ["x", "target"], ["y"])],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 2])],
                  [helper.make_tensor("two", TensorProto.INT64, [], [2]),
                   helper.make_tensor("one", TensorProto.INT64, [1], [1]),
                   helper.make_tensor("last", TensorProto.INT64, [1], [2])])
    rng = np.random.default_rng(0)
    model = minic.compile(path, [np.zeros((3, 4), np.float32)])
    for n in (3, 3, 5):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_array_equal(model(x), _ort(path, {"x": x})[0])
    assert not getattr(model, "values", None) and getattr(model, "compilations", 1) <= 2


def test_an_output_declared_at_the_export_size_warns_at_another(tmp_path):
    """y = Pad(x) (reflect: specialized per N) declared f32[4, 4] over x: f32[N, 4] (torch's dynamo
    exporter declares an LSTM's output so): at N = 3 the specialization warns, as ONNX Runtime does,
    and gives its answer."""
    path = _model(tmp_path, "declared", [helper.make_node("Pad", ["x", "pads"], ["y"], mode="reflect")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
                  [helper.make_tensor("pads", TensorProto.INT64, [4], [1, 0, 1, 0])])
    model = minic.compile(path, [np.ones((2, 4), np.float32)])
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with pytest.warns(UserWarning, match=r"graph output 'y' is declared of shape \[4, 4\], but the graph "
                                         r"computes f32\[5, 4\] \(at these input sizes"):
        got = model(x)
    np.testing.assert_array_equal(got, _ort(path, {"x": x})[0])


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_an_input_too_small_for_an_inner_window_is_refused_though_the_chain_folds(backend):
    """conv(k=2) then conv(k=1, padding=1) over a symbolic H: the output length folds to H
    itself, but the first conv's (H - 1) is still checked when the model is called."""
    from minic import backends
    from minic.api import load
    model = torch.nn.Sequential(torch.nn.Conv1d(2, 2, 2), torch.nn.Conv1d(2, 2, 1, padding=1)).eval()
    x = np.random.default_rng(0).standard_normal((1, 2, 8)).astype(np.float32)
    source = load(model, [x])
    source.dynamic_axes = ({2: "H"},)
    run = backends.get(backend)(source)
    assert np.allclose(run(x), model(torch.from_numpy(x)).detach().numpy(), atol=1e-5)
    with pytest.raises(UserError, match=r"size \(H - 1\) is 0 .*too small for the op that computes it"):
        run(np.ones((1, 2, 1), np.float32))
