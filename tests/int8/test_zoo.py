"""The zoo's transformers (small), quantized by ONNX Runtime: statically (QDQ, MatMul and Gemm
in int8, calibrated on the example inputs and seeded random ones) and dynamically
(MatMulInteger): minic runs every weight matmul on integers and matches ONNX Runtime on
the same file.  The zoo's resnet50 (small), quantized statically (every Conv and the Gemm):
every conv on integers too."""
from __future__ import annotations

import logging
from collections import Counter

import numpy as np
import onnx
import pytest

import minic
from minic.api import graph_of, load
from minic.compare import as_tuple
from minic.passes import optimize
from minic.verify.tolerance import F32

ort = pytest.importorskip("onnxruntime")


def quantized(name: str, folder, activations: str, op_types: tuple[str, ...] = ("MatMul", "Gemm"),
              per_channel: bool = False):
    """(the f32 file, the quantized file, the example inputs by name): ``activations`` QUInt8 or QInt8
    for quantize_static (QDQ, the ``op_types``), "dynamic" for quantize_dynamic (DynamicQuantizeLinear
    + MatMulInteger)."""
    from onnxruntime.quantization import (CalibrationMethod, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from bridges.onnx.export import export_zoo
    from bridges.onnx.quantize import feed_reader
    exported = export_zoo(name, size="small")[0]
    names = exported.input_names
    f32, qdq = folder / f"{name}.onnx", folder / f"{name}_qdq.onnx"
    onnx.save(exported.model, str(f32))

    def random_feed(seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {n: rng.integers(0, int(a.max()) + 1, a.shape).astype(a.dtype) if a.dtype.kind in "iu"
                else rng.standard_normal(a.shape).astype(a.dtype) for n, a in zip(names, exported.example_inputs)}
    feeds = [dict(zip(names, exported.example_inputs))] + [random_feed(s) for s in range(8)]
    logging.disable(logging.WARNING)              # the quantizer's advice to pre-process first
    try:
        if activations == "dynamic":
            quantize_dynamic(str(f32), str(qdq), weight_type=QuantType.QInt8)
            return f32, qdq, feeds[0]
        quantize_static(str(f32), str(qdq), feed_reader(feeds), quant_format=QuantFormat.QDQ,
                        activation_type=getattr(QuantType, activations), weight_type=QuantType.QInt8,
                        op_types_to_quantize=list(op_types), calibrate_method=CalibrationMethod.MinMax,
                        per_channel=per_channel)
    finally:
        logging.disable(logging.NOTSET)
    return f32, qdq, feeds[0]


@pytest.mark.parametrize("name, weight_matmuls", [("bert-base", 12), ("llama-tiny", 15)])
@pytest.mark.parametrize("activations", ["QUInt8", "QInt8", "dynamic"])
def test_a_statically_quantized_zoo_model_matches_onnxruntime(tmp_path, cache, name, weight_matmuls, activations):
    f32, qdq, feed = quantized(name, tmp_path, activations)
    ops = Counter(n.op for n in optimize(graph_of(load(str(qdq)))).nodes)
    # every matmul with constant weights; attention's two (both operands activations) stay float
    assert ops["matmul_integer"] == weight_matmuls, ops
    session = lambda path: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want, exact = session(qdq).run(None, feed), session(f32).run(None, feed)
    inputs = list(feed.values())
    got = as_tuple(minic.compile(str(qdq), inputs, backend="minic", cache_dir=cache)(*inputs))
    for g, w, e in zip(got, want, exact):
        scale = float(np.max(np.abs(e)))
        # equal sums; the float ops after the last requantization (norms, softmax) differ as f32 code does
        assert np.max(np.abs(g - w)) <= F32 * scale
        # int8's own error, the same in both engines (measured, static: 3.1e-2 bert-base, 4.2e-2
        # llama-tiny; dynamic: 1.7e-2, 3.3e-2)
        assert np.max(np.abs(g - e)) <= 1.01 * np.max(np.abs(w - e)) + F32 * scale
        assert np.max(np.abs(g - e)) <= 0.1 * scale


@pytest.mark.parametrize("per_channel", [False, True], ids=["per-tensor", "per-channel"])
def test_a_statically_quantized_resnet_runs_every_conv_on_integers(tmp_path, cache, per_channel):
    f32, qdq, feed = quantized("resnet50", tmp_path, "QUInt8", ("Conv", "MatMul", "Gemm"), per_channel)
    convs = sum(n.op_type == "Conv" for n in onnx.load(str(qdq)).graph.node)
    ops = Counter(n.op for n in optimize(graph_of(load(str(qdq)))).nodes)
    assert convs == 17 and ops["conv2d_integer"] == convs and not ops["conv2d"], ops
    assert ops["matmul_integer"] == 1 and not ops["gemm"], ops
    session = lambda path: ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (want,), (exact,) = session(qdq).run(None, feed), session(f32).run(None, feed)
    (image,) = feed.values()
    got = minic.compile(str(qdq), [image], backend="minic", cache_dir=cache)(image)
    scale = float(np.max(np.abs(exact)))
    # measured: every output equal; int8 vs f32 5.5e-2 (per tensor), 5.2e-2 (per channel) in both engines
    assert np.mean(got == want) > 0.99                       # exact sums, the requantization as ORT's
    assert np.max(np.abs(got - exact)) <= 1.01 * np.max(np.abs(want - exact)) + F32 * scale
    assert np.max(np.abs(got - exact)) <= 0.1 * scale
