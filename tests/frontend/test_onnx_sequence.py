"""ONNX sequences and optionals resolved at import (minic/frontend/onnx_sequence.py) against ONNX's reference."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.errors import UserError
from minic.frontend.onnx import from_onnx
from minic.frontend.onnx_backend import MinicBackend

F, I64 = TensorProto.FLOAT, TensorProto.INT64
SEQ_F = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))


def _same(got, want):
    if want is None or isinstance(want, list):
        assert (got is None) == (want is None)
        if want is not None:
            assert isinstance(got, list) and len(got) == len(want)
            for g, w in zip(got, want):
                _same(g, w)
        return
    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _run_both(model, inputs: dict, backend: str = "interp", rep=None):
    want = ReferenceEvaluator(model).run(None, inputs)
    got = (rep or MinicBackend.prepare(model, backend=backend)).run(list(inputs.values()))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w)
    return got


def _model(nodes, inputs, outputs, opset=21):
    graph = helper.make_graph(nodes, "seq", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name, I64, [], [value]))


def _seq_value(name):
    return helper.make_value_info(name, SEQ_F)


rng = np.random.default_rng(0)
A, B, C = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_construct_at_erase_length_and_concat(backend):
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             _const("m1", -1), _const("zero", 0),
             helper.make_node("SequenceAt", ["s", "m1"], ["last"]),           # a negative position: from the back
             helper.make_node("SequenceErase", ["s", "zero"], ["s2"]),
             helper.make_node("SequenceLength", ["s2"], ["n"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=-1),
             helper.make_node("ConcatFromSequence", ["s"], ["stack"], axis=-1, new_axis=1)]
    model = _model(nodes, [helper.make_tensor_value_info(n, F, [2, 3]) for n in "abc"],
                   [helper.make_tensor_value_info("last", F, None), helper.make_tensor_value_info("n", I64, None),
                    helper.make_tensor_value_info("cat", F, None), helper.make_tensor_value_info("stack", F, None)])
    _run_both(model, {"a": A, "b": B, "c": C}, backend)


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_split_to_sequence_uneven_negative_axis_and_sequence_output(backend):
    x = rng.standard_normal((3, 7)).astype(np.float32)
    nodes = [_const("two", 2),
             helper.make_node("SplitToSequence", ["x", "two"], ["pieces"], axis=-1),      # 2, 2, 2, 1
             helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0)]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [3, 7])],
                   [helper.make_value_info("pieces", SEQ_F), helper.make_value_info("rows", SEQ_F)])
    got = _run_both(model, {"x": x}, backend)
    assert [p.shape for p in got[0]] == [(3, 2), (3, 2), (3, 2), (3, 1)] and len(got[1]) == 3


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_sequence_graph_input_insert_and_identity_output(backend):
    nodes = [helper.make_node("SequenceInsert", ["s", "t", "p"], ["out"]),
             helper.make_node("Identity", ["s"], ["same"])]
    model = _model(nodes, [helper.make_value_info("s", SEQ_F), helper.make_tensor_value_info("t", F, [2, 3]),
                           helper.make_tensor_value_info("p", I64, [])],
                   [helper.make_value_info("out", SEQ_F), helper.make_value_info("same", SEQ_F)])
    rep = MinicBackend.prepare(model, backend=backend)
    _run_both(model, {"s": [A, B], "t": C, "p": np.array(-1, np.int64)}, rep=rep)      # before the last
    _run_both(model, {"s": [A], "t": C, "p": np.array(0, np.int64)}, rep=rep)          # another length
    out, same = rep.run([[], C, np.array(0, np.int64)])      # an empty sequence (ONNX's reference divides by 0)
    assert same == [] and len(out) == 1
    np.testing.assert_array_equal(out[0], C)
    assert len(rep.specialised) == 3                  # one import per signature (and position)


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_sequence_map_over_a_sequence_and_a_tensor(backend):
    body = helper.make_graph([helper.make_node("Mul", ["e", "w"], ["y"]), helper.make_node("Shape", ["e"], ["sh"])],
                             "body", [helper.make_tensor_value_info("e", F, None),
                                      helper.make_tensor_value_info("w", F, None)],
                             [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("sh", I64, None)])
    model = _model([helper.make_node("SequenceMap", ["s", "w"], ["ys", "shapes"], body=body)],
                   [helper.make_value_info("s", SEQ_F), helper.make_tensor_value_info("w", F, [3])],
                   [helper.make_value_info("ys", SEQ_F),
                    helper.make_value_info("shapes", helper.make_sequence_type_proto(
                        helper.make_tensor_type_proto(I64, None)))])
    w = np.array([1.0, 2.0, 3.0], np.float32)
    _run_both(model, {"s": [A, rng.standard_normal((4, 3)).astype(np.float32)], "w": w}, backend)


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_loop_carries_a_sequence(backend):
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), helper.make_node("Cast", ["i"], ["f"], to=F),
         helper.make_node("Mul", ["x", "f"], ["xi"]), helper.make_node("SequenceInsert", ["s_in", "xi"], ["s_out"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
                 helper.make_value_info("s_in", SEQ_F)],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_value_info("s_out", SEQ_F)])
    nodes = [_const("trip", 3), helper.make_node("SequenceEmpty", [], ["empty"], dtype=F),
             helper.make_node("Constant", [], ["go"], value=helper.make_tensor("go", TensorProto.BOOL, [], [True])),
             helper.make_node("Loop", ["trip", "go", "empty"], ["s"], body=body),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=0, new_axis=1)]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])], [helper.make_tensor_value_info("y", F, None)])
    _run_both(model, {"x": A}, backend)


def _opt_type(elem):
    return helper.make_optional_type_proto(elem)


@pytest.mark.parametrize("backend", ["interp", "minic"])
def test_optionals_in_if_branches_and_as_graph_inputs(backend):
    then = helper.make_graph([helper.make_node("Optional", ["x"], ["o"])], "then", [],
                             [helper.make_value_info("o", _opt_type(helper.make_tensor_type_proto(F, None)))])
    other = helper.make_graph([helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(F, None))],
                              "else", [], [helper.make_value_info("e", _opt_type(helper.make_tensor_type_proto(F, None)))])
    nodes = [helper.make_node("If", ["c"], ["opt"], then_branch=then, else_branch=other),
             helper.make_node("OptionalHasElement", ["opt"], ["has"]),
             helper.make_node("OptionalHasElement", ["given"], ["given_has"])]
    opt_f = _opt_type(helper.make_tensor_type_proto(F, [2, 3]))
    model = _model(nodes, [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", F, [2, 3]), helper.make_value_info("given", opt_f)],
                   [helper.make_value_info("opt", opt_f), helper.make_tensor_value_info("has", TensorProto.BOOL, []),
                    helper.make_tensor_value_info("given_has", TensorProto.BOOL, [])])
    rep = MinicBackend.prepare(model, backend=backend)
    # checked against the spec: ONNX's reference holds an optional as a list of one, and an empty one as
    # [None], for which its OptionalHasElement says True
    for c, given in ((True, None), (False, B)):
        opt, has, given_has = rep.run([np.array(c), A, given])
        assert (opt is None) == (not c) and bool(has) == c and bool(given_has) == (given is not None)
        if c:
            np.testing.assert_array_equal(opt, A)


def test_optional_get_element_of_an_empty_optional_is_refused():
    nodes = [helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(F, None)),
             helper.make_node("OptionalGetElement", ["e"], ["y"])]
    model = _model(nodes, [], [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(UserError, match="the optional is empty"):
        from_onnx(model)


def test_positions_out_of_range_and_tensor_ops_on_sequences_are_refused():
    inputs = [helper.make_tensor_value_info("a", F, [2, 3])]
    at = _model([helper.make_node("SequenceConstruct", ["a"], ["s"]), _const("p", 1),
                 helper.make_node("SequenceAt", ["s", "p"], ["y"])], inputs, [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(UserError, match=r"position 1 is outside \[-1, 0\]"):
        from_onnx(at)
    relu = _model([helper.make_node("SequenceConstruct", ["a"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
                  inputs, [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(UserError, match="sequence or optional value"):
        from_onnx(relu)


def test_a_sequence_input_needs_a_signature():
    model = _model([helper.make_node("SequenceLength", ["s"], ["n"])], [helper.make_value_info("s", SEQ_F)],
                   [helper.make_tensor_value_info("n", I64, [])])
    with pytest.raises(UserError, match="sequence value"):
        from_onnx(model)
    from minic.ir.types import DType, TensorType
    layout: list = []
    graph = from_onnx(model, sequences={"s": (TensorType((2,), DType.f32),) * 3}, layout=layout)
    assert len(graph.inputs) == 3 and layout == ["tensor"]
