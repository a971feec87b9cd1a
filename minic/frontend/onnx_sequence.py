"""ONNX sequences and optionals, resolved at import: minic's graphs hold tensors only.

A sequence whose length is known at import is a Python tuple of tensor Values in
the importer's environment (``Builder.env``), not a new IR type; an optional is
its value (a Value or a tuple) or ``EMPTY``.  The sequence ops then move Values
between tuples (SequenceInsert, SequenceAt ...) or make ordinary nodes from them
(ConcatFromSequence, SplitToSequence); SequenceMap converts its body once per
element, as onnx_control.py inlines a Loop's body once per iteration.  Positions
must be known at import (a position computed from a graph input makes the backend
specialise on that input's value, as for any shape-deciding input).

A graph input of sequence or optional type is imported at a *signature*, the
``sequences`` parameter of ``from_onnx`` (as ``dims`` gives symbolic sizes):
a tuple of TensorTypes for a sequence (one graph input per element), a
TensorType for an optional tensor, None for an empty optional.  A graph output
of such a type is flattened into the graph's outputs; ``layout`` says how to
regroup them (``regroup``; the ONNX backend, onnx_backend.py, does both).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose
from minic.frontend.onnx_builder import (ONNX_DTYPES, Builder, Converter, OnnxImportError, clean_name, converter_table,
                                         optional)
from minic.frontend.onnx_control import inline
from minic.ir.graph import Value
from minic.ir.types import DType, TensorType

CONVERTERS = converter_table()
converts = CONVERTERS.add


class _Empty:
    """The value of an optional that holds nothing."""

    def __repr__(self) -> str:
        return "EMPTY"


EMPTY = _Empty()
STRUCTURED = (tuple, _Empty)        # the environment's values that are not tensors

# Ops that take sequences or optionals as inputs (Identity passes one on, If/Loop/Scan bodies see them by name).
TAKES_STRUCTURED = {"SequenceAt", "SequenceInsert", "SequenceErase", "SequenceLength", "ConcatFromSequence",
                    "SequenceMap", "Optional", "OptionalHasElement", "OptionalGetElement", "Loop", "If", "Identity"}


def structured_use(b: Builder, node, convert: Converter | None) -> Converter | None:
    """The converter of ``node``, some of whose inputs are sequences or optionals (onnx.py's
    _convert_nodes asks): Identity passes its input on; an op that takes tensors only refuses."""
    if node.op_type == "Identity" and not node.domain:
        return lambda b_, x, a: [x[0]]
    if node.domain or node.op_type not in TAKES_STRUCTURED:
        raise OnnxImportError(f"{b.where}: an input is a sequence or optional value, which this op does not take")
    return convert


def _sequence(b: Builder, v: Any, what: str = "input 0", nonempty: bool = False) -> tuple[Value, ...]:
    if not isinstance(v, tuple):
        raise OnnxImportError(f"{b.where}: {what} must be a sequence, got {'an empty optional' if v is EMPTY else v}")
    if nonempty and not v:
        raise OnnxImportError(f"{b.where}: the sequence is empty")
    return v


def _position(b: Builder, v: Value | None, n: int, default: int, hi: int) -> int:
    """A position given as a scalar known at import, negative counting from the back, in [-n, hi]."""
    if v is None:
        return default
    data = b.need_known(v, "the position")
    if np.size(data) != 1:
        raise OnnxImportError(f"{b.where}: the position must hold one element, got shape {list(np.shape(data))}")
    p = int(np.asarray(data).reshape(-1)[0])
    if not -n <= p <= hi:
        raise OnnxImportError(f"{b.where}: position {p} is outside [{-n}, {hi}] for a sequence of {n}")
    return p + n if p < 0 else p


@converts("SequenceEmpty")
def _sequence_empty(b: Builder, x: list, a: dict) -> list:
    return [()]


@converts("SequenceConstruct")
def _sequence_construct(b: Builder, x: list, a: dict) -> list:
    if len({v.type.dtype for v in x}) > 1:
        raise OnnxImportError(f"{b.where}: the elements of a sequence have one element type, got "
                              f"{sorted({v.type.dtype.value for v in x})}")
    return [tuple(x)]


@converts("SequenceAt")
def _sequence_at(b: Builder, x: list, a: dict) -> list:
    seq = _sequence(b, x[0], nonempty=True)
    return [seq[_position(b, x[1], len(seq), 0, len(seq) - 1)]]


@converts("SequenceInsert")
def _sequence_insert(b: Builder, x: list, a: dict) -> list:
    seq, tensor = _sequence(b, x[0]), x[1]
    if seq and tensor.type.dtype != seq[0].type.dtype:
        raise OnnxImportError(f"{b.where}: inserts a {tensor.type.dtype.value} tensor into a sequence of "
                              f"{seq[0].type.dtype.value}")
    p = _position(b, optional(x, 2), len(seq), len(seq), len(seq))
    return [seq[:p] + (tensor,) + seq[p:]]


@converts("SequenceErase")
def _sequence_erase(b: Builder, x: list, a: dict) -> list:
    seq = _sequence(b, x[0], nonempty=True)
    p = _position(b, optional(x, 1), len(seq), len(seq) - 1, len(seq) - 1)
    return [seq[:p] + seq[p + 1:]]


@converts("SequenceLength")
def _sequence_length(b: Builder, x: list, a: dict) -> list:
    return [b.const(np.asarray(len(_sequence(b, x[0])), np.int64))]


@converts("ConcatFromSequence")
def _concat_from_sequence(b: Builder, x: list, a: dict) -> list:
    seq = _sequence(b, x[0], nonempty=True)
    new_axis, rank = int(a.get("new_axis", 0)), seq[0].type.rank
    axis, out_rank = int(a["axis"]), rank + new_axis
    if not -out_rank <= axis < out_rank:
        raise OnnxImportError(f"{b.where}: attribute 'axis' is {axis}; it must lie in [{-out_rank}, {out_rank - 1}]")
    axis %= out_rank
    parts = [b.one("unsqueeze", v, axes=(axis,)) for v in seq] if new_axis else list(seq)
    return [parts[0] if len(parts) == 1 else b.one("concat", *parts, axis=axis)]


@converts("SplitToSequence")
def _split_to_sequence(b: Builder, x: list, a: dict) -> list:
    v, split = x[0], optional(x, 1)
    axis = int(a.get("axis", 0)) % max(v.type.rank, 1)
    size = compose.static(b, v, axis, "SplitToSequence")
    if split is None:
        sizes = [1] * size
    else:
        given = np.asarray(b.need_known(split, "the split"))
        if given.ndim == 0:
            step = int(given)
            if step <= 0:
                raise OnnxImportError(f"{b.where}: the split size must be > 0, got {step}")
            sizes = [min(step, size - s) for s in range(0, size, step)]
        else:
            sizes = [int(s) for s in given.reshape(-1)]
            if any(s < 0 for s in sizes) or sum(sizes) != size:
                raise OnnxImportError(f"{b.where}: the split {sizes} does not add up to the axis' {size}")
    pieces, start = [], 0
    for s in sizes:
        pieces.append(b.one("slice", v, axes=(axis,), starts=(start,), ends=(start + s,), steps=(1,)))
        start += s
    if split is None and not a.get("keepdims", 1):
        pieces = [b.one("squeeze", p, axes=(axis,)) for p in pieces]
    return [tuple(pieces)]


@converts("SequenceMap")
def _sequence_map(b: Builder, x: list, a: dict) -> list:
    body = a["body"]
    lengths = {len(v) for v in x if isinstance(v, tuple)}
    _sequence(b, x[0])
    if len(lengths) != 1:
        raise OnnxImportError(f"{b.where}: the input sequences have different lengths {sorted(lengths)}")
    results = []
    for i in range(lengths.pop()):
        bound = [v[i] if isinstance(v, tuple) else v for v in x]
        results.append(inline(b, body, {p.name: v for p, v in zip(body.input, bound)}))
    return [tuple(r[j] for r in results) for j in range(len(body.output))]


@converts("Optional")
def _optional(b: Builder, x: list, a: dict) -> list:
    return [x[0] if x and x[0] is not None else EMPTY]


@converts("OptionalHasElement")
def _optional_has_element(b: Builder, x: list, a: dict) -> list:
    return [b.const(np.asarray(bool(x) and x[0] is not None and x[0] is not EMPTY))]


@converts("OptionalGetElement")
def _optional_get_element(b: Builder, x: list, a: dict) -> list:
    if x[0] is EMPTY:
        raise OnnxImportError(f"{b.where}: the optional is empty")
    return [x[0]]


# --- graph inputs and outputs -------------------------------------------------------


def graph_input(b: Builder, inp, signatures: dict[str, Any]) -> Any:
    """The environment's value of a sequence or optional graph input at its signature
    (see the module's docstring), its elements new graph inputs ``name.0``, ``name.1`` ..."""
    kind = inp.type.WhichOneof("value")
    if inp.name not in signatures:
        raise UnsupportedError(f"graph input '{inp.name}' is a {kind.replace('_type', '')} value: minic imports it "
                               "at the length and element types of a given value (from_onnx's 'sequences')")
    sig, declared = signatures[inp.name], inp.type
    if kind == "optional_type":
        if sig is None:
            return EMPTY
        declared = declared.optional_type.elem_type
        kind = declared.WhichOneof("value")
    if kind == "sequence_type" and isinstance(sig, tuple) and all(isinstance(t, TensorType) for t in sig):
        elem = declared.sequence_type.elem_type.tensor_type.elem_type
        return tuple(_element(b, inp.name, f"{clean_name(inp.name)}.{i}", t, elem) for i, t in enumerate(sig))
    if kind == "tensor_type" and isinstance(sig, TensorType):
        return _element(b, inp.name, clean_name(inp.name), sig, declared.tensor_type.elem_type)
    raise OnnxImportError(f"graph input '{inp.name}' is declared {kind.replace('_type', '')}, given {sig!r}")


def _element(b: Builder, onnx_name: str, name: str, t: TensorType, elem_type: int) -> Value:
    if elem_type and ONNX_DTYPES.get(elem_type) != t.dtype:
        raise OnnxImportError(f"graph input '{onnx_name}' holds {ONNX_DTYPES.get(elem_type, elem_type)} "
                              f"elements, given {t.dtype.value}")
    v = Value(name, t)
    b.graph.inputs.append(v)
    return v


def graph_output(b: Builder, v: Any, layout: list | None) -> None:
    """Append a graph output's value to the graph's outputs, and its entry to ``layout``: 'tensor',
    'empty' (an empty optional: no graph output), or the length of a sequence.  A sequence's
    element that is a graph input, a constant or an output already is copied (a compiled
    model's outputs are buffers of their own)."""
    if layout is not None:
        layout.append("tensor" if isinstance(v, Value) else "empty" if v is EMPTY else len(v))
    if isinstance(v, Value):
        b.graph.outputs.append(v)
        return
    for e in [] if v is EMPTY else v:
        taken = set(b.graph.outputs) | set(b.graph.inputs) | set(b.graph.constants)
        b.graph.outputs.append(b.one("identity", e) if e in taken else e)


def signature(value: Any) -> Any:
    """The signature (from_onnx's ``sequences``) of a run-time sequence (a list of arrays),
    optional (None, or its value) or tensor."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return tuple(signature(np.asarray(e)) for e in value)
    value = np.asarray(value)
    return TensorType(tuple(value.shape), DType.of(value.dtype))


def flatten(value: Any) -> list[np.ndarray]:
    """A run-time sequence or optional as the compiled model's inputs, in order."""
    return [] if value is None else [np.asarray(e) for e in value] if isinstance(value, (list, tuple)) \
        else [np.asarray(value)]


def regroup(outputs: tuple, layout: list) -> tuple:
    """A compiled model's outputs grouped back by ``layout`` (see graph_output): a list per
    sequence, None for an empty optional."""
    grouped, k = [], 0
    for entry in layout:
        if entry == "tensor":
            grouped.append(outputs[k])
            k += 1
        elif entry == "empty":
            grouped.append(None)
        else:
            grouped.append(list(outputs[k:k + entry]))
            k += entry
    return tuple(grouped)
