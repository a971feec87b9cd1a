"""make_node, the one way every frontend, the random-graph generator and the rewrite engine add a
node: the op, its arity and its attributes checked, the outputs typed and named."""
from __future__ import annotations

import pytest

from minic.errors import UserError
from minic.ir.build import make_node
from minic.ir.graph import Value
from minic.ir.ops.layout import PermAttrs
from minic.ir.types import DType, TensorType

X = Value("x", TensorType((2, 3), DType.f32))


def test_outputs_typed_by_inference_and_named():
    node = make_node("transpose", [X], {"perm": (1, 0)}, names=["y"], source="m.py:3", scope="fc", group=None)
    assert [(v.name, v.type) for v in node.outputs] == [("y", TensorType((3, 2), DType.f32))]
    assert (node.source, node.scope, node.attrs) == ("m.py:3", "fc", PermAttrs((1, 0)))
    assert make_node("transpose", [X], PermAttrs((1, 0)), names=["y"]).attrs == node.attrs


def test_names_by_function_once_per_output():
    calls = []
    node = make_node("split", [X], {"axis": 1, "sizes": (1, 2)}, names=lambda k: calls.append(k) or f"s{k}")
    assert [v.name for v in node.outputs] == ["s0", "s1"] and calls == [0, 1]


@pytest.mark.parametrize("op, inputs, attrs, message", [
    ("relu", [X, X], None, r"^relu takes 1 inputs, got 2$"),
    ("add", [X], None, r"^add takes 2 inputs, got 1$"),
    ("relu", [X], {"alpha": 1.0}, r"^relu: unknown attribute\(s\) \['alpha'\]; it takes none$"),
    ("transpose", [X], None, r"^transpose needs attribute\(s\) perm$"),
    ("transpose", [X], {"perm": "01"}, r"^transpose: attribute 'perm' must be"),
    ("no_such_op", [X], None, r"^unknown op 'no_such_op'$"),
])
def test_refused_in_one_line_naming_the_op(op, inputs, attrs, message):
    named = []
    with pytest.raises(UserError, match=message) as e:
        make_node(op, inputs, attrs, names=lambda k: named.append(k) or "y")
    assert "\n" not in str(e.value) and named == []          # no name is taken for a refused node


def test_names_must_match_the_outputs():
    with pytest.raises(UserError, match="split gives 2 outputs, 1 names given"):
        make_node("split", [X], {"axis": 1, "sizes": (1, 2)}, names=["y"])


def test_onnx_errors_name_the_node():
    import onnx
    from onnx import TensorProto, helper
    from minic.frontend.onnx import from_onnx
    from minic.frontend.onnx_builder import OnnxImportError
    node = helper.make_node("Transpose", ["x"], ["y"], name="t0", perm=[0, 5])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(OnnxImportError, match=r"t0.*Transpose.*transpose") as e:
        from_onnx(onnx.load_from_string(model.SerializeToString()))
    assert "\n" not in str(e.value)


def test_every_data_sized_op_names_the_sizes_it_decides():
    """The interpreter binds a data-sized op's symbols from ``attrs.decided`` (one mechanism for
    nonzero, unique, NMS, loop and if): every such op's attributes say which they are."""
    from minic.ir import ops
    sized = [d for d in ops.REGISTRY.values() if d.sized_by_data]
    assert {d.name for d in sized} >= {"nonzero", "unique", "non_max_suppression", "loop", "if"}
    for d in sized:
        assert isinstance(getattr(d.attrs, "decided", None), property), d.name
