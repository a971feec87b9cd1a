"""ONNX ops the node suite once found missing (issue 32), against ONNX's reference on inputs
the suite does not try: vectorized loops, fused neighbours, other shapes and attributes."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.frontend.onnx_backend import MinicBackend
from onnx.helper import np_dtype_to_tensor_dtype


def _model(nodes, inputs: dict[str, np.ndarray], outputs: list[str], opset: int = 26, domains=()):
    graph = helper.make_graph(
        nodes, "gaps", [helper.make_tensor_value_info(k, np_dtype_to_tensor_dtype(v.dtype), v.shape)
                        for k, v in inputs.items()],
        [helper.make_tensor_value_info(y, TensorProto.UNDEFINED, None) for y in outputs])
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=opsets)


def _check(model, inputs: dict[str, np.ndarray], backends=("interp", "minic"), rtol=1e-6, atol=1e-7):
    want = ReferenceEvaluator(model).run(None, inputs)
    for backend in backends:
        got = MinicBackend.prepare(model, backend=backend).run(list(inputs.values()))
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape, backend
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=backend)


@pytest.mark.parametrize("src, dst", [(np.float32, np.int32), (np.int64, np.float64), (np.uint8, np.int8),
                                      (np.bool_, np.uint8), (np.int16, np.uint16)])
def test_bitcast_in_a_vectorized_loop_after_an_add(src, dst):
    rng = np.random.default_rng(0)
    x = (rng.integers(0, 2, (3, 67)) if src == np.bool_ else rng.integers(-100, 100, (3, 67))).astype(src)
    one = np.ones((1, 67), src)
    nodes = [helper.make_node("Or" if src == np.bool_ else "Add", ["x", "one"], ["s"]),
             helper.make_node("BitCast", ["s"], ["y"], to=np_dtype_to_tensor_dtype(np.dtype(dst)))]
    _check(_model(nodes, {"x": x, "one": one}, ["y"]), {"x": x, "one": one})


def test_bitcast_keeps_nan_and_negative_zero_bits():
    x = np.array([np.nan, -0.0, np.inf, -1.5, 1e-45], np.float32)
    node = helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT32)
    _check(_model([node], {"x": x}, ["y"]), {"x": x})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_pow_compiled_wraps_and_rounds_negative_powers_toward_zero(dtype):
    x = np.array([2, 3, -3, 1, -1, -1, 2, 7, 5, 0, -2] * 7, dtype)
    y = np.array([10, 40, 3, -5, -3, -4, -1, 0, 70, 9, 63] * 7, dtype)
    model = _model([helper.make_node("Pow", ["x", "y"], ["z"])], {"x": x, "y": y}, ["z"])
    with np.errstate(over="ignore"):
        want = np.power(x, np.maximum(y, 0))                  # numpy wraps around
    want = np.where(y >= 0, want, np.where(x == 1, 1, np.where(x == -1, np.where(y % 2 != 0, -1, 1), 0)))
    for backend in ("interp", "minic"):
        got = MinicBackend.prepare(model, backend=backend).run([x, y])[0]
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=backend)


def test_integer_zero_to_a_negative_power_is_a_data_error():
    from minic.errors import DataError
    x, y = np.array([2, 0], np.int32), np.array([1, -2], np.int32)
    model = _model([helper.make_node("Pow", ["x", "y"], ["z"])], {"x": x, "y": y}, ["z"])
    for backend in ("interp", "minic"):
        with pytest.raises(DataError, match="negative power"):
            MinicBackend.prepare(model, backend=backend).run([x, y])


def test_integer_to_a_float_power_is_computed_in_float():
    x, y = np.array([4, 9, 2, 27], np.int64), np.array([0.5, 0.5, 3.0, 1 / 3], np.float32)
    _check(_model([helper.make_node("Pow", ["x", "y"], ["z"])], {"x": x, "y": y}, ["z"]), {"x": x, "y": y})


def test_scan_of_opset_8_runs_each_batch_entry_in_either_direction():
    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "v"], ["s_out"]), helper.make_node("Mul", ["s_out", "v"], ["o"])], "body",
        [helper.make_tensor_value_info("s_in", f, [2]), helper.make_tensor_value_info("v", f, [2])],
        [helper.make_tensor_value_info("s_out", f, [2]), helper.make_tensor_value_info("o", f, [2])])
    rng = np.random.default_rng(4)
    init, x = rng.standard_normal((3, 2)).astype(np.float32), rng.standard_normal((3, 4, 2)).astype(np.float32)
    for direction in (0, 1):
        node = helper.make_node("Scan", ["", "init", "x"], ["s", "y"], body=body, num_scan_inputs=1,
                                directions=[direction])
        model = _model([node], {"init": init, "x": x}, ["s", "y"], opset=8)
        steps = x[:, ::-1] if direction else x
        s, ys = init.copy(), []
        for t in range(4):
            s = s + steps[:, t]
            ys.append(s * steps[:, t])
        for backend in ("interp", "minic"):
            got = MinicBackend.prepare(model, backend=backend).run([init, x])
            np.testing.assert_allclose(got[0], s, rtol=1e-6, err_msg=backend)
            np.testing.assert_allclose(got[1], np.stack(ys, 1), rtol=1e-6, err_msg=backend)


@pytest.mark.parametrize("op, states, attrs", [
    ("Adagrad", 1, dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01)),
    ("Adam", 2, dict(alpha=0.9, beta=0.8, epsilon=1e-3, norm_coefficient=0.01, norm_coefficient_post=0.02)),
    ("Momentum", 1, dict(alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.01)),
    ("Momentum", 1, dict(alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.01)),
])
@pytest.mark.parametrize("t", [0, 3])
def test_training_optimizers_on_two_tensors_at_the_first_and_a_later_step(op, states, attrs, t):
    rng = np.random.default_rng(5)
    shapes = [(37,), (2, 3)]
    inputs = {"r": np.array(0.1, np.float32), "t": np.array(t, np.int64)}
    for role in ["x", "g"] + [f"s{k}" for k in range(states)]:
        for i, shape in enumerate(shapes):
            data = rng.standard_normal(shape).astype(np.float32)
            inputs[f"{role}{i}"] = np.abs(data) if role.startswith("s") else data    # H: a sum of squares
    outputs = [f"y{k}" for k in range(len(shapes) * (1 + states))]
    node = helper.make_node(op, list(inputs), outputs, domain="ai.onnx.preview.training", **attrs)
    _check(_model([node], inputs, outputs, domains=["ai.onnx.preview.training"]), inputs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("transform", ["half_pixel", "output_half_pixel"])
def test_roi_align_over_two_images_with_rois_past_the_edges(mode, transform):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 7, 9)).astype(np.float32)
    rois = np.array([[0, 0, 17, 13], [-6, -4, 5, 3], [10, 8, 22, 19], [3.3, 2.7, 3.4, 2.8]], np.float32)
    batch = np.array([1, 0, 1, 0], np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], mode=mode, output_height=3, output_width=2,
                            sampling_ratio=3, spatial_scale=0.5, coordinate_transformation_mode=transform)
    inputs = {"x": x, "rois": rois, "batch": batch}
    _check(_model([node], inputs, ["y"], opset=22), inputs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("output_datatype", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_mel_weight_matrix_from_scalar_inputs(output_datatype):
    inputs = {"bins": np.array(12, np.int64), "dft": np.array(128, np.int64), "rate": np.array(16000, np.int64),
              "low": np.array(100.0, np.float32), "high": np.array(6000.0, np.float32)}
    node = helper.make_node("MelWeightMatrix", list(inputs), ["y"], output_datatype=output_datatype)
    _check(_model([node], inputs, ["y"], opset=17), inputs)


def test_deform_conv_with_groups_strides_dilations_pads_mask_and_bias():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 2, 2, 3)).astype(np.float32)                 # group 2: 2 input channels each
    pads, strides, dil = [1, 0, 2, 1], [2, 1], [1, 2]
    oh = (6 + 1 + 2 - 2) // 2 + 1
    ow = (7 + 0 + 1 - (2 * (3 - 1) + 1)) // 1 + 1
    offset = (1.5 * rng.standard_normal((2, 2 * 2 * 3 * 2, oh, ow))).astype(np.float32)   # offset_group 2
    bias = rng.standard_normal(6).astype(np.float32)
    mask = rng.random((2, 2 * 2 * 3, oh, ow)).astype(np.float32)
    inputs = {"x": x, "w": w, "offset": offset, "bias": bias, "mask": mask}
    node = helper.make_node("DeformConv", list(inputs), ["y"], kernel_shape=[2, 3], pads=pads, strides=strides,
                            dilations=dil, group=2, offset_group=2)
    _check(_model([node], inputs, ["y"], opset=22), inputs, rtol=1e-4, atol=1e-5)
