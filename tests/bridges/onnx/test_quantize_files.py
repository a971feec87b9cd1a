"""INT8 quantization must not leave files behind (docs/production-bugs.md#ort-shape-inference-writes-into-cwd)."""
from __future__ import annotations

import onnx
import onnx.helper as oh
import pytest

from bridges.onnx.quantize import quantize_int8
from minic.errors import UserError


def _model_ort_cannot_infer() -> onnx.ModelProto:
    """x → ai.minic::Mystery → Relu: symbolic shape inference cannot see through Mystery."""
    x = oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", 4])
    y = oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    nodes = [oh.make_node("Mystery", ["x"], ["t"], domain="ai.minic"), oh.make_node("Relu", ["t"], ["y"])]
    return oh.make_model(oh.make_graph(nodes, "mystery", [x], [y]),
                         opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("ai.minic", 1)])


@pytest.mark.xfail(strict=True, reason="docs/production-bugs.md#ort-shape-inference-writes-into-cwd")
def test_ort_pre_processing_writes_nothing_into_the_current_directory(tmp_path, monkeypatch):
    from onnxruntime.quantization.shape_inference import quant_pre_process
    models, cwd = tmp_path / "models", tmp_path / "cwd"
    models.mkdir(), cwd.mkdir()
    onnx.save(_model_ort_cannot_infer(), str(models / "in.onnx"))
    monkeypatch.chdir(cwd)
    with pytest.raises(Exception, match="Incomplete symbolic shape inference"):
        quant_pre_process(str(models / "in.onnx"), str(models / "out.onnx"), skip_symbolic_shape=False,
                          auto_merge=True)
    assert list(cwd.iterdir()) == []


def test_quantize_int8_fails_cleanly_and_leaves_the_directory_alone(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="pre-processing failed: Incomplete symbolic shape inference"):
        quantize_int8(_model_ort_cannot_infer(), [])
    assert list(tmp_path.iterdir()) == []
