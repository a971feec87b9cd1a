"""The QNN rewrites: each keeps the model's meaning (ORT CPU) and fixes what it is for."""
import numpy as np
import torch
from onnx import TensorProto, helper, numpy_helper

import minic
from minic.api import load
from minic.compare import errors
from bridges.onnx.compare import ort_session
from bridges.qnn import rewrites, tolerance
from bridges.qnn.prepare import fix_shapes
from tests.bridges.qnn.conftest import sinh_erf_model


def cpu(model, feed):
    return ort_session(model).run(None, feed)


def test_decompose_hyperbolic_is_exact_enough_on_cpu():
    for op in ("Sinh", "Cosh"):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])
        model = helper.make_model(helper.make_graph([helper.make_node(op, ["x"], ["y"], name="h")], "g", [x], [y]),
                                  opset_imports=[helper.make_opsetid("", 17)])
        rewritten, count = rewrites.decompose_hyperbolic(model)
        assert count == 1 and op not in {n.op_type for n in rewritten.graph.node}
        feed = {"x": np.linspace(-3, 3, 12, dtype=np.float32).reshape(3, 4)}
        np.testing.assert_allclose(cpu(rewritten, feed)[0], cpu(model, feed)[0], rtol=1e-6, atol=1e-6)


def test_clamp_additive_mask_keeps_softmax_and_narrows_the_range():
    mask = np.triu(np.full((4, 4), -1e9, np.float32), 1)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])
    nodes = [helper.make_node("Add", ["x", "mask"], ["s"]), helper.make_node("Softmax", ["s"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [numpy_helper.from_array(mask, "mask")]),
                              opset_imports=[helper.make_opsetid("", 17)])
    rewritten, count = rewrites.clamp_additive_mask(model)
    assert count == 1
    assert numpy_helper.to_array(rewritten.graph.initializer[0]).min() == -rewrites.MASK_FLOOR
    feed = {"x": np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)}
    np.testing.assert_allclose(cpu(rewritten, feed)[0], cpu(model, feed)[0], atol=1e-7)
    _, none = rewrites.clamp_additive_mask(sinh_erf_model())     # weights are not masks
    assert none == 0


def test_clamp_additive_mask_is_what_makes_llama_qdq_accurate():
    source = load("llama-tiny", size="small")
    with torch.no_grad():
        reference = source.module(*(torch.from_numpy(x) for x in source.example_inputs)).numpy()
    run = minic.compile("llama-tiny", size="small", backend="qnn", mode="int16", calibration=1,
                        rewrites=False)
    assert not errors(run(*source.example_inputs), reference).within(0.3)     # the -1e9 mask ruins it


def test_materialize_broadcast_fixes_bert_on_the_htp():
    source = load("bert-base", size="small")
    with torch.no_grad():
        reference = source.module(*(torch.from_numpy(x) for x in source.example_inputs)).numpy()
    assert source.example_inputs[0].shape[0] > 1               # the bug needs a batch of 2 or more
    fixed = minic.compile("bert-base", size="small", backend="qnn")
    assert errors(fixed(*source.example_inputs), reference).within(tolerance.FP16)
    # Without it the emulated HTP is wrong: docs/production-bugs.md#qnn-htp-broadcast-add-into-layernorm


def test_materialize_broadcast_only_where_the_batch_axis_broadcasts():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 16, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 16, 8])
    inits = [numpy_helper.from_array(np.ones((16, 8), np.float32), "pos"),
             numpy_helper.from_array(np.ones(8, np.float32), "g"), numpy_helper.from_array(np.zeros(8, np.float32), "b")]
    nodes = [helper.make_node("Add", ["x", "pos"], ["s"], name="add"),
             helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], name="ln")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    bias = helper.make_model(helper.make_graph([helper.make_node("Add", ["x", "g"], ["s"], name="add"), nodes[1]],
                                               "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", 17)])
    assert rewrites.materialize_broadcast_into_layernorm(fix_shapes(bias, {"x": (2, 16, 8)}))[1] == 0   # [C]: right
    for batch, expected in ((2, 1), (1, 0)):
        rewritten, count = rewrites.materialize_broadcast_into_layernorm(fix_shapes(model, {"x": (batch, 16, 8)}))
        assert count == expected
        feed = {"x": np.random.default_rng(0).standard_normal((batch, 16, 8)).astype(np.float32)}
        np.testing.assert_allclose(cpu(rewritten, feed)[0], cpu(model, feed)[0], atol=1e-6)
        if expected:
            assert "Expand" in {n.op_type for n in rewritten.graph.node}
