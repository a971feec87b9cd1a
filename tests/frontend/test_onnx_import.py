"""The ONNX importer: PyTorch-exported zoo models run (with their dynamic axes),
and every kind of bad file is one clear UserError."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from minic import models
from minic.errors import UnsupportedError, UserError
from minic.frontend.onnx import from_onnx, from_onnx_file
from minic.ir.interpret import interpret
from minic.ir.verify import verify


def export(name: str, path) -> torch.nn.Module:
    module, inputs = models.get(name, size="small")
    info = models.info(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, inputs, str(path), input_names=list(info.input_names), output_names=["out"],
                          dynamic_axes={n: dict(ax) for n, ax in zip(info.input_names, info.dynamic_axes)},
                          opset_version=17, dynamo=False)
    return module


@pytest.mark.parametrize("name", models.names())
def test_exported_zoo_model_matches_torch(name, tmp_path):
    module = export(name, tmp_path / "m.onnx")
    graph = verify(from_onnx_file(tmp_path / "m.onnx"))
    assert isinstance(graph.inputs[0].type.shape[0], str)          # the batch axis stays symbolic
    _, inputs = models.get(name, size="small")
    for batch in (inputs[0].shape[0], 3):                           # two batch sizes, one graph
        x = inputs[0][:1].repeat(batch, *[1] * (inputs[0].dim() - 1))
        got = interpret(graph, [x.numpy()])[0]
        want = module(x).detach().numpy()
        np.testing.assert_allclose(got, want, atol=1e-4, rtol=1e-4)


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])


def test_missing_empty_garbage_truncated_files(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        from_onnx_file(tmp_path / "nope.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(UserError, match="empty"):
        from_onnx_file(tmp_path / "empty.onnx")
    (tmp_path / "garbage.onnx").write_bytes(b"\xff\x00 this is not a protobuf \x13\x37" * 10)
    with pytest.raises(UserError, match="not a valid ONNX file"):
        from_onnx_file(tmp_path / "garbage.onnx")
    export("mlp", tmp_path / "full.onnx")
    data = (tmp_path / "full.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="not a valid ONNX file"):
        from_onnx_file(tmp_path / "cut.onnx")


def test_unsupported_op_names_node_op_and_opset():
    model = _model([helper.make_node("ImageDecoder", ["x"], ["y"], name="hm")], [X], [Y])
    with pytest.raises(UnsupportedError, match=r"node hm \(ImageDecoder, opset 17\).*supported ops: .*MatMul"):
        from_onnx(model)


def test_old_opsets_come_up_through_the_version_converter():
    # Reshape-1 took its shape as an attribute; ONNX's converter makes it an input (Reshape-5)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])
    model = _model([helper.make_node("Reshape", ["x"], ["y"], shape=[6])], [X], [y], opset=4)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(interpret(verify(from_onnx(model)), [x])[0], x.reshape(6))


def test_unsupported_opset():
    model = _model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y], opset=40)
    with pytest.raises(UnsupportedError, match="opset 40 is not supported"):
        from_onnx(model)


def test_an_op_without_a_converter_arrives_as_its_schema_function():
    # Swish (opset 24) has no converter: its schema's body is x * Sigmoid(alpha * x)
    model = _model([helper.make_node("Swish", ["x"], ["y"], alpha=0.5)], [X], [Y], opset=24)
    graph = verify(from_onnx(model))
    assert "sigmoid" in {n.op for n in graph.nodes}
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(interpret(graph, [x])[0], x / (1 + np.exp(-0.5 * x)), rtol=1e-6)


def test_a_shape_given_as_an_input_is_specialised_per_value():
    from minic.frontend.onnx import NeedsConstantError
    from minic.frontend.onnx_backend import MinicBackend
    s = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    model = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [X, s], [y])
    with pytest.raises(NeedsConstantError) as e:
        from_onnx(model)
    assert e.value.inputs == {"s"}
    rep = MinicBackend.prepare(model, backend="interp")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert rep.run([x, np.array([3, 2])])[0].shape == (3, 2)
    assert rep.run([x, np.array([1, 6])])[0].shape == (1, 6)
    assert rep.run([x + 1, np.array([3, 2])])[0][0, 0] == 1
    assert len(rep.specialised) == 2                      # one compiled model per shape value


def test_missing_external_data(tmp_path):
    w = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [X], [Y], [w])
    onnx.save_model(model, str(tmp_path / "m.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert from_onnx_file(tmp_path / "m.onnx").constants[0].data.shape == (3, 3)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(UserError, match="external data file 'weights.bin' not found"):
        from_onnx_file(tmp_path / "m.onnx")


def test_cycle_and_dangling_input():
    cycle = _model([helper.make_node("Relu", ["b"], ["a"], name="first"),
                    helper.make_node("Relu", ["a"], ["b"], name="second")], [X], [Y])
    with pytest.raises(UserError, match=r"node first .*input 'b' is not defined"):
        from_onnx(cycle)
    dangling = _model([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], [X], [Y])
    with pytest.raises(UserError, match=r"node add .*input 'ghost' is not defined"):
        from_onnx(dangling)


def test_unsupported_element_type():
    x64 = helper.make_tensor_value_info("x", TensorProto.COMPLEX64, [2])
    with pytest.raises(UnsupportedError, match="element type COMPLEX64"):
        from_onnx(_model([helper.make_node("Relu", ["x"], ["y"])], [x64], [Y]))


@pytest.mark.parametrize("mode", ["reflect", "edge"])
def test_a_copying_pad_of_an_empty_axis_is_one_line_naming_the_node(mode):
    """ONNX's reference (numpy) and onnxruntime both refuse it; so does the import, naming the node."""
    pads = helper.make_tensor("pads", TensorProto.INT64, [4], [1, 0, 1, 0])
    model = _model([helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode, name="grow")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [0, 3])], [Y], [pads], opset=19)
    want = rf"^node grow \(Pad, opset 19\): pad: axis 0 of f32\[0, 3\] is empty, so mode '{mode}' has no"
    with pytest.raises(UserError, match=want):
        from_onnx(model)
