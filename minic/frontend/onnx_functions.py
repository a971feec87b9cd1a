"""ONNX ops defined by a function body in their own schema, imported as that body.

Many ONNX ops are specified as a small graph of simpler ops (``Swish(x) =
x * Sigmoid(alpha * x)``, ``LayerNormalization`` as ReduceMean/Sub/Sqrt...): the
schema at an opset carries a ``FunctionProto`` (``schema.has_function``), or
builds one from the node's attributes and input types
(``has_context_dependent_function``).  An op minic has no converter for is
imported as that body, with its inputs, outputs and attribute references
bound to the node's (ONNX's own ``function_expand_helper``, the one that writes
the node suite's ``*_expanded`` cases); the importer then converts the body's
nodes one by one, at the opset the function was written for.
"""
from __future__ import annotations

from typing import Any

from minic.ir.graph import Value


def expansion(b, node, inputs: list[Value | None], opset: int) -> tuple[list, int] | None:
    """(body nodes, the opset they are written in) for ``node``, or None when its schema has no function."""
    import onnx
    from onnx.backend.test.case.node import function_expand_helper
    domain = node.domain if node.domain not in ("", "ai.onnx") else ""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, domain)
    except (onnx.defs.SchemaError, TypeError):           # TypeError: a name that is not text
        return None
    function = None
    plain = [v for v in schema.function_opset_versions if v <= opset]
    context = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    node = _with_defaults(node, schema)
    if context and (not plain or max(context) >= max(plain)):
        function = onnx.FunctionProto()
        types = [_type_proto(v).SerializeToString() for v in inputs]
        try:
            text = schema.get_context_dependent_function_with_opset_version(max(context), node.SerializeToString(),
                                                                            types)
        except Exception:  # noqa: BLE001 - the builder refuses inputs it cannot type
            return None
        function.ParseFromString(text)
        if not function.node:
            return None
    elif plain:
        function = onnx.FunctionProto()
        function.ParseFromString(schema.get_function_with_opset_version(max(plain)))
    if function is None:
        return None
    b.counter += 1
    body = function_expand_helper(node, function, f"{node.op_type}_{b.counter}_")
    body_opset = next((o.version for o in function.opset_import if o.domain in ("", "ai.onnx")), opset)
    return body, body_opset


def _with_defaults(node, schema) -> Any:
    """A copy of ``node`` with every attribute the schema gives a default spelled out
    (the body refers to them by name)."""
    node = type(node).FromString(node.SerializeToString())
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value and attr.default_value.type:
            node.attribute.append(attr.default_value)
    return node


def _type_proto(v: Value | None):
    import onnx
    from minic.frontend.onnx_builder import onnx_elem_type
    if v is None:
        return onnx.TypeProto()
    dims = [d if isinstance(d, int) else str(d) for d in v.type.shape]
    return onnx.helper.make_tensor_type_proto(onnx_elem_type(v.type.dtype), dims)
