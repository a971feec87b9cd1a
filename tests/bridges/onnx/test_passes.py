"""Each homemade pass, before and after, on a tiny hand-built graph.

Every test checks three things: the rewrite happened (node list after), the
result passes the full ONNX checker, and ONNX Runtime computes the same numbers
before and after (at several batch sizes when the graph has a dynamic axis).
"""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from bridges.onnx.passes import PASSES, run_passes
from bridges.onnx.passes.cleanup import eliminate_dead_nodes, eliminate_unused_initializers
from bridges.onnx.passes.fold import (fold_constant_gather, fold_constant_nodes,
                                      fold_reshape_dims, fold_shape_gather)
from bridges.onnx.passes.noop import (eliminate_identity, eliminate_nop_cast,
                                      eliminate_nop_dropout, eliminate_nop_reshape,
                                      eliminate_nop_transpose)
from bridges.onnx.passes.reshape import fuse_consecutive_reshapes
from minic.errors import UserError

F = TensorProto.FLOAT


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "t", inputs, outputs,
                              [numpy_helper.from_array(np.asarray(v), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def x_input(shape=("B", 6)):
    return helper.make_tensor_value_info("x", F, list(shape))


def y_output(shape=("B", 6)):
    return helper.make_tensor_value_info("y", F, list(shape))


def ops(m):
    return [n.op_type for n in m.graph.node]


def same_numbers(before, after, shapes=((1, 6), (3, 6))):
    onnx.checker.check_model(after, full_check=True)
    for shape in shapes:
        x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        a = ort.InferenceSession(before.SerializeToString()).run(None, {"x": x})[0]
        b = ort.InferenceSession(after.SerializeToString()).run(None, {"x": x})[0]
        np.testing.assert_array_equal(a, b)


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value), name))


# --- (b) no-ops -------------------------------------------------------------

def test_identity_is_bypassed():
    m = model([helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["y"])],
              [x_input()], [y_output()])
    after = eliminate_identity(m)
    assert ops(after) == ["Relu"] and after.graph.node[0].input[0] == "x"
    same_numbers(m, after)


def test_identity_feeding_graph_output_renames_its_producer():
    m = model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])],
              [x_input()], [y_output()])
    after = eliminate_identity(m)
    assert ops(after) == ["Relu"] and after.graph.node[0].output[0] == "y"
    same_numbers(m, after)


def test_identity_from_input_to_output_must_stay():
    m = model([helper.make_node("Identity", ["x"], ["y"])], [x_input()], [y_output()])
    assert ops(eliminate_identity(m)) == ["Identity"]


def test_nop_cast_dropout_transpose_are_bypassed_but_real_ones_stay():
    nodes = [helper.make_node("Cast", ["x"], ["a"], to=F),                 # float -> float
             helper.make_node("Dropout", ["a"], ["b"]),                    # inference
             helper.make_node("Transpose", ["b"], ["c"], perm=[0, 1]),     # identity perm
             helper.make_node("Transpose", ["c"], ["d"], perm=[1, 0]),     # a real one
             helper.make_node("Cast", ["d"], ["y"], to=TensorProto.DOUBLE)]
    m = model(nodes, [x_input((2, 6))], [helper.make_tensor_value_info("y", TensorProto.DOUBLE,
                                                                        [6, 2])])
    after = eliminate_nop_transpose(eliminate_nop_dropout(eliminate_nop_cast(m)))
    assert ops(after) == ["Transpose", "Cast"]
    same_numbers(m, after, shapes=[(2, 6)])


def test_nop_reshape_needs_static_equal_shapes():
    m = model([const("s", [2, 6]), helper.make_node("Reshape", ["x", "s"], ["a"]),
               helper.make_node("Relu", ["a"], ["y"])], [x_input((2, 6))], [y_output((2, 6))])
    assert ops(eliminate_nop_reshape(m)) == ["Constant", "Relu"]
    dynamic = model([const("s", [-1, 6]), helper.make_node("Reshape", ["x", "s"], ["a"]),
                     helper.make_node("Relu", ["a"], ["y"])], [x_input()], [y_output()])
    assert "Reshape" in ops(eliminate_nop_reshape(dynamic))


# --- (a) reshapes -----------------------------------------------------------

def test_consecutive_reshapes_fuse():
    m = model([const("s1", [-1, 2, 3]), helper.make_node("Reshape", ["x", "s1"], ["a"]),
               const("s2", [-1, 3]), helper.make_node("Reshape", ["a", "s2"], ["y"])],
              [x_input()], [y_output((None, 3))])
    after = eliminate_dead_nodes(fuse_consecutive_reshapes(m))
    assert ops(after) == ["Constant", "Reshape"]
    assert after.graph.node[1].input[0] == "x"
    same_numbers(m, after)


def test_reshape_with_a_zero_dim_is_not_fused():
    # 0 copies a dim from the Reshape's *input*, which fusion would change.
    m = model([const("s1", [-1, 2, 3]), helper.make_node("Reshape", ["x", "s1"], ["a"]),
               const("s2", [0, 6]), helper.make_node("Reshape", ["a", "s2"], ["y"])],
              [x_input()], [y_output((None, 6))])
    assert fuse_consecutive_reshapes(m) == m


# --- (c) constant Gather and the shape chains --------------------------------

def shape_chain(index):
    """y = reshape(x, concat(unsqueeze(gather(shape(x), index)), [-1])) over x[B, 6]."""
    return model([helper.make_node("Shape", ["x"], ["shape"]), const("i", np.int64(index)),
                  helper.make_node("Gather", ["shape", "i"], ["dim"], axis=0),
                  const("axes", [0]), helper.make_node("Unsqueeze", ["dim", "axes"], ["dim1"]),
                  const("rest", [-1]),
                  helper.make_node("Concat", ["rest", "dim1"], ["target"], axis=0),
                  helper.make_node("Reshape", ["x", "target"], ["y"])],
                 [x_input()], [y_output((None, None))])


def test_static_dim_folds_through_the_whole_chain():
    m = shape_chain(1)                               # dim 1 is the static 6
    after, _ = run_passes(m)
    assert ops(after) == ["Reshape"]
    target = numpy_helper.to_array(next(i for i in after.graph.initializer
                                        if i.name == after.graph.node[0].input[1]))
    assert target.tolist() == [-1, 6]
    same_numbers(m, after)


def test_dynamic_batch_dim_is_never_folded():
    m = shape_chain(0)                               # dim 0 is the named axis B
    after = fold_shape_gather(m)
    assert "Gather" in ops(after) and "Shape" in ops(after)
    same_numbers(m, run_passes(m)[0], shapes=[(1, 6), (2, 6), (5, 6)])


def test_constant_gather_folds_to_an_initializer():
    m = model([helper.make_node("Gather", ["table", "idx"], ["row"], axis=0),
               helper.make_node("Add", ["x", "row"], ["y"])], [x_input()], [y_output()],
              inits=[("table", np.arange(18, dtype=np.float32).reshape(3, 6)),
                     ("idx", np.int64(2))])
    after = fold_constant_gather(m)
    assert ops(after) == ["Add"]
    row = {i.name: numpy_helper.to_array(i) for i in after.graph.initializer}["row"]
    assert row.tolist() == list(range(12, 18))
    same_numbers(m, after)


def test_constant_nodes_fold_in_one_sweep_along_a_chain():
    m = model([const("a", [4]), const("b", [2]),
               helper.make_node("Div", ["a", "b"], ["q"]),
               helper.make_node("Cast", ["q"], ["qf"], to=F),
               helper.make_node("Mul", ["x", "qf"], ["y"])], [x_input()], [y_output()])
    after = fold_constant_nodes(m)
    assert ops(after) == ["Constant", "Constant", "Mul"]     # dead Constants: cleanup's job
    assert ops(eliminate_dead_nodes(after)) == ["Mul"]
    same_numbers(m, after)


def test_reshape_target_with_dynamic_dims_becomes_zeros():
    # view(B, 2, 3) with B read from x itself: B is "copy dim 0" = 0.
    m = model([helper.make_node("Shape", ["x"], ["shape"]), const("i", np.int64(0)),
               helper.make_node("Gather", ["shape", "i"], ["b"], axis=0),
               const("axes", [0]), helper.make_node("Unsqueeze", ["b", "axes"], ["b1"]),
               const("rest", [2, 3]),
               helper.make_node("Concat", ["b1", "rest"], ["target"], axis=0),
               helper.make_node("Reshape", ["x", "target"], ["y"])], [x_input()],
              [y_output(("B", 2, 3))])
    after = eliminate_dead_nodes(fold_reshape_dims(m))
    assert ops(after) == ["Reshape"]
    target = {i.name: numpy_helper.to_array(i) for i in after.graph.initializer}
    assert target[after.graph.node[0].input[1]].tolist() == [0, 2, 3]
    same_numbers(m, after, shapes=[(1, 6), (4, 6)])


# --- cleanup and the pass manager -------------------------------------------

def test_unused_initializers_are_dropped():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [x_input()], [y_output()],
              inits=[("unused", np.ones(3, np.float32))])
    assert [i.name for i in eliminate_unused_initializers(m).graph.initializer] == []


def test_passes_do_not_mutate_their_argument():
    m = shape_chain(1)
    frozen = m.SerializeToString()
    for fn in PASSES.values():
        fn(m)
    assert m.SerializeToString() == frozen


def test_pass_manager_reaches_a_fixed_point_and_checks_every_pass():
    seen = []
    after, log = run_passes(shape_chain(1), check=lambda m, name: seen.append(name))
    assert len(seen) == log.rounds * len(PASSES)
    assert not [s for s in log.steps if s.round == log.rounds and s.changed]
    assert run_passes(after)[1].rounds == 1


def test_unknown_pass_name_is_a_user_error():
    with pytest.raises(UserError, match="unknown ONNX pass 'fold-everything'"):
        run_passes(shape_chain(1), ["fold-everything"])
