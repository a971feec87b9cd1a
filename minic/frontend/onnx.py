"""ONNX ModelProto → minic Graph.

Initializers become constants; each ONNX node becomes one or a few minic nodes.  The
converters live in families (``onnx_ops.py``: elementwise, reductions, layout;
``onnx_windows.py``: Conv and the pools; ...), each exporting a plain dict ``CONVERTERS``
of op type -> converter; this driver merges them (``CONVERTERS``, ``DOMAINS`` below), and
``onnx_builder.py`` holds the Builder they all use.  Inputs that an ONNX op takes
as tensors but minic takes as attributes (Reshape's shape, Slice's starts ...)
must be constants; the shape chains PyTorch's exporter builds
(Shape → Gather → Unsqueeze → Concat → Reshape) import as ``shape`` /
``reshape_dynamic`` nodes, which the fold-constant-gather pass folds away.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import (onnx_compose, onnx_constants, onnx_contrib, onnx_control, onnx_grid_sample, onnx_ml,
                            onnx_ops, onnx_ops_index, onnx_quant, onnx_recurrent, onnx_resize, onnx_sequence,
                            onnx_spectral, onnx_training, onnx_windows)
from minic.frontend.onnx_builder import (  # noqa: F401  (the importer's names, re-exported)
    ONNX_DTYPES, SCAN8_DOMAIN, Builder, Converter, NeedsConstantError, OnnxImportError, UnknownOpError, as_text,
    clean_name, onnx_elem_type, tensor_array)
from minic.frontend.onnx_checks import WINDOW_OPS, check_axis, check_flags, check_schema, check_window
from minic.frontend.onnx_file import read_onnx_file
from minic.frontend.onnx_functions import expansion
from minic.frontend.onnx_storage import STORAGE_OPS, Storage, refuse_use, storage_of
from minic.ir.graph import Graph, Value, constant
from minic.ir.types import DType, Dim, TensorType
from minic.limits import fewer_collections
from minic.registry import Registry

OPSETS = range(9, 29)                   # default-domain opsets the converters follow (checked by the conformance suite)


# One table of the families' converters (an op type in two families is refused).
CONVERTERS = Registry.merged("ONNX op", [f.CONVERTERS for f in (
    onnx_ops, onnx_windows, onnx_ops_index, onnx_constants, onnx_resize, onnx_quant, onnx_compose, onnx_recurrent,
    onnx_spectral, onnx_control, onnx_sequence, onnx_grid_sample)], UnsupportedError)
DOMAINS = {onnx_contrib.DOMAIN: onnx_contrib.CONTRIB,          # converters of the ops of other domains
           onnx_training.DOMAIN: onnx_training.TRAINING, onnx_ml.DOMAIN: onnx_ml.ML,
           SCAN8_DOMAIN: {"Scan": onnx_control.scan_with_batch_axis}}     # opset 8's Scan (see _upgraded)


def from_onnx_file(path: str | Path, dims: Mapping[str, int] | None = None,
                   bind: dict[str, np.ndarray] | None = None) -> Graph:
    """Read an .onnx file (external data resolved next to it) and import it (``dims``, ``bind``: see from_onnx)."""
    path = Path(path)
    return from_onnx(read_onnx_file(path), name=re.sub(r"\W", "_", path.stem), dims=dims, bind=bind)


def graph_input_names(model) -> list[str]:
    """The inputs a caller feeds: graph inputs that are not initializers (old
    exporters list every weight as an input too)."""
    initializers = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in initializers]


def input_value(inp, sizes: Mapping[str, int]) -> Value:
    """The minic Value of a graph input (a ValueInfoProto), its symbolic dims given ``sizes``."""
    st = storage_of(inp.type.tensor_type.elem_type) if inp.type.HasField("tensor_type") else None
    dims = tuple(sizes.get(d, d) if isinstance(d, str) else d for d in _dims(inp.type, inp.name))
    dtype = st.carrier if st is not None else _dtype(inp.type.tensor_type.elem_type, f"graph input '{inp.name}'")
    return Value(clean_name(inp.name), TensorType(dims, dtype))


def _dims(type_proto, name: str) -> tuple[Dim, ...]:
    kind = type_proto.WhichOneof("value")
    if kind is None:
        raise OnnxImportError(f"graph input '{name}' has no type")
    if kind != "tensor_type":
        raise UnsupportedError(f"graph input '{name}' is a {kind.replace('_type', '')} value (sequence/optional "
                               "inputs are imported at given lengths and element types: from_onnx's sequences=)")
    if not type_proto.tensor_type.HasField("shape"):
        raise OnnxImportError(f"graph input '{name}' has no shape")
    dims: list[Dim] = []
    for i, d in enumerate(type_proto.tensor_type.shape.dim):
        if d.HasField("dim_value"):
            if d.dim_value < 0:
                raise OnnxImportError(f"graph input '{name}': dim {i} is {d.dim_value}; a dim must be >= 0")
            dims.append(int(d.dim_value))
        elif d.dim_param:
            dims.append(re.sub(r"\W", "_", d.dim_param) if d.dim_param[0].isalpha() else f"d_{re.sub(r'[^0-9A-Za-z]', '_', d.dim_param)}")
        else:
            dims.append(f"{re.sub(r'[^0-9A-Za-z]', '_', name)}_{i}")
    return tuple(dims)


def _dtype(elem_type: int, what: str) -> DType:
    if elem_type not in ONNX_DTYPES:
        import onnx
        known = elem_type in onnx.TensorProto.DataType.values()
        name = onnx.TensorProto.DataType.Name(elem_type) if known else f"{elem_type} (not an ONNX element type)"
        raise UnsupportedError(f"{what}: element type {name} is not supported "
                               f"(minic has {', '.join(d.value for d in DType)})")
    return ONNX_DTYPES[elem_type]


def _default_opset(model) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return o.version
    return OPSETS.stop - 1              # no default-domain op in the model


@fewer_collections
def from_onnx(model, name: str | None = None, custom_ops: dict[tuple[str, str], Converter] | None = None,
              bind: dict[str, np.ndarray] | None = None, dims: Mapping[str, int] | None = None,
              sequences: Mapping[str, Any] | None = None, layout: list | None = None) -> Graph:
    """Import an ONNX ModelProto.  ``custom_ops`` maps (domain, op_type) to a converter
    for ops outside the default domain (see bridges/onnx's custom-op demonstration).
    ``bind`` turns the named graph inputs into constants with the given values
    (specialisation, for inputs minic needs as attributes: axes, pads, shapes); ``dims``
    gives symbolic input dims sizes (specialisation on shapes, minic/runtime/specialize.py).
    ``sequences`` gives sequence and optional inputs their lengths and element types, and
    ``layout`` (a list) receives how the outputs regroup into sequences (onnx_sequence.py)."""
    if model.ir_version < 1:
        raise OnnxImportError("the model has no IR version (ir_version 0): not a valid ONNX model")
    model = _upgraded(model)
    opset = _default_opset(model)
    if opset not in OPSETS:
        raise UnsupportedError(f"ONNX opset {opset} is not supported (minic reads opsets {OPSETS.start}-{OPSETS.stop - 1})")
    g = model.graph
    graph = Graph(name or re.sub(r"\W", "_", g.name or "onnx_model"), [], [])
    b = Builder(graph, opset, convert_nodes=_convert_nodes)
    for init in g.initializer:
        b.where = f"initializer '{init.name}'"
        st = storage_of(init.data_type)
        if st is None:
            _dtype(init.data_type, b.where)
        _add_constant(b, init.name, tensor_array(init, b.where), st)
    for inp in g.input:
        if inp.name in b.env:
            continue                      # an initializer listed as an input (old exporters)
        st = storage_of(inp.type.tensor_type.elem_type) if inp.type.HasField("tensor_type") else None
        if bind and inp.name in bind:
            _add_constant(b, inp.name, np.asarray(bind[inp.name]), st)
            continue
        if inp.type.WhichOneof("value") in ("sequence_type", "optional_type"):
            b.env[inp.name] = onnx_sequence.graph_input(b, inp, dict(sequences or {}))
            continue
        v = input_value(inp, dims or {})
        if st is not None:
            b.storage[v] = st
        graph.inputs.append(v)
        b.env[inp.name] = v
        b.input_names[v] = inp.name
    _convert_nodes(b, list(g.node), opset, custom_ops or {})
    for out in g.output:
        if out.name not in b.env:
            raise OnnxImportError(f"graph output '{out.name}' is not produced by any node")
        if isinstance(b.env[out.name], Value):
            _check_declared(out, b.env[out.name], b.storage.get(b.env[out.name]), specialized=bool(dims))
        onnx_sequence.graph_output(b, b.env[out.name], layout)
    return graph


def _add_constant(b: Builder, name: str, array: np.ndarray, st: Storage | None) -> None:
    """An initializer, or a graph input bound to ``array``: a constant (a storage type's carrier)."""
    v = constant(clean_name(name), array if st is None else st.to_carrier(array))
    if st is not None:
        b.storage[v] = st
    b.graph.constants.append(v)
    b.env[name] = v


def _check_declared(out, v: Value, stored, specialized: bool = False) -> None:
    """A graph output's declared dtype and static dims against what minic computes: a difference is refused,
    but a warning in a specialization, as ONNX Runtime warns at run time (dynamo-exported LSTMs need it)."""
    t = out.type.tensor_type if out.type.HasField("tensor_type") else None
    if t is None:
        return
    if t.elem_type and stored is None and ONNX_DTYPES.get(t.elem_type, v.type.dtype) != v.type.dtype:
        raise OnnxImportError(f"graph output '{out.name}' is declared {ONNX_DTYPES[t.elem_type].value}, "
                              f"but the graph computes {v.type}")
    if t.HasField("shape"):
        dims = t.shape.dim
        declared = [d.dim_value if d.HasField("dim_value") else None for d in dims]
        if len(dims) != v.type.rank or any(d is not None and isinstance(c, int) and d != c
                                           for d, c in zip(declared, v.type.shape)):
            shown = [d if d is not None else (dims[i].dim_param or "?") for i, d in enumerate(declared)]
            message = f"graph output '{out.name}' is declared of shape {shown}, but the graph computes {v.type}"
            if specialized and len(dims) == v.type.rank:
                import warnings
                warnings.warn(f"{message} (at these input sizes; ONNX Runtime warns the same)", stacklevel=2)
                return
            raise OnnxImportError(message)


def _upgraded(model):
    """A model below opset 9 brought up to opset 9 by ONNX's own version converter."""
    opset = _default_opset(model)
    if opset >= OPSETS.start:
        return model
    import onnx
    scans = [n for n in model.graph.node if n.op_type == "Scan" and n.domain in ("", "ai.onnx")]
    if scans:               # the converter drops their batch axis: onnx_control.scan_with_batch_axis converts them
        model = onnx.ModelProto.FromString(model.SerializeToString())
        for n in model.graph.node:
            if n.op_type == "Scan" and n.domain in ("", "ai.onnx"):
                n.domain = SCAN8_DOMAIN
        model.opset_import.append(onnx.helper.make_opsetid(SCAN8_DOMAIN, 1))
    try:
        return onnx.version_converter.convert_version(model, OPSETS.start)
    except Exception as e:  # noqa: BLE001 - the converter raises RuntimeError/ValueError/its own
        raise UnsupportedError(f"ONNX opset {opset} is not supported and ONNX's version converter cannot "
                               f"bring the model to opset {OPSETS.start}: {str(e).splitlines()[0][:200]}") from None


def _convert_nodes(b: Builder, nodes: list, opset: int, custom_ops: dict) -> None:
    """Convert ONNX nodes in order; an op minic has no converter for (or whose converter
    refuses this use of it) is replaced by the function body of its ONNX schema, when
    it has one (see onnx_functions.py)."""
    for i, node in enumerate(nodes):
        label = as_text(node.name) or f"#{i}"
        b.node, b.opset = node, opset
        b.where = f"node {label} ({node.domain + '.' if node.domain else ''}{node.op_type}, opset {opset})"
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        runtimes_own = None if domain else onnx_contrib.ort_onnx_domain_op(node.op_type, opset)    # no ONNX schema to check
        convert = (custom_ops.get((node.domain, node.op_type)) or DOMAINS.get(domain, {}).get(node.op_type)) if domain \
            else runtimes_own or CONVERTERS.get(node.op_type)
        if not domain and convert is not None and runtimes_own is None:
            check_schema(node, opset, b.where)
        for out_name in node.output:
            if out_name and out_name in b.env:
                what = ("a graph input" if b.env[out_name] in b.input_names else "an initializer"
                        if getattr(b.env[out_name], "is_constant", False) else "another node's output")
                raise OnnxImportError(f"{b.where}: writes '{out_name}', which is already {what} "
                                      "(an ONNX value is written once)")
        inputs = []
        for name_ in node.input:
            if name_ == "":
                inputs.append(None)                         # an omitted optional input
            elif name_ not in b.env:
                raise OnnxImportError(f"{b.where}: input '{name_}' is not defined before this node "
                                      "(a dangling input, or the graph has a cycle / is not in topological order)")
            else:
                inputs.append(b.env[name_])
        if not domain:
            check_flags(node, b.where)
        if any(isinstance(v, onnx_sequence.STRUCTURED) for v in inputs):      # a sequence or an optional
            convert = onnx_sequence.structured_use(b, node, convert)
        if not domain and inputs and isinstance(inputs[0], Value):
            if node.op_type in WINDOW_OPS:
                check_window(node, inputs[0].type.rank - 2, b.where)
            check_axis(node, inputs[0].type.rank, b.where)
        stored = next((b.storage[v] for v in inputs if v is not None and v in b.storage), None)
        if stored is not None and (domain or node.op_type not in STORAGE_OPS):
            raise refuse_use(b.where, stored)
        first = len(b.graph.nodes)
        refusal: UnsupportedError | None = None
        if convert is not None:
            try:
                outs = convert(b, inputs, _attributes(node, b.where))
            except UnsupportedError as e:
                refusal = e
        if convert is None or refusal is not None:
            body = expansion(b, node, inputs, opset) if not custom_ops.get((node.domain, node.op_type)) else None
            if body is None:
                if refusal is not None:
                    raise refusal
                supported = ", ".join(sorted(DOMAINS.get(domain, CONVERTERS) if domain else CONVERTERS))
                raise UnknownOpError(f"{b.where}: op is not supported; supported ops: {supported}")
            nodes_, body_opset = body
            where = b.where
            if convert is None:
                check_schema(node, opset, where)
            try:
                _convert_nodes(b, nodes_, body_opset, custom_ops)
            except NeedsConstantError as e:
                raise NeedsConstantError(f"{where}: in its ONNX function body: {e}", e.inputs) from None
            except UnsupportedError as e:
                raise (refusal or type(e)(f"{where}: in its ONNX function body: {e}")) from None
            outs = [b.env.get(name_) for name_ in node.output]
        for made in b.graph.nodes[first:]:           # where each minic node came from
            made.source, made.scope = label, onnx_scope(node.name)
        if node.op_type == "Identity" and stored is not None:
            b.storage[outs[0]] = stored
        for out_name, v in zip(node.output, outs):
            if out_name and v is not None:
                b.env[out_name] = _named(b, v, out_name) if isinstance(v, Value) else v


def onnx_scope(node_name: str | bytes) -> str:
    """The module path in a node name torch.onnx.export wrote: ``/layers.0/attention/wq/MatMul``
    -> ``layers.0.attention.wq``.  The path's parts are module attributes, up to the first part
    that is an op (CamelCase); ONNX Runtime's fused names (``fused /fc1/Gemm``,
    ``/norm/Mul_1/SimplifiedLayerNormFusion/``) keep the first node's path."""
    node_name = as_text(node_name)
    if "/" not in node_name:
        return ""
    parts = []
    for part in node_name[node_name.index("/"):].split("/")[1:]:
        if not part or part[0].isupper():
            break
        parts.append(part)
    return ".".join(parts)


def _named(b: Builder, v: Value, name: str) -> Value:
    """Give a value its ONNX name when no other value has it (readable printouts)."""
    name = clean_name(name)
    taken = b.taken()
    if name != v.name and not taken[name] and not v.is_constant and v not in b.graph.inputs:
        if taken[v.name] > 0:
            taken[v.name] -= 1
        taken[name] += 1
        v.name = name
    return v


def _attributes(node, where: str) -> dict[str, Any]:
    from onnx import helper
    out = {}
    for a in node.attribute:
        try:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode()
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [x.decode() for x in value]
        except (ValueError, TypeError) as e:       # UnicodeDecodeError is a ValueError
            raise OnnxImportError(f"{where}: attribute '{a.name}' is malformed: {e}") from None
        out[a.name] = tensor_array(value, f"{where}: attribute '{a.name}'") if a.type == a.TENSOR else value
    return out
