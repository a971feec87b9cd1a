"""QNN / ONNX Runtime bugs from docs/production-bugs.md: each test asserts the
correct behaviour and is xfail(strict=True) while the tool still gets it wrong."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import onnxruntime_qnn
import pytest
from onnx import TensorProto, helper, numpy_helper

from bridges.onnx.compare import ort_session
from bridges.qnn import provider


def broadcast_add_layernorm(batch: int, seq: int = 16, channels: int = 64):
    """x[batch, seq, C] + pos[seq, C] -> LayerNormalization (BERT's embeddings, reduced)."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, channels])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, channels])
    inits = [numpy_helper.from_array(rng.standard_normal((seq, channels)).astype(np.float32), "pos"),
             numpy_helper.from_array(np.ones(channels, np.float32), "gamma"),
             numpy_helper.from_array(np.zeros(channels, np.float32), "beta")]
    nodes = [helper.make_node("Add", ["x", "pos"], ["s"], name="add"),
             helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], name="ln",
                              axis=-1, epsilon=1e-12)]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, {"x": rng.standard_normal((batch, seq, channels)).astype(np.float32)}


def htp_vs_cpu(model, feed) -> float:
    qnn = provider.session(model, fallback=False)
    return float(np.max(np.abs(qnn.run(feed)[0] - ort_session(model).run(None, feed)[0])))


def test_broadcast_add_into_layernorm_with_batch_one_is_right():
    model, feed = broadcast_add_layernorm(batch=1)          # the symptom's control: no batch broadcast
    assert htp_vs_cpu(model, feed) < 1e-2


@pytest.mark.xfail(strict=True, reason="docs/production-bugs.md#qnn-htp-broadcast-add-into-layernorm")
def test_broadcast_add_into_layernorm_with_batch_two_is_right():
    model, feed = broadcast_add_layernorm(batch=2)
    assert htp_vs_cpu(model, feed) < 1e-2                    # fp16 LayerNorm: ~2e-3 when right


@pytest.mark.xfail(strict=True, reason="docs/production-bugs.md#ort-classic-providers-miss-the-qnn-plugin")
def test_classic_providers_form_reaches_a_registered_plugin():
    provider.register()
    assert provider.EP_NAME in ort.get_available_providers()     # ORT says it is there...
    model, _ = broadcast_add_layernorm(batch=1)
    session = ort.InferenceSession(model.SerializeToString(), providers=[
        (provider.EP_NAME, {"backend_path": onnxruntime_qnn.get_qnn_htp_path(),
                            "soc_model": provider.SOC_MODEL})])
    assert session.get_providers()[0] == provider.EP_NAME     # ...but the session runs on the CPU


def test_every_reason_names_a_section_of_the_doc():
    from pathlib import Path
    import re

    doc = (Path(__file__).parents[3] / "docs" / "production-bugs.md").read_text()
    anchors = re.findall(r"production-bugs\.md#([\w-]+)", Path(__file__).read_text())
    assert anchors and all(f"## {a}\n" in doc for a in anchors)
