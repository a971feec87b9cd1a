"""A handful of op references on numbers worked out by hand (written as text IR),
and the verifier's messages on graphs broken in each way it checks."""
from __future__ import annotations

import numpy as np
import pytest

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph
from minic.ir.types import DType, TensorType
from minic.ir.verify import VerifyError, verify

X = np.arange(6, dtype=np.float32).reshape(2, 3)          # [[0, 1, 2], [3, 4, 5]]

CASES = [  # (node text over %x: f32[2, 3], its result type, the expected result)
    ("slice(%x) {axes = [1], starts = [2], ends = [-4], steps = [-2]}", "f32[2, 2]", [[2, 0], [5, 3]]),
    ("slice(%x) {axes = [0], starts = [1], ends = [end], steps = [1]}", "f32[1, 3]", [[3, 4, 5]]),
    ("reduce_mean(%x) {axes = [-1], keepdims = true}", "f32[2, 1]", [[1], [4]]),
    ("reduce_max(%x) {axes = [0, 1], keepdims = false}", "f32[]", 5),
    ("transpose(%x) {perm = [1, 0]}", "f32[3, 2]", [[0, 3], [1, 4], [2, 5]]),
    ("concat(%x, %x) {axis = 0}", "f32[4, 3]", np.concatenate([X, X])),
    ("flatten(%x) {axis = 0}", "f32[1, 6]", [[0, 1, 2, 3, 4, 5]]),
    ("pad(%x) {pads = [0, 1, 0, 0], mode = \"edge\", value = 0.0}", "f32[2, 4]", [[0, 0, 1, 2], [3, 3, 4, 5]]),
    ("gather(%x, @idx) {axis = 1}", "f32[2, 2]", [[2, 0], [5, 3]]),
    ("relu(@neg)", "f32[3]", [0, 0, 2]),
    ("div(@ints, @twos)", "i64[2]", [-3, 3]),                 # truncates toward zero, like C
]


@pytest.mark.parametrize("node, type_, expected", CASES, ids=[c[0].split("(")[0] + str(i) for i, c in enumerate(CASES)])
def test_reference_on_hand_worked_numbers(node, type_, expected):
    text = f"""graph @case(%x: f32[2, 3]) -> ({type_}) {{
  const @idx : i64[2] = dense<[-1, 0]>
  const @neg : f32[3] = dense<[-1.5, 0.0, 2.0]>
  const @ints : i64[2] = dense<[-7, 7]>
  const @twos : i64[2] = dense<2>
  %y = {node} : {type_}
  return %y
}}"""
    got, = interpret(parse_graph(text), [X])
    np.testing.assert_array_equal(got, np.asarray(expected, got.dtype))


def test_softmax_rows_sum_to_one_and_keep_order():
    text = """graph @s(%x: f32[2, 3]) -> (f32[2, 3]) {
  %y = softmax(%x) {axis = -1} : f32[2, 3]
  return %y
}"""
    got, = interpret(parse_graph(text), [X])
    np.testing.assert_allclose(got.sum(axis=-1), [1, 1], rtol=1e-6)
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6)     # shift invariance: row 1 = row 0 + 3
    assert (np.diff(got, axis=-1) > 0).all()


# --- the verifier names the node and the broken rule --------------------------------

@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_an_exclusive_running_op_over_an_empty_axis_is_empty(op):
    for shape, axis in (((2, 0), 1), ((0,), 0)):
        attrs = ops.get(op).make_attrs(axis=axis, exclusive=True, reverse=axis == 0)
        assert ops.get(op).reference(attrs, np.ones(shape, np.float32)).shape == shape
    got = ops.get(op).reference(ops.get(op).make_attrs(axis=1, exclusive=True), X)
    np.testing.assert_array_equal(got, [[0, 0, 1], [0, 3, 7]] if op == "cumsum" else [[1, 0, 0], [1, 3, 12]])


def two_nodes() -> tuple[Value, Value, Value, Node, Node]:
    x = Value("x", TensorType(("B", 3), DType.f32))
    a = Value("a", TensorType(("B", 3), DType.f32))
    b = Value("b", TensorType(("B", 3), DType.f32))
    relu = Node("relu", [x], [a], ops.get("relu").make_attrs())
    neg = Node("neg", [a], [b], ops.get("neg").make_attrs())
    return x, a, b, relu, neg


def broken(how: str) -> Graph:
    x, a, b, relu, neg = two_nodes()
    nodes, outputs, constants = [relu, neg], [b], []
    if how == "use before definition":
        nodes = [neg, relu]
    elif how == "defined twice":
        neg.outputs = [Value("a", b.type)]
        outputs = neg.outputs
    elif how == "declared type":
        neg.outputs[0].type = TensorType(("B", 4), DType.f32)
    elif how == "arity":
        neg.inputs = [a, a]
    elif how == "attributes":
        neg.op = "softmax"
    elif how == "output undefined":
        outputs = [Value("ghost", b.type)]
    elif how == "constant data":
        c = constant("c", np.zeros(3, np.float32))
        c.type = TensorType((4,), DType.f32)
        constants = [c]
    return Graph("g", [x], outputs, nodes, constants)


@pytest.mark.parametrize("how, words", [
    ("use before definition", ["node #0 (%b = neg)", "input 'a' is used before it is defined"]),
    ("defined twice", ["node #1 (%a = neg)", "value 'a' is defined twice"]),
    ("declared type", ["node #1 (%b = neg)", "'b' is declared f32[B, 4] but the op gives f32[B, 3]"]),
    ("arity", ["node #1", "neg takes 1 inputs, got 2"]),
    ("attributes", ["node #1 (%b = softmax)", "attributes must be AxisAttrs"]),
    ("output undefined", ["graph @g", "output 'ghost' is not defined"]),
    ("constant data", ["constant 'c'", "does not match its type f32[4]"]),
])
def test_verifier_messages(how, words):
    with pytest.raises(VerifyError) as info:
        verify(broken(how))
    assert all(w in str(info.value) for w in words), str(info.value)


def test_verifier_accepts_the_intact_graph():
    assert verify(broken("nothing")).name == "g"


def test_scatter_reductions_refuse_bool_data_and_plain_scatter_takes_it():
    """max/min/add/mul of bools (or/and) is not something compiled code spells: refused at inference,
    on every path, with the op's name; a plain scatter of bools compiles."""
    import minic
    from minic.errors import UserError
    text = """graph @g(%d: bool[4], %i: i64[3], %u: bool[3]) -> (bool[4]) {
  %y = scatter_elements(%d, %i, %u) {axis = 0, reduction = "REDUCTION"} : bool[4]
  return %y
}"""
    for reduction in ("max", "add"):
        with pytest.raises(UserError, match=f"scatter_elements: reduction '{reduction}' does not take bool data"):
            parse_graph(text.replace("REDUCTION", reduction))
    d, i, u = np.array([False, True, False, False]), np.array([0, 2, 3]), np.array([True, False, True])
    got = minic.compile(parse_graph(text.replace("REDUCTION", "none")), backend="minic", use_cache=False)(d, i, u)
    np.testing.assert_array_equal(got, [True, True, False, True])
