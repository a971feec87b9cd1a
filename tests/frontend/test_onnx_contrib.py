"""ONNX Runtime's com.microsoft contrib ops (minic/frontend/onnx_contrib.py) against
ONNX Runtime itself: one small model per op, and a BERT that ONNX Runtime's own
transformer optimizer fused."""
from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import minic
from minic.errors import UnsupportedError
from minic.runtime.compiled import CompiledModel

ort = pytest.importorskip("onnxruntime")

F = TensorProto.FLOAT


def _model(graph, opset: int = 17):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])


def _check(tmp_path, name, node, inputs: dict[str, np.ndarray], inits=(), rtol=1e-4, atol=1e-5, want=None, opset=17):
    """Build a one-node model, run it on ONNX Runtime (or take ``want``: for the ops
    ONNX Runtime has no CPU kernel of), minic and interp; compare."""
    types = {np.dtype(np.float32): F, np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
             np.dtype(np.uint8): TensorProto.UINT8}
    graph = helper.make_graph([node], name,
                              [helper.make_tensor_value_info(k, types[v.dtype], v.shape) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(o, TensorProto.INT32 if o == "mask_index" else F, None)
                               for o in node.output if o],
                              list(inits))
    model = _model(graph, opset)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    want = want or ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    for backend in ("interp", "minic"):
        options = {"cache_dir": tmp_path} if backend == "minic" else {}
        got = minic.compile(path, list(inputs.values()), backend=backend, **options)(*inputs.values())
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(want), f"{name} on {backend}: {len(got)} outputs, ONNX Runtime {len(want)}"
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{name} on {backend}")


def _ms(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)


R = np.random.default_rng(0)


def _f(*shape):
    return R.standard_normal(shape).astype(np.float32)


def _init(name, array):
    return onnx.numpy_helper.from_array(array, name)


def test_activations(tmp_path):
    x, bias = _f(2, 3, 8), _f(8)
    _check(tmp_path, "gelu", _ms("Gelu", ["x"], ["y"]), {"x": x})
    _check(tmp_path, "bias_gelu", _ms("BiasGelu", ["x", "b"], ["y"]), {"x": x}, [_init("b", bias)])
    _check(tmp_path, "fast_gelu", _ms("FastGelu", ["x", "b"], ["y"]), {"x": x}, [_init("b", bias)])
    _check(tmp_path, "quick_gelu", _ms("QuickGelu", ["x"], ["y"], alpha=1.5), {"x": x})
    skip = _f(2, 3, 8)                                  # BiasAdd has a CUDA kernel only: its spec, in numpy
    _check(tmp_path, "bias_add", _ms("BiasAdd", ["x", "b", "s"], ["y"]), {"x": x, "s": skip}, [_init("b", bias)],
           want=[x + bias + skip])


def test_skip_layer_normalizations(tmp_path):
    x, skip = _f(2, 3, 8), _f(2, 3, 8)
    inits = [_init("g", _f(8)), _init("beta", _f(8)), _init("bias", _f(8))]
    _check(tmp_path, "skip_ln", _ms("SkipLayerNormalization", ["x", "s", "g", "beta", "bias"], ["y", "", "", "sum"],
                                    epsilon=1e-5), {"x": x, "s": skip}, inits)
    _check(tmp_path, "skip_rms", _ms("SkipSimplifiedLayerNormalization", ["x", "s", "g"], ["y"], epsilon=1e-5),
           {"x": x, "s": skip}, inits[:1])


def test_onnxruntimes_own_ops_in_the_onnx_domain(tmp_path):
    """The optimizer writes LayerNormalization into files of opset < 17 (ONNX Runtime defines
    it at every opset) and SimplifiedLayerNormalization (RMSNorm) in ONNX's domain."""
    x, inits = _f(2, 3, 8), [_init("g", _f(8)), _init("beta", _f(8))]
    _check(tmp_path, "ln_opset14", helper.make_node("LayerNormalization", ["x", "g", "beta"], ["y"], epsilon=1e-5),
           {"x": x}, inits, opset=14)
    _check(tmp_path, "rms", helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], epsilon=1e-5),
           {"x": x}, inits[:1])


def test_embed_layer_normalization(tmp_path):
    ids = R.integers(0, 20, (2, 6)).astype(np.int32)
    segments = R.integers(0, 2, (2, 6)).astype(np.int32)
    mask = np.ones((2, 6), np.int32)
    mask[1, 4:] = 0
    inits = [_init("word", _f(20, 8)), _init("pos", _f(16, 8)), _init("seg", _f(2, 8)), _init("g", _f(8)),
             _init("beta", _f(8))]
    _check(tmp_path, "embed_ln", _ms("EmbedLayerNormalization", ["ids", "segments", "word", "pos", "seg", "g", "beta",
                                                                 "mask"], ["y", "mask_index"], epsilon=1e-5),
           {"ids": ids, "segments": segments, "mask": mask}, inits)


def test_fused_matmul(tmp_path):
    _check(tmp_path, "fused_matmul", _ms("FusedMatMul", ["a", "b"], ["y"], alpha=0.5, transA=1, transB=1),
           {"a": _f(2, 5, 3), "b": _f(2, 4, 5)})


def test_matmul_integer_to_float(tmp_path):
    a = R.integers(0, 256, (3, 6)).astype(np.uint8)
    inits = [_init("w", R.integers(-128, 128, (6, 4)).astype(np.int8)), _init("a_scale", np.float32(0.02)),
             _init("w_scale", np.array([0.01, 0.03, 0.02, 0.05], np.float32)), _init("a_zp", np.uint8(128)),
             _init("w_zp", np.int8(3)), _init("bias", _f(4))]
    _check(tmp_path, "mm_int_float", _ms("MatMulIntegerToFloat", ["a", "w", "a_scale", "w_scale", "a_zp", "w_zp", "bias"],
                                         ["y"]), {"a": a}, inits)


def _quantized_files(folder, module, example, **quantize) -> tuple:
    """``module`` exported by torch (opset 17), quantized by quantize_dynamic (its defaults unless
    told: QInt8 weights), and that file as ONNX Runtime's session optimizer writes it out
    (optimized_model_filepath, ORT_ENABLE_EXTENDED): the two paths."""
    torch = pytest.importorskip("torch")
    from onnxruntime.quantization import quantize_dynamic
    torch.onnx.export(module.eval(), (example,), str(folder / "model.onnx"), input_names=["x"], dynamo=False,
                      opset_version=17)
    quantize_dynamic(str(folder / "model.onnx"), str(folder / "quantized.onnx"), **quantize)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(folder / "fused.onnx")
    ort.InferenceSession(str(folder / "quantized.onnx"), options, providers=["CPUExecutionProvider"])
    return folder / "quantized.onnx", folder / "fused.onnx"


def _ops(path) -> Counter:
    return Counter((n.domain, n.op_type) for n in onnx.load(str(path)).graph.node)


def _check_file(path, x: np.ndarray, tmp_path, threads: int = 0) -> None:
    """The file on interp and minic against ONNX Runtime (``threads`` intra-op threads, 0: its default)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    want = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    for backend in ("interp", "minic"):
        options = {"cache_dir": tmp_path} if backend == "minic" else {}
        np.testing.assert_allclose(minic.compile(path, [x], backend=backend, **options)(x), want,
                                   rtol=1e-4, atol=1e-5, err_msg=f"{path.name} on {backend}")


@pytest.fixture(scope="module")
def quantized_mlp(tmp_path_factory):
    """An MLP quantized by quantize_dynamic, then fused by ONNX Runtime's own graph
    optimizer into DynamicQuantizeMatMul."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    return _quantized_files(tmp_path_factory.mktemp("qmlp"), mlp, torch.randn(4, 16))[1]


def test_a_dynamically_quantized_mlp_fused_by_onnxruntime(quantized_mlp, tmp_path):
    assert _ops(quantized_mlp)[("com.microsoft", "DynamicQuantizeMatMul")] == 2, _ops(quantized_mlp)
    _check_file(quantized_mlp, R.standard_normal((4, 16)).astype(np.float32), tmp_path)


def test_a_dynamically_quantized_cnn(tmp_path_factory, tmp_path):
    """Conv2d → ReLU → Conv2d → Linear: quantize_dynamic writes ConvInteger and MatMulInteger
    after DynamicQuantizeLinear; ONNX Runtime's optimizer fuses the Linear's into DynamicQuantizeMatMul."""
    torch = pytest.importorskip("torch")

    class CNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.conv2 = torch.nn.Conv2d(8, 8, 3, stride=2)
            self.fc = torch.nn.Linear(8 * 3 * 3, 10)

        def forward(self, x):
            return self.fc(torch.flatten(self.conv2(torch.relu(self.conv1(x))), 1))
    torch.manual_seed(0)
    quantized, fused = _quantized_files(tmp_path_factory.mktemp("qcnn"), CNN(), torch.randn(2, 3, 8, 8))
    assert {op: _ops(quantized)[("", op)] for op in ("ConvInteger", "MatMulInteger", "DynamicQuantizeLinear")} == \
        {"ConvInteger": 2, "MatMulInteger": 1, "DynamicQuantizeLinear": 3}, _ops(quantized)
    assert _ops(fused)[("com.microsoft", "DynamicQuantizeMatMul")] == 1, _ops(fused)
    x = R.standard_normal((2, 3, 8, 8)).astype(np.float32)
    for path in (quantized, fused):
        _check_file(path, x, tmp_path)


@pytest.mark.parametrize("weights, per_channel, bidirectional", [("QInt8", False, False), ("QUInt8", True, True)])
def test_a_dynamically_quantized_lstm(tmp_path_factory, tmp_path, weights, per_channel, bidirectional):
    """nn.LSTM → Linear: quantize_dynamic writes com.microsoft DynamicQuantizeLSTM (QInt8 weights
    with one scale per direction by default; or per channel, here with two bidirectional layers);
    the optimizer fuses the Linear into DynamicQuantizeMatMul.  Against single-threaded ONNX
    Runtime: with more threads and batch > 1 its LSTM kernel splits the batch between threads
    and quantizes each part of the state h on its own (scale and zero point of those rows), so
    its result depends on the thread count (5e-4 apart here at 2 threads); minic quantizes the
    whole h, as one thread does."""
    torch = pytest.importorskip("torch")
    from onnxruntime.quantization import QuantType
    layers = 2 if bidirectional else 1

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(6, 12, num_layers=layers, batch_first=True, bidirectional=bidirectional)
            self.fc = torch.nn.Linear(12 * (2 if bidirectional else 1), 4)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])
    torch.manual_seed(0)
    quantized, fused = _quantized_files(tmp_path_factory.mktemp(f"qlstm_{weights}"), Tagger(), torch.randn(2, 5, 6),
                                        weight_type=getattr(QuantType, weights), per_channel=per_channel)
    for path in (quantized, fused):
        assert _ops(path)[("com.microsoft", "DynamicQuantizeLSTM")] == layers, _ops(path)
    assert _ops(fused)[("com.microsoft", "DynamicQuantizeMatMul")] == 1, _ops(fused)
    x = R.standard_normal((2, 5, 6)).astype(np.float32)
    for path in (quantized, fused):
        _check_file(path, x, tmp_path, threads=1)


@pytest.mark.parametrize("mask", ["none", "lengths", "raw", "causal"])
def test_attention(tmp_path, mask):
    x = _f(2, 5, 16)
    inputs = {"x": x}
    names = ["x", "w", "bias"]
    attrs = {"num_heads": 4}
    if mask == "lengths":
        inputs["m"] = np.array([5, 3], np.int32)
        names.append("m")
    elif mask == "raw":
        inputs["m"] = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
        names.append("m")
    elif mask == "causal":
        attrs["unidirectional"] = 1
    _check(tmp_path, f"attention_{mask}", _ms("Attention", names, ["y"], **attrs), inputs,
           [_init("w", _f(16, 48) * 0.3), _init("bias", _f(48))])


def test_multi_head_attention(tmp_path):
    q, k, v = _f(2, 3, 8), _f(2, 5, 8), _f(2, 5, 8)
    _check(tmp_path, "mha", _ms("MultiHeadAttention", ["q", "k", "v", "bias", "m"], ["y"], num_heads=2),
           {"q": q, "k": k, "v": v, "m": np.array([[1, 1, 1, 1, 0], [1, 1, 0, 0, 0]], np.int32)},
           [_init("bias", _f(24))])


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(tmp_path, interleaved):
    x = _f(2, 3, 4, 8)                                  # (B, N, S, H)
    angles = np.arange(16)[:, None] * (1.0 / 100 ** (np.arange(4) / 4))[None]
    inits = [_init("cos", np.cos(angles).astype(np.float32)), _init("sin", np.sin(angles).astype(np.float32))]
    _check(tmp_path, f"rotary_{interleaved}", _ms("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"],
                                                  interleaved=interleaved),
           {"x": x, "pos": np.array([[0, 1, 2, 3], [5, 6, 7, 8]], np.int64)}, inits)


def _rotary_caches(size: int) -> list:
    angles = np.arange(32)[:, None] * (1.0 / 100 ** (np.arange(size // 2) / (size // 2)))[None]
    return [_init("cos", np.cos(angles).astype(np.float32)), _init("sin", np.sin(angles).astype(np.float32))]


_GQA_CASES = {        # name: attributes, and what else the node is given (a prompt of 2 × 5 tokens unless told)
    "grouped": ({}, {}),
    "rotary": ({"do_rotary": 1}, {"rotary": True}),
    "rotary_interleaved_at_positions": ({"do_rotary": 1, "rotary_interleaved": 1}, {"rotary": True, "positions": True}),
    "window_softcap_scale": ({"local_window_size": 2, "softcap": 2.0, "scale": 0.3}, {}),
    "padded_with_bias_and_sink": ({}, {"seqlens": [4, 2], "bias": True, "sink": True}),
    "bidirectional_smooth": ({"causal": 0, "smooth_softmax": 1}, {"seqlens": [4, 2]}),
    "packed_empty_past_one_kv_head": ({"kv_num_heads": 1}, {"packed": True, "past": 0}),
    "qk_norm": ({}, {"qk_norm": True}),
    # a past cache: one new token per entry after 3 and 2 cached ones (the cache keeps 3 rows)
    "decode_ragged_rotary": ({"do_rotary": 1}, {"rotary": True, "seq": 1, "past": 3, "seqlens": [3, 2], "total": 4}),
    "decode_at_positions": ({"do_rotary": 1}, {"rotary": True, "positions": True, "seq": 1, "past": 3}),
    "decode_shared_buffer": ({}, {"seq": 1, "past": 8, "seqlens": [3, 5], "total": 6}),
    "next_chunk_window": ({"local_window_size": 3, "do_rotary": 1}, {"rotary": True, "batch": 1, "seq": 3, "past": 4}),
}


@pytest.mark.parametrize("case", list(_GQA_CASES))
def test_group_query_attention(tmp_path, case):
    """4 query heads of 16 over 2 key/value heads (unless told): the output, present_key and
    present_value against ONNX Runtime's CPU kernel."""
    attrs, given = _GQA_CASES[case]
    attrs = {"num_heads": 4, "kv_num_heads": 2, **attrs}
    batch, seq, size, kv = given.get("batch", 2), given.get("seq", 5), 16, attrs["kv_num_heads"]
    past = given.get("past")
    inputs, inits = {}, []
    if given.get("packed"):
        inputs["qkv"] = _f(batch, seq, (4 + 2 * kv) * size)
        names = ["qkv", "", ""]
    else:
        inputs.update(q=_f(batch, seq, 4 * size), k=_f(batch, seq, kv * size), v=_f(batch, seq, kv * size))
        names = ["q", "k", "v"]
    if past is not None:
        inputs.update(past_k=_f(batch, kv, past, size), past_v=_f(batch, kv, past, size))
        names += ["past_k", "past_v"]
    else:
        names += ["", ""]
    inputs["seqlens_k"] = np.array(given.get("seqlens", [(past or 0) + seq - 1] * batch), np.int32)
    inputs["total"] = np.array(given.get("total", (past or 0) + seq), np.int32)
    names += ["seqlens_k", "total"]
    optional = ["", "", "", "", ""]                     # cos_cache sin_cache position_ids attention_bias head_sink
    if given.get("rotary"):
        inits += _rotary_caches(size)
        optional[:2] = ["cos", "sin"]
    if given.get("positions"):
        inputs["pos"] = np.array([[3 + 2 * b + s for s in range(seq)] for b in range(batch)], np.int64)
        optional[2] = "pos"
    if given.get("bias"):
        inputs["bias"] = _f(batch, 1, seq, seq)
        optional[3] = "bias"
    if given.get("sink"):
        inits.append(_init("sink", _f(4)))
        optional[4] = "sink"
    if given.get("qk_norm"):
        inits += [_init("q_norm", _f(size)), _init("k_norm", _f(size))]
        optional += ["", "", "q_norm", "k_norm"]
    while optional and not optional[-1]:
        optional.pop()
    outputs = ["y", "present_key", "present_value"]
    node = _ms("GroupQueryAttention", names + optional, outputs, **attrs)
    want = _gqa_normalized_by_onnx_ops(node, inputs, inits, size) if given.get("qk_norm") else None
    _check(tmp_path, f"gqa_{case}", node, inputs, inits, want=want)


def _gqa_normalized_by_onnx_ops(node, inputs: dict, inits: list, size: int) -> list:
    """ONNX Runtime's CPU kernel has no q_norm_weight/k_norm_weight (CUDA and WebGPU do): its
    result for them is a GroupQueryAttention of q and k each RMS-normalized per head by
    SimplifiedLayerNormalization (epsilon 1e-6), run by ONNX Runtime."""
    nodes, names = [], list(node.input[:14])
    for i, (name, weight) in enumerate([("q", "q_norm"), ("k", "k_norm")]):
        nodes += [helper.make_node("Reshape", [name, "per_head"], [f"{name}_heads"]),
                  helper.make_node("SimplifiedLayerNormalization", [f"{name}_heads", weight], [f"{name}_normed"],
                                   epsilon=1e-6, axis=-1),
                  helper.make_node("Reshape", [f"{name}_normed", "merged"], [f"{name}_merged"])]
        names[i] = f"{name}_merged"
    gqa = helper.make_node("GroupQueryAttention", names, list(node.output), domain="com.microsoft",
                           num_heads=4, kv_num_heads=2)
    shapes = [_init("per_head", np.array([0, 0, -1, size], np.int64)), _init("merged", np.array([0, 0, -1], np.int64))]
    graph = helper.make_graph(nodes + [gqa], "gqa_normalized",
                              [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                               for k, v in inputs.items()],
                              [helper.make_tensor_value_info(o, F, None) for o in node.output], list(inits) + shapes)
    model = _model(graph)
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)


@pytest.mark.parametrize("past", [False, True])
def test_group_query_attention_over_symbolic_lengths(tmp_path, past):
    """A file with symbolic batch B, new tokens S and cached tokens P, as generators write it: a
    prompt compiles once with B and S symbolic; a decoding step is specialized (the present
    cache's length is total_sequence_length's value).  Three shapes each against ONNX Runtime."""
    names = ["q", "k", "v"] + (["past_k", "past_v"] if past else ["", ""]) + ["seqlens_k", "total"]
    shapes = {"q": ["B", "S", 64], "k": ["B", "S", 32], "v": ["B", "S", 32]}
    if past:
        shapes.update(past_k=["B", 2, "P", 16], past_v=["B", 2, "P", 16])
    node = _ms("GroupQueryAttention", names, ["y", "present_key", "present_value"], num_heads=4, kv_num_heads=2)
    graph = helper.make_graph([node], "gqa", [helper.make_tensor_value_info(n, F, s) for n, s in shapes.items()] +
                              [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["B"]),
                               helper.make_tensor_value_info("total", TensorProto.INT32, [])],
                              [helper.make_tensor_value_info(o, F, None) for o in node.output])
    path = tmp_path / "gqa_symbolic.onnx"
    onnx.save(_model(graph), path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def inputs(batch, seq, cached):
        given = {"q": _f(batch, seq, 64), "k": _f(batch, seq, 32), "v": _f(batch, seq, 32)}
        if past:
            given.update(past_k=_f(batch, 2, cached, 16), past_v=_f(batch, 2, cached, 16))
        return given | {"seqlens_k": np.full(batch, cached + seq - 1, np.int32), "total": np.array(cached + seq, np.int32)}
    sizes = [(2, 1, 3), (1, 1, 6), (3, 1, 2)] if past else [(2, 5, 0), (1, 3, 0), (3, 7, 0)]
    for backend in ("interp", "minic"):
        options = {"cache_dir": tmp_path} if backend == "minic" else {}
        run = minic.compile(path, list(inputs(*sizes[0]).values()), backend=backend, **options)
        if backend == "minic" and not past:
            assert isinstance(run, CompiledModel)
        for size in sizes:
            given = inputs(*size)
            for g, w in zip(run(*given.values()), session.run(None, given)):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5, err_msg=f"{size} on {backend}")


def test_group_query_attention_with_a_quantized_cache_is_refused_by_name(tmp_path):
    names = ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"] + [""] * 5 + ["k_scale"]
    node = _ms("GroupQueryAttention", names, ["y"], num_heads=4, kv_num_heads=2, k_quant_type="PER_TENSOR")
    shapes = {"q": [1, 1, 64], "k": [1, 1, 32], "v": [1, 1, 32], "past_k": [1, 2, 3, 16], "past_v": [1, 2, 3, 16]}
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, F, s) for n, s in shapes.items()] +
                              [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
                               helper.make_tensor_value_info("total", TensorProto.INT32, [])],
                              [helper.make_tensor_value_info("y", F, None)], [_init("k_scale", np.float32([0.1]))])
    path = tmp_path / "gqa_quantized_cache.onnx"
    onnx.save(_model(graph), path)
    with pytest.raises(UnsupportedError, match="GroupQueryAttention.*the 'k_scale' input is not supported"):
        minic.compile(path, backend="interp")


def test_an_input_the_converter_does_not_cover_is_refused_by_name(tmp_path):
    node = _ms("SkipLayerNormalization", ["x", "s", "g"], ["y", "mean"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [1, 2, 4]),
                                            helper.make_tensor_value_info("s", F, [1, 2, 4])],
                              [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("mean", F, None)],
                              [_init("g", _f(4))])
    path = tmp_path / "refused.onnx"
    onnx.save(_model(graph), path)
    with pytest.raises(UnsupportedError, match="the 'mean' output is not supported"):
        minic.compile(path, backend="interp")


@pytest.fixture(scope="module")
def optimized_bert(tmp_path_factory):
    """A tiny BERT (random weights) exported by torch and fused by ONNX Runtime's optimizer."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from onnxruntime.transformers.optimizer import optimize_model
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=64, max_position_embeddings=64)
    config._attn_implementation = "eager"               # the optimizer fuses the eager attention pattern
    torch.manual_seed(0)
    bert = transformers.BertModel(config).eval()

    class Outputs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask, types):
            out = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=types)
            return out.last_hidden_state, out.pooler_output

    folder = tmp_path_factory.mktemp("bert")
    ids = torch.randint(0, 100, (2, 8))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(Outputs().eval(), (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(folder / "bert.onnx"),
                      opset_version=17, input_names=names, dynamic_axes={n: {0: "batch", 1: "seq"} for n in names},
                      dynamo=False)
    optimize_model(str(folder / "bert.onnx"), model_type="bert", num_heads=4,
                   hidden_size=32, opt_level=0).save_model_to_file(str(folder / "bert_opt.onnx"))
    return folder / "bert_opt.onnx"


def test_a_bert_fused_by_onnxruntimes_optimizer(optimized_bert, tmp_path):
    """Exported with dynamic batch and sequence: the fused file compiles once, symbolically
    (no specialization), and matches ONNX Runtime at three shapes, a padded row in each."""
    ops = Counter((n.domain, n.op_type) for n in onnx.load(str(optimized_bert)).graph.node)
    for op, count in {"Attention": 2, "SkipLayerNormalization": 4, "BiasGelu": 2, "EmbedLayerNormalization": 1}.items():
        assert ops[("com.microsoft", op)] == count, ops
    session = ort.InferenceSession(str(optimized_bert), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def inputs(batch, seq):
        given = {"input_ids": R.integers(0, 100, (batch, seq)).astype(np.int64),
                 "attention_mask": np.ones((batch, seq), np.int64), "token_type_ids": np.zeros((batch, seq), np.int64)}
        given["attention_mask"][-1, seq // 2:] = 0          # a padded row: the mask reaches Attention
        return [given[n] for n in names]
    for backend in ("interp", "minic"):
        options = {"cache_dir": tmp_path} if backend == "minic" else {}
        run = minic.compile(optimized_bert, inputs(2, 8), backend=backend, **options)
        if backend == "minic":
            assert isinstance(run, CompiledModel)
        for batch, seq in [(2, 8), (1, 5), (3, 12)]:
            x = inputs(batch, seq)
            for g, w in zip(run(*x), session.run(None, dict(zip(names, x)))):
                np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
