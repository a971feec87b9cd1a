"""What every ONNX converter sees: the Builder (the graph being built, one ``emit`` to add a
node), the importer's errors and element types, and the small attribute helpers the converter
families share.  It sits below them all: ``onnx.py`` (the driver) merges the families' tables.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from minic.errors import UnsupportedError, UserError
from minic.ir import ops
from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType
from minic.limits import ensure_values_fit
from minic.registry import Registry


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
    convert_nodes: Callable[..., None] | None = None        # the driver's node loop (onnx.py), for subgraphs

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

    def fresh_symbol(self, hint: str) -> str:
        """A fresh dim symbol for a size only the data decides (nonzero's count, a loop's iterations)."""
        return self.fresh(hint).replace(".", "_")

    def emit(self, op: str, inputs: list[Value], **attrs: Any) -> list[Value]:
        """Append one minic node (``make_node``: its outputs named ``op.N``); errors name the ONNX node."""
        try:
            node = make_node(op, inputs, attrs, names=lambda _: self.fresh(op))
        except UserError as e:
            raise OnnxImportError(f"{self.where}: {e}") from None
        self.graph.nodes.append(node)
        self.producer.update((v, node) for v in node.outputs)
        return node.outputs

    def one(self, op: str, *inputs: Value, **attrs: Any) -> Value:
        return self.emit(op, list(inputs), **attrs)[0]

    def many(self, op: str, *inputs: Value, **attrs: Any) -> list[Value]:
        return self.emit(op, list(inputs), **attrs)

    def const(self, data: Any, like: Value | None = None) -> Value:
        """A new constant; with ``like``, of that value's dtype."""
        array = np.asarray(data, dtype=like.type.dtype.numpy if like is not None else None)
        v = constant(self.fresh("c"), array)
        self.graph.constants.append(v)
        return v

    def cast(self, v: Value, dtype: DType) -> Value:
        """``v`` in ``dtype``: itself when it has that dtype, else a cast."""
        return v if v.type.dtype == dtype else self.one("cast", v, dtype=dtype)

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

    def scalar(self, v: Value | None, what: str, default: Any = None) -> Any:
        """The first element of ``v`` (a scalar input, known at compile time) as a Python number;
        ``default`` for an omitted input."""
        return default if v is None else self.need_known(v, what).reshape(-1)[0].item()


def tensor_array(proto, where: str) -> np.ndarray:
    """The numpy array of a TensorProto (an initializer, a Constant's value); a malformed
    one (a file corrupted on disk) is a user error naming where it is."""
    from onnx import numpy_helper
    try:
        return numpy_helper.to_array(proto)
    except (ValueError, TypeError, KeyError) as e:       # KeyError: a data type onnx does not know
        raise OnnxImportError(f"{where} is malformed: {e}") from None


SCAN8_DOMAIN = "minic.scan8"        # opset 8's Scan nodes, kept from ONNX's version converter (onnx._upgraded)


def as_text(name: str | bytes) -> str:
    """A name from the file as text: a corrupt file can hold names that are not UTF-8
    (protobuf then hands over bytes)."""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


def clean_name(name: str) -> str:
    """An ONNX name as a minic value name: letters, digits, '_' and '.' only
    (``/fc1/Gemm_output_0`` -> ``fc1.Gemm_output_0``, ``onnx::MatMul_7`` -> ``onnx.MatMul_7``)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.]+", ".", as_text(name)).strip(".")
    return cleaned or "v"


def converter_table() -> Registry:
    """A family's table, op type -> converter (``converts = CONVERTERS.add`` registers one);
    onnx.py merges the families' tables."""
    return Registry("ONNX op", UnsupportedError)


def optional(x: list, i: int) -> Value | None:
    """Input ``i`` of a node, None where it is omitted (empty, or past the inputs given)."""
    return x[i] if i < len(x) else None


def ints(a) -> tuple[int, ...]:
    """An attribute or a known tensor as a tuple of Python ints."""
    return tuple(int(x) for x in np.asarray(a).ravel())


def axes_in_range(b: Builder, axes, rank: int, what: str) -> tuple[int, ...]:
    """A list of axes in the spec's range [-rank, rank - 1], as 0 .. rank - 1: taken modulo the
    rank, axes=[1000] would silently pick another axis."""
    axes = ints(axes)
    if any(not -rank <= ax < rank for ax in axes):
        raise OnnxImportError(f"{b.where}: {what} is {list(axes)}; for an input of rank {rank} each entry "
                              f"must lie in [{-rank}, {rank - 1}]")
    return tuple(ax % rank for ax in axes)
