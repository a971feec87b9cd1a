"""QDQ models written by ONNX Runtime's quantizer, compiled by minic with integer matmuls
(``fake-quantization-to-integer``), against ONNX Runtime on the same file."""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest

import minic
from minic.api import graph_of, load
from minic.ir.text import parse_graph
from minic.passes import optimize
from minic.runtime import compile_graph
from minic.options import CompileOptions
from minic.verify.tolerance import INT8_QUANTA_PER_LAYER, int8_quanta
from tests.int8.qdq_models import qdq_mlp

ort = pytest.importorskip("onnxruntime")

CASES = [((64, 64), "QUInt8", False),          # Gemm nodes, u8 activations: vpdpbusd's operands as they are
         ((4, 16, 64), "QUInt8", True),        # MatMul + Add, a scale per output channel
         ((64, 64), "QInt8", False),           # s8 activations: fed as x + 128
         ((4, 16, 64), "QInt8", True)]


def output_scale(path) -> float:
    """The scale of the last DequantizeLinear: the quantum of the model's output."""
    m = onnx.load(str(path))
    scales = {i.name: onnx.numpy_helper.to_array(i) for i in m.graph.initializer}
    return float(scales[m.graph.node[-1].input[1]])


@pytest.mark.parametrize("shape, activations, per_channel", CASES, ids=["gemm-u8", "matmul-u8-per-channel",
                                                                         "gemm-s8", "matmul-s8-per-channel"])
def test_an_onnxruntime_qdq_mlp_runs_on_integers_and_matches_onnxruntime(tmp_path, cache, shape, activations,
                                                                          per_channel):
    path = qdq_mlp(tmp_path, shape, activations, per_channel)
    ops = Counter(n.op for n in optimize(graph_of(load(str(path)))).nodes)
    assert ops["matmul_integer"] == 2 and not ops["matmul"] and not ops["gemm"], ops
    assert ops["xor"] == (2 if activations == "QInt8" else 0)          # the + 128 of s8 activations
    scale = output_scale(path)
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = (1.5 * rng.standard_normal(shape)).astype(np.float32)      # past the calibrated range too
        want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        compiled = minic.compile(str(path), [x], backend="minic", cache_dir=cache)(x)
        interpreted = minic.compile(str(path), [x], backend="interp")(x)    # the float form, as imported
        # two requantized layers; measured: 0 quanta (every output equal)
        assert int8_quanta(compiled, want, scale) <= 2 * INT8_QUANTA_PER_LAYER
        assert int8_quanta(interpreted, want, scale) <= 2 * INT8_QUANTA_PER_LAYER
        assert np.mean(compiled == want) > 0.99


def test_the_i32_sums_equal_onnxruntimes_matmulinteger(tmp_path):
    from onnx import TensorProto, helper
    k = 4 * 255 + 4                               # past 2^24 / (255 · 128): a float sum could round
    node = helper.make_node("MatMulInteger", ["x", "w"], ["y"])
    graph = helper.make_graph([node], "mmi", [helper.make_tensor_value_info("x", TensorProto.UINT8, [8, k]),
                                              helper.make_tensor_value_info("w", TensorProto.INT8, [k, 48])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [8, 48])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(tmp_path / "mmi.onnx"))
    rng = np.random.default_rng(0)
    x = rng.integers(200, 256, (8, k)).astype(np.uint8)        # large sums: far past f32's 2^24
    w = rng.integers(100, 128, (k, 48)).astype(np.int8)
    w[:, 1::2] = -128
    want = ort.InferenceSession(str(tmp_path / "mmi.onnx"), providers=["CPUExecutionProvider"]).run(
        None, {"x": x, "w": w})[0]
    g = parse_graph(f"""graph @g(%x: u8[8, {k}], %w: i8[{k}, 48]) -> (i32[8, 48]) {{
  %y = matmul_integer(%x, %w) : i32[8, 48]
  return %y
}}""")
    got = compile_graph(g, CompileOptions(use_cache=False, num_threads=1))(x, w)
    assert got.dtype == np.int32 and np.abs(want).max() > 2 ** 24
    np.testing.assert_array_equal(got, want)


def test_qlinearmatmul_with_a_scale_per_column_runs_on_integers_and_equals_onnxruntime(tmp_path, cache):
    # minic imports QLinearMatMul as dequantize · dequantize -> matmul -> quantize: the rule's pattern
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    k, n = 64, 48
    consts = {"xs": np.float32(0.02), "xz": np.uint8(120), "w": rng.integers(-128, 128, (k, n)).astype(np.int8),
              "ws": (0.01 * (1 + np.arange(n) / n)).astype(np.float32), "wz": np.zeros(n, np.int8),
              "ys": np.float32(0.5), "yz": np.uint8(128)}
    node = helper.make_node("QLinearMatMul", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"])
    graph = helper.make_graph([node], "qlinear", [helper.make_tensor_value_info("x", TensorProto.UINT8, [8, k])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [8, n])],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in consts.items()])
    path = tmp_path / "qlinear.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    assert Counter(n.op for n in optimize(graph_of(load(str(path)))).nodes)["matmul_integer"] == 1
    x = rng.integers(0, 256, (8, k)).astype(np.uint8)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = minic.compile(str(path), [x], backend="minic", cache_dir=cache)(x)
    assert np.abs(got.astype(np.int32) - want).max() <= INT8_QUANTA_PER_LAYER     # measured: equal
