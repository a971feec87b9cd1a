"""The ONNX ops composed at import (minic/frontend/onnx_compose.py) against ONNX's reference,
on inputs the node suite does not try: ties, other axes, more equations, other block layouts."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend

_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
          np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL}


def _check(op: str, inputs: dict[str, np.ndarray], n_out: int = 1, backend: str = "interp", opset: int = 21, **attrs):
    node = helper.make_node(op, list(inputs), [f"y{i}" for i in range(n_out)], **attrs)
    graph = helper.make_graph(
        [node], "compose", [helper.make_tensor_value_info(k, _TYPES[v.dtype], v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(f"y{i}", TensorProto.UNDEFINED, None) for i in range(n_out)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    want = ReferenceEvaluator(model).run(None, inputs)
    got = MinicBackend.prepare(model, backend=backend).run(list(inputs.values()))
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-7)      # f32 sums in another order


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_with_ties_on_any_axis(axis, largest):
    x = np.random.default_rng(0).integers(0, 4, (5, 6, 7)).astype(np.float32)    # many ties
    _check("TopK", {"x": x, "k": np.array([3], np.int64)}, 2, axis=axis, largest=largest)


def test_top_k_compiled():
    x = np.random.default_rng(1).standard_normal((4, 9)).astype(np.float32)
    _check("TopK", {"x": x, "k": np.array([9], np.int64)}, 2, backend="minic")


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bkj->bik", [(2, 3, 4), (2, 5, 4)]),
    ("ii", [(4, 4)]),                                 # implicit output: the trace
    ("iij->ji", [(3, 3, 2)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),      # broadcast ellipsis, implicit output
    ("i,j->ij", [(3,), (4,)]),
    ("abc,cd,de->aeb", [(2, 3, 4), (4, 5), (5, 2)]),
])
def test_einsum(equation, shapes):
    rng = np.random.default_rng(2)
    inputs = {f"x{i}": rng.standard_normal(s) for i, s in enumerate(shapes)}
    _check("Einsum", inputs, equation=equation)


def test_einsum_compiled():
    rng = np.random.default_rng(3)
    _check("Einsum", {"a": rng.standard_normal((2, 3, 4)), "b": rng.standard_normal((4, 3))}, backend="minic",
           equation="bij,ji->b")


def test_col2im_3_spatial_axes_with_strides_pads_dilations():
    x = np.random.default_rng(4).standard_normal((1, 2 * 8, 18)).astype(np.float32)
    _check("Col2Im", {"x": x, "image": np.array([4, 5, 6], np.int64), "block": np.array([2, 2, 2], np.int64)},
           strides=[2, 2, 2], pads=[1, 0, 1, 1, 0, 0], dilations=[1, 2, 1])


def test_reverse_sequence_and_compress_and_shrink():
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    _check("ReverseSequence", {"x": x, "lens": np.array([4, 1, 2], np.int64)}, time_axis=0, batch_axis=1)
    _check("Compress", {"x": x, "c": np.array([True, False, True], bool)}, axis=1)
    _check("Compress", {"x": x, "c": np.array([False, True] * 5, bool)})
    _check("Shrink", {"x": np.linspace(-3, 3, 13, dtype=np.float32)}, lambd=1.0, bias=0.5)


def test_lp_normalization_keeps_a_zero_slice_zero():
    x = np.array([[3.0, -4.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    _check("LpNormalization", {"x": x}, axis=1, p=2)


def test_l1_normalization_divides_by_the_sum_of_magnitudes():
    # ONNX's reference (onnx 1.23) sums x**p without abs, so for p=1 a negative entry lowers the norm
    # (its own node cases have none); the spec's L1 norm is sum |x|, which minic computes.
    x = np.array([[3.0, -4.0, 1.0], [0.0, 0.0, 0.0]], np.float32)
    node = helper.make_node("LpNormalization", ["x"], ["y"], axis=1, p=1)
    graph = helper.make_graph([node], "l1", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    got = MinicBackend.prepare(model, backend="interp").run([x])[0]
    np.testing.assert_allclose(got, [[3 / 8, -4 / 8, 1 / 8], [0, 0, 0]], rtol=1e-6)


@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 3], pads=[1, 0, 2, 1], output_padding=[1, 2]),    # groups: the node suite's group_2 cases
    dict(strides=[2, 2], dilations=[2, 1], auto_pad="SAME_LOWER"),
])
def test_conv_transpose(attrs):
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 4, 4, 3)).astype(np.float32), rng.standard_normal((4, 3, 3, 2)).astype(np.float32)
    _check("ConvTranspose", {"x": x, "w": w, "bias": rng.standard_normal(3 * attrs.get("group", 1)).astype(np.float32)},
           **attrs)


def test_conv_transpose_output_shape_generates_the_pads_as_the_spec_says():
    # total padding (12 - 11, 6 - 6) split with the larger half first: pads [1, 0, 0, 0].  ONNX's
    # reference (1.23) keeps pads 0 when auto_pad is NOTSET (the spec and ONNX Runtime do not), so the
    # expected output is the reference's with those pads written out.
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((1, 2, 4, 3)).astype(np.float32), rng.standard_normal((2, 3, 3, 2)).astype(np.float32)
    graphs = [helper.make_graph([helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], **attrs)], "ct",
                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                 helper.make_tensor_value_info("w", TensorProto.FLOAT, w.shape)],
                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
              for attrs in (dict(output_shape=[11, 6]), dict(pads=[1, 0, 0, 0]))]
    spec, explicit = (helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]) for g in graphs)
    got = MinicBackend.prepare(spec, backend="interp").run([x, w])[0]
    want = ReferenceEvaluator(explicit).run(None, {"x": x, "w": w})[0]
    assert got.shape == (1, 3, 11, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op, attrs", [
    ("AveragePool", dict(kernel_shape=[3, 2, 2], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0], count_include_pad=0)),
    ("AveragePool", dict(kernel_shape=[2, 3, 2], strides=[2, 2, 2], pads=[1, 1, 0, 0, 1, 1], count_include_pad=1,
                         ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[2, 2, 3], strides=[2, 1, 1], dilations=[2, 1, 1], auto_pad="SAME_UPPER")),
])
def test_windows_over_more_than_two_spatial_axes(op, attrs):
    shape = (1, 2) + (5,) * len(attrs["kernel_shape"])
    _check(op, {"x": np.random.default_rng(6).standard_normal(shape).astype(np.float32)}, **attrs)


def test_a_max_pool_over_four_spatial_axes():
    # ONNX's reference stops at three; numpy's sliding windows say what it is
    x = np.random.default_rng(8).standard_normal((1, 2, 5, 4, 5, 3)).astype(np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 1, 2, 2], strides=[1, 2, 2, 1])
    graph = helper.make_graph([node], "pool4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    windows = np.lib.stride_tricks.sliding_window_view(x, (2, 1, 2, 2), axis=(2, 3, 4, 5))[:, :, :, ::2, ::2, :]
    np.testing.assert_array_equal(MinicBackend.prepare(model, backend="interp").run([x])[0],
                                  windows.max(axis=(-4, -3, -2, -1)))


def test_det_of_a_batch_of_4x4_matrices():
    x = np.random.default_rng(10).standard_normal((3, 2, 4, 4))
    _check("Det", {"x": x})


def test_wrap_pad_bool_reduce_and_integer_max_pool():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    _check("Pad", {"x": x, "pads": np.array([1, 3, 2, 0], np.int64)}, mode="wrap")
    m = np.random.default_rng(11).random((3, 4, 5)) > 0.5
    _check("ReduceMax", {"m": m, "axes": np.array([1], np.int64)}, keepdims=0)
    _check("ReduceMin", {"m": m, "axes": np.array([0, 2], np.int64)})
    q = np.random.default_rng(12).integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)
    node = helper.make_node("MaxPool", ["q"], ["y"], kernel_shape=[2, 2], strides=[2, 1], pads=[0, 1, 1, 0])
    graph = helper.make_graph([node], "u8", [helper.make_tensor_value_info("q", TensorProto.UINT8, q.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    got = MinicBackend.prepare(model, backend="interp").run([q])[0]
    np.testing.assert_array_equal(got, ReferenceEvaluator(model).run(None, {"q": q})[0])


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter_on_the_middle_axis(mode):
    rng = np.random.default_rng(13)
    past, update = rng.standard_normal((3, 6, 2)).astype(np.float32), rng.standard_normal((3, 3, 2)).astype(np.float32)
    _check("TensorScatter", {"past": past, "update": update, "at": np.array([0, 2, 3 if mode == "linear" else 5], np.int64)},
           opset=24, axis=1, mode=mode)


def test_max_unpool_puts_each_value_back_at_its_index():
    x = np.random.default_rng(14).standard_normal((1, 2, 6, 4)).astype(np.float32)
    pooled = helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph([pooled], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info(n, t, None) for n, t in (("p", TensorProto.FLOAT),
                                                                                     ("i", TensorProto.INT64))])
    p, i = ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])).run(None, {"x": x})
    _check("MaxUnpool", {"p": p, "i": i}, kernel_shape=[2, 2], strides=[2, 2])


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1]),
                                   dict(kernel_shape=[2, 2], strides=[1, 2], dilations=[2, 1], storage_order=1)])
def test_max_pool_indices(attrs):
    x = np.random.default_rng(15).integers(0, 5, (2, 3, 6, 5)).astype(np.float32)     # ties: the first tap wins
    _check("MaxPool", {"x": x}, 2, **attrs)


# What the shared compose layer gives ONNX that its own converters refused: N-D Conv (as torch's
# Conv3d), dilated average pools, cropping pads (as torch's negative F.pad), NaN-keeping Sign.

@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_conv_3d_with_groups_strides_dilations_and_pads(backend):
    rng = np.random.default_rng(20)
    x, w = rng.standard_normal((2, 4, 5, 6, 7)), rng.standard_normal((6, 2, 2, 3, 2))      # f64: sums near 0
    _check("Conv", {"x": x, "w": w, "b": rng.standard_normal(6)}, backend=backend, group=2,
           strides=[2, 1, 2], dilations=[1, 2, 1], pads=[1, 0, 1, 0, 2, 1])
    _check("Conv", {"x": x, "w": w}, group=2, auto_pad="SAME_UPPER")


def test_dilated_average_pool_and_3d_lp_pool():
    x = np.random.default_rng(21).standard_normal((1, 2, 7, 8)).astype(np.float32)
    _check("AveragePool", {"x": x}, kernel_shape=[2, 3], dilations=[2, 1], pads=[1, 1, 0, 1], count_include_pad=1)
    v = np.random.default_rng(22).standard_normal((1, 2, 4, 5, 6)).astype(np.float32)
    _check("LpPool", {"v": v}, kernel_shape=[2, 2, 3], strides=[1, 2, 2], p=3)


def test_negative_pads_crop_and_sign_keeps_nan():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    node = helper.make_node("Pad", ["x", "pads", "value"], ["y"])            # ONNX's reference refuses < 0 pads
    graph = helper.make_graph([node], "crop", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("pads", TensorProto.INT64, [4], [-1, 2, 1, -2]),
                               helper.make_tensor("value", TensorProto.FLOAT, [], [7.0])])
    got = MinicBackend.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])).run([x])[0]
    np.testing.assert_array_equal(got, np.pad(x, ((0, 1), (2, 0)), constant_values=7)[1:, :-2])
    _check("Sign", {"s": np.array([-2.5, 0.0, 3.0, np.nan], np.float32)})
