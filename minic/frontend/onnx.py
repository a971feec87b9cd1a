"""ONNX ModelProto → minic Graph.

Initializers become constants; each ONNX node becomes one or a few minic nodes
(``onnx_ops.py`` holds one converter per op type).  Inputs that an ONNX op takes
as tensors but minic takes as attributes (Reshape's shape, Slice's starts ...)
must be constants; the shape chains PyTorch's exporter builds
(Shape → Gather → Unsqueeze → Concat → Reshape) import as ``shape`` /
``reshape_dynamic`` nodes, which the fold-constant-gather pass folds away.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from minic.errors import UnsupportedError, UserError
from minic.frontend.onnx_file import read_onnx_file
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType, Dim, TensorType
from minic.limits import check_dims, ensure_values_fit, fewer_collections
from minic.frontend.onnx_storage import STORAGE_OPS, refuse_use, storage_of

OPSETS = range(9, 29)                   # default-domain opsets the converters follow (checked by the conformance suite)

# ONNX TensorProto element types minic has.
ONNX_DTYPES = {1: DType.f32, 2: DType.u8, 3: DType.i8, 4: DType.u16, 5: DType.i16, 6: DType.i32, 7: DType.i64,
               9: DType.bool, 10: DType.f16, 11: DType.f64, 12: DType.u32, 13: DType.u64, 16: DType.bf16}


def onnx_elem_type(dtype: DType) -> int:
    """The ONNX TensorProto element type of a minic dtype."""
    return next(k for k, d in ONNX_DTYPES.items() if d == dtype)


class OnnxImportError(UserError):
    """The ONNX model cannot be imported (names the node, op and opset)."""


class UnknownOpError(UnsupportedError):
    """An op minic has no converter for: refused at any input size (api._load_onnx)."""


class NeedsConstantError(UnsupportedError):
    """An input that minic takes as an attribute (axes, pads, a shape) is computed at run time;
    ``inputs`` names the graph inputs it is computed from (a caller may specialise on them)."""

    def __init__(self, message: str, inputs: frozenset[str] = frozenset()):
        super().__init__(message)
        self.inputs = inputs


def from_onnx_file(path: str | Path, dims: Mapping[str, int] | None = None,
                   bind: dict[str, np.ndarray] | None = None) -> Graph:
    """Read an .onnx file (external data resolved next to it) and import it (``dims``, ``bind``: see from_onnx)."""
    path = Path(path)
    return from_onnx(read_onnx_file(path), name=re.sub(r"\W", "_", path.stem), dims=dims, bind=bind)


Converter = Callable[["Builder", Any, dict[str, Any]], list[Value]]


@dataclass
class Builder:
    """What a converter sees: the graph being built and helpers to add to it."""
    graph: Graph
    opset: int
    env: dict[str, Value] = field(default_factory=dict)     # ONNX value name -> minic value
    counter: int = 0
    where: str = ""                                         # the current node, for messages
    node: Any = None                                        # the ONNX NodeProto being converted
    producer: dict[Value, Node] = field(default_factory=dict)
    values: dict[Value, np.ndarray] = field(default_factory=dict)   # what known() has computed
    input_names: dict[Value, str] = field(default_factory=dict)     # graph input -> its ONNX name
    storage: dict[Value, Any] = field(default_factory=dict)         # carrier -> its storage type (onnx_storage)
    names: Counter = field(default_factory=Counter)         # value name -> values that have it (see taken)
    counted: tuple[int, int, int] = (0, 0, 0)                # inputs, constants, nodes counted in names
    unroll_limit: int | None = None                         # while unrolling control flow (onnx_control)

    def taken(self) -> Counter:
        """How many of the graph's values have each name.  Kept up to date as the graph
        grows (values are only ever appended while importing), so naming every value
        costs O(1) each instead of a walk over the whole graph each (quadratic)."""
        g, (ni, nc, nn) = self.graph, self.counted
        if len(g.inputs) < ni or len(g.constants) < nc or len(g.nodes) < nn:
            self.names, ni, nc, nn = Counter(), 0, 0, 0           # something was removed: count afresh
        self.names.update(v.name for v in g.inputs[ni:])
        self.names.update(v.name for v in g.constants[nc:])
        self.names.update(v.name for node in g.nodes[nn:] for v in node.outputs)
        self.counted = (len(g.inputs), len(g.constants), len(g.nodes))
        return self.names

    def fresh(self, hint: str = "t") -> str:
        self.counter += 1
        return f"{hint}.{self.counter}"

    def emit(self, op: str, inputs: list[Value], **attrs: Any) -> list[Value]:
        """Append one minic node; its output types come from the op's inference."""
        opdef = ops.get(op)
        try:
            attr_obj = opdef.make_attrs(**attrs)
            types = opdef.infer(attr_obj, [v.type for v in inputs])
            for t in types:
                check_dims(t.shape, f"{op} gives {t}:")
        except UserError as e:
            raise OnnxImportError(f"{self.where}: {e}") from None
        node = Node(op, list(inputs), [Value(self.fresh(op), t) for t in types], attr_obj)
        self.graph.nodes.append(node)
        self.producer.update((v, node) for v in node.outputs)
        return node.outputs

    def one(self, op: str, *inputs: Value, **attrs: Any) -> Value:
        return self.emit(op, list(inputs), **attrs)[0]

    def const(self, data: Any, like: Value | None = None) -> Value:
        """A new constant; with ``like``, of that value's dtype."""
        array = np.asarray(data, dtype=like.type.dtype.numpy if like is not None else None)
        v = constant(self.fresh("c"), array)
        self.graph.constants.append(v)
        return v

    def known(self, v: Value | None) -> np.ndarray | None:
        """The data of a value known at import time, else None: a constant, or a
        value computed from constants and static shapes only (the shape programs
        of exporters and of ONNX's function bodies), run by the ops' references."""
        # Depth-first over producers with a stack of its own (a chain of any length).
        unknown: set[Value] = set()                       # values found not to be computable
        todo = [v]
        while todo:
            x = todo[-1]
            if x is None or x.is_constant or x in self.values or x in unknown:
                todo.pop()
                continue
            node = self.producer.get(x)
            if node is None:                              # a graph input
                unknown.add(x)
                todo.pop()
                continue
            if node.op != "shape":
                pending = [i for i in node.inputs if i is not None and not i.is_constant
                           and i not in self.values and i not in unknown]
                if pending:                               # its inputs first
                    todo.extend(pending)
                    continue
            todo.pop()
            results = self._evaluate(node)
            if results is None:
                unknown.update(node.outputs)
                continue
            for value, r in zip(node.outputs, results):
                self.values[value] = np.asarray(r, dtype=value.type.dtype.numpy)
        if v is None:
            return None
        return v.data if v.is_constant else self.values.get(v)

    def _evaluate(self, node: Node) -> tuple | None:
        """``node``'s results from its inputs' known data, or None when they cannot be had now."""
        if node.op == "shape":
            shape = node.inputs[0].type.shape
            return (np.asarray(shape, np.int64),) if all(isinstance(d, int) for d in shape) else None
        args = [None if x is None else x.data if x.is_constant else self.values.get(x) for x in node.inputs]
        if any(a is None for a in args):                  # an omitted optional input counts as unknown
            return None
        try:
            ensure_values_fit(node.outputs, {}, f"{node.op} at import")
            out = ops.get(node.op).reference(node.attrs, *args)
        except Exception:  # noqa: BLE001 - not computable now (or too big): run time will say why
            return None
        return out if isinstance(out, tuple) else (out,)

    def sources(self, v: Value | None) -> frozenset[str]:
        """The ONNX names of the graph inputs whose *data* ``v`` is computed from (a ``shape``
        node reads its input's dims only: binding the dims, not the data, folds it)."""
        seen, todo, found = set(), [v], set()
        while todo:
            x = todo.pop()
            if x is None or id(x) in seen:
                continue
            seen.add(id(x))
            if x in self.input_names:
                found.add(self.input_names[x])
            elif x in self.producer and self.producer[x].op != "shape":
                todo.extend(self.producer[x].inputs)
        return frozenset(found)

    def entries(self, v: Value | None, what: str) -> tuple:
        """The entries of a small i64 vector known at compile time: a constant's
        values, or dims read off tensor types through a Shape -> Gather -> Concat
        chain (so ``x[:, :T]`` keeps its symbolic ``T``)."""
        data = self.known(v)
        if data is not None:
            return tuple(int(e) for e in data.reshape(-1))
        from minic.passes.shape_chains import ShapeValues
        found = ShapeValues(self.graph.producers()).of(v) if v is not None else None
        if found is None:
            raise NeedsConstantError(f"{self.where}: {what} must be known at compile time for minic", self.sources(v))
        return tuple(found)

    def need_known(self, v: Value | None, what: str) -> np.ndarray:
        data = self.known(v)
        if data is None:
            raise NeedsConstantError(f"{self.where}: {what} must be a constant for minic", self.sources(v))
        return data


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


def tensor_array(proto, where: str) -> np.ndarray:
    """The numpy array of a TensorProto (an initializer, a Constant's value); a malformed
    one (a file corrupted on disk) is a user error naming where it is."""
    from onnx import numpy_helper
    try:
        return numpy_helper.to_array(proto)
    except (ValueError, TypeError, KeyError) as e:       # KeyError: a data type onnx does not know
        raise OnnxImportError(f"{where} is malformed: {e}") from None


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
    from minic.frontend.onnx_ops import CONVERTERS
    if model.ir_version < 1:
        raise OnnxImportError("the model has no IR version (ir_version 0): not a valid ONNX model")
    model = _upgraded(model)
    opset = _default_opset(model)
    if opset not in OPSETS:
        raise UnsupportedError(f"ONNX opset {opset} is not supported (minic reads opsets {OPSETS.start}-{OPSETS.stop - 1})")
    g = model.graph
    graph = Graph(name or re.sub(r"\W", "_", g.name or "onnx_model"), [], [])
    b = Builder(graph, opset)
    for init in g.initializer:
        b.where = f"initializer '{init.name}'"
        st = storage_of(init.data_type)
        if st is None:
            _dtype(init.data_type, b.where)
        array = tensor_array(init, b.where)
        v = constant(clean_name(init.name), array if st is None else st.to_carrier(array))
        if st is not None:
            b.storage[v] = st
        graph.constants.append(v)
        b.env[init.name] = v
    for inp in g.input:
        if inp.name in b.env:
            continue                      # an initializer listed as an input (old exporters)
        st = storage_of(inp.type.tensor_type.elem_type) if inp.type.HasField("tensor_type") else None
        if bind and inp.name in bind:
            data = np.asarray(bind[inp.name])
            v = constant(clean_name(inp.name), data if st is None else st.to_carrier(data))
            graph.constants.append(v)
            b.env[inp.name] = v
            if st is not None:
                b.storage[v] = st
            continue
        if inp.type.WhichOneof("value") in ("sequence_type", "optional_type"):
            from minic.frontend.onnx_sequence import graph_input
            b.env[inp.name] = graph_input(b, inp, dict(sequences or {}))
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
        from minic.frontend.onnx_sequence import graph_output
        if isinstance(b.env[out.name], Value):
            _check_declared(out, b.env[out.name], b.storage.get(b.env[out.name]), specialized=bool(dims))
        graph_output(b, b.env[out.name], layout)
    return graph


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


SCAN8_DOMAIN = "minic.scan8"        # opset 8's Scan nodes, kept from ONNX's version converter (see below)


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
    from minic.frontend.onnx_checks import WINDOW_OPS, check_axis, check_flags, check_schema, check_window
    from minic.frontend.onnx_functions import expansion
    from minic.frontend.onnx_contrib import ort_onnx_domain_op
    from minic.frontend.onnx_ops import CONVERTERS, DOMAINS
    from minic.frontend.onnx_sequence import STRUCTURED, structured_use
    for i, node in enumerate(nodes):
        label = _text(node.name) or f"#{i}"
        b.node, b.opset = node, opset
        b.where = f"node {label} ({node.domain + '.' if node.domain else ''}{node.op_type}, opset {opset})"
        domain = node.domain if node.domain not in ("", "ai.onnx") else ""
        runtimes_own = None if domain else ort_onnx_domain_op(node.op_type, opset)    # no ONNX schema to check
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
        if any(isinstance(v, STRUCTURED) for v in inputs):      # a sequence or an optional
            convert = structured_use(b, node, convert)
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
    node_name = _text(node_name)
    if "/" not in node_name:
        return ""
    parts = []
    for part in node_name[node_name.index("/"):].split("/")[1:]:
        if not part or part[0].isupper():
            break
        parts.append(part)
    return ".".join(parts)


def _text(name: str | bytes) -> str:
    """A name from the file as text: a corrupt file can hold names that are not UTF-8
    (protobuf then hands over bytes)."""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def clean_name(name: str) -> str:
    """An ONNX name as a minic value name: letters, digits, '_' and '.' only
    (``/fc1/Gemm_output_0`` -> ``fc1.Gemm_output_0``, ``onnx::MatMul_7`` -> ``onnx.MatMul_7``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.]+", ".", _text(name)).strip(".")
    return cleaned or "v"


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
