"""Files that ask for absurd sizes: each is one line of UserError, naming the value
and its size, before anything is allocated (no MemoryError, no numpy 'array is too
big', no int64 that wraps round to a small size)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import minic
from minic.api import load
from minic.errors import UserError
from minic.ir.graph import Value
from minic.ir.text import ParseError, parse_graph
from minic.ir.types import DType, TensorType
from minic.limits import ensure_values_fit

HUGE = 1 << 40                               # 2^40 x 2^40 f32: 4 YiB
BIG = [1 << 20, 1 << 13, 4]                  # 2^35 f32: 128 GiB, more than any test machine has free


def save(tmp_path, nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "hostile", inputs, outputs, initializer=list(initializers))
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_constant_of_shape_too_big_for_memory(tmp_path):
    path = save(tmp_path, [helper.make_node("ConstantOfShape", ["shape"], ["c"],
                                            value=numpy_helper.from_array(np.ones(1, np.float32))),
                           helper.make_node("Add", ["x", "c"], ["y"])],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                [numpy_helper.from_array(np.array(BIG, np.int64), "shape")])
    with pytest.raises(UserError, match=r"ConstantOfShape makes \(float32\[1048576, 8192, 4\]\) needs 128\.0 GiB, "
                                        r"but only .* of memory is free"):
        load(str(path))


def test_expand_too_big_is_refused_by_the_interpreter_and_the_compiled_model(tmp_path):
    path = save(tmp_path, [helper.make_node("Expand", ["one", "shape"], ["c"]),
                           helper.make_node("Add", ["x", "c"], ["y"])],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                [numpy_helper.from_array(np.array(BIG, np.int64), "shape"),
                 numpy_helper.from_array(np.ones(1, np.float32), "one")])
    x = np.ones(1, np.float32)
    with pytest.raises(UserError, match=r"interpreting @m \(the largest value: %c: f32\[1048576, 8192, 4\], "
                                        r"128\.0 GiB\) needs 256\.0 GiB"):
        minic.compile(str(path), backend="interp")(x)
    with pytest.raises(UserError, match=r"the outputs of m \(float32\[1048576, 8192, 4\]\) needs 128\.0 GiB"):
        minic.compile(str(path))(x)


def test_onnx_graph_input_of_2_40_by_2_40(tmp_path):
    path = save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])],
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [HUGE, HUGE])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [HUGE, HUGE])])
    with pytest.raises(UserError, match=r"random example input for 'x' \(f32\[1099511627776, 1099511627776\], "
                                        r"with its f64 draw\) needs 12\.0 YiB"):
        load(str(path))


def test_text_value_of_2_40_by_2_40(tmp_path):
    path = tmp_path / "huge.mc"
    path.write_text(f"graph @huge(%x: f32[{HUGE}, {HUGE}]) -> (f32[{HUGE}, {HUGE}]) {{\n"
                    f"  %y = relu(%x) : f32[{HUGE}, {HUGE}]\n  return %y\n}}\n")
    with pytest.raises(ParseError, match=r"huge\.mc:1:7: graph @huge: value 'x' \(f32\[1099511627776, "
                                         r"1099511627776\]\) would take 4\.0 YiB, more than 64-bit offsets can address"):
        parse_graph(path.read_text(), path)
    with pytest.raises(UserError, match="would take 4.0 YiB"):
        load(str(path))


def test_a_2_40_by_2_40_result_inside_a_graph_is_refused_when_read():
    text = ("graph @g(%x: f32[1, 1]) -> (f32[]) {\n"
            f"  %y = expand(%x) {{shape = [{HUGE}, {HUGE}]}} : f32[{HUGE}, {HUGE}]\n"
            "  %z = reduce_sum(%y) {axes = [0, 1], keepdims = false} : f32[]\n"
            "  return %z\n}\n")
    with pytest.raises(ParseError, match=r"node #0 \(%y = expand\): value 'y' .* would take 4\.0 YiB"):
        parse_graph(text)


def test_sizes_are_exact_python_ints():
    """np.prod of [2^40, 2^40] wraps round to 0 in int64; the check must not."""
    assert int(np.prod([HUGE, HUGE])) == 0
    with pytest.raises(UserError, match=r"needs 4\.0 YiB"):
        ensure_values_fit([Value("v", TensorType((HUGE, HUGE), DType.f32))], {}, "a value")
    ensure_values_fit([Value("v", TensorType(("B", 8), DType.f32))], {"B": 4}, "a small value")


def test_symbolic_dims_bound_to_huge_sizes_are_refused():
    graph = parse_graph("graph @g(%x: f32[B]) -> (f32[B, B]) {\n"
                        "  %y = reshape(%x) {shape = [B, 1]} : f32[B, 1]\n"
                        "  %z = expand(%y) {shape = [B, B]} : f32[B, B]\n  return %z\n}\n")
    x = np.ones(1 << 20, np.float32)                 # 2^20 x 2^20 f32 outputs: 4 TiB
    for backend in ("interp", "minic"):
        with pytest.raises(UserError, match=r"needs 4\.0 TiB"):
            minic.compile(graph, backend=backend)(x)
