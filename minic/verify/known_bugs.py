"""Bugs in production tools that random graphs keep finding, each documented in
docs/production-bugs.md (those the attribute fuzz meets: ``KNOWN_ONNXRUNTIME``,
at the end).  The fuzzer reports a failing cell that matches one
as ``known`` (with the doc reference) instead of as a new failure, so that CI
stays a test of minic while the tools' bugs stay visible in every report.

A cell is ``known`` only when both hold: the graph contains the bug's trigger,
and the cell fails with the bug's own symptom (its status and a pattern of its
detail).  Any other failure of the same graph is a new failure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from minic.ir.graph import Graph, Node

if TYPE_CHECKING:
    from minic.verify.matrix import Cell

DOC = "docs/production-bugs.md"


@dataclass(frozen=True)
class KnownBug:
    anchor: str                              # the section of docs/production-bugs.md
    backends: tuple[str, ...]
    triggered: Callable[[Graph], bool]       # does this graph contain the trigger?
    symptom: re.Pattern                      # matches "status: detail" of a cell that shows the bug

    def matches(self, graph: Graph, cell: "Cell") -> bool:
        return (cell.backend in self.backends and self.symptom.search(f"{cell.status}: {cell.detail}") is not None
                and self.triggered(graph))

    @property
    def ref(self) -> str:
        return f"{DOC}#{self.anchor}"


def _dropped_window(node: Node) -> bool:
    """A ceil_mode pool whose last window would start past the input: PyTorch (and
    ONNX Runtime) drop it; ONNX shape inference before opset 22 keeps it."""
    if node.op not in ("max_pool2d", "avg_pool2d") or not node.attrs.ceil_mode:
        return False
    a = node.attrs
    x, y = node.inputs[0].type.shape, node.outputs[0].type.shape
    for i in range(2):
        span = x[2 + i] + a.padding[i] + a.padding[i + 2] - a.dilation[i] * (a.kernel[i] - 1) - 1
        if -(-span // a.stride[i]) + 1 != y[2 + i]:
            return True
    return False


def _ceil_window(node: Node) -> bool:
    """A ceil_mode pool that has a window more than floor mode would: its high end is padded."""
    if node.op not in ("max_pool2d", "avg_pool2d") or not node.attrs.ceil_mode:
        return False
    a = node.attrs
    x = node.inputs[0].type.shape
    for i in range(2):
        span = x[2 + i] + a.padding[i] + a.padding[i + 2] - a.dilation[i] * (a.kernel[i] - 1) - 1
        if span % a.stride[i]:
            return True
    return False


def _overhanging_average(node: Node) -> bool:
    """A ceil_mode average pool counting its padding whose last window reaches past the
    padded input: PyTorch and ONNX Runtime divide by the part inside, OpenVINO by the kernel."""
    if node.op != "avg_pool2d" or not node.attrs.ceil_mode or not node.attrs.count_include_pad:
        return False
    a = node.attrs
    x, y = node.inputs[0].type.shape, node.outputs[0].type.shape
    return any((y[2 + i] - 1) * a.stride[i] - a.padding[i] + a.dilation[i] * (a.kernel[i] - 1) + 1
               > x[2 + i] + a.padding[i + 2] for i in range(2))


KNOWN = (
    # ONNX shape inference declares the pool's output one window longer than the runtime
    # makes it, and the checker then rejects the shapes of an op after it: on every path
    # that exports through torch.onnx.export and ONNX's checker (bridges/onnx/export.py).
    KnownBug("onnx-ceil-mode-pool-shape", ("onnxruntime", "openvino", "tinygrad"),
             lambda g: any(_dropped_window(n) for n in g.nodes),
             re.compile(r"^crash: InferenceError: \[ShapeInferenceError\]")),
    # OpenVINO keeps that window in its ONNX reading, also at opset 22: an output of another shape.
    KnownBug("openvino-ceil-mode-pool-shape", ("openvino",),
             lambda g: any(_dropped_window(n) for n in g.nodes),
             re.compile(r"^mismatch: output \d+: shape ")),
    # OpenVINO divides a ceil_mode window that overhangs the padded input by the whole kernel.
    KnownBug("openvino-ceil-mode-avg-pool-divisor", ("openvino",),
             lambda g: any(_overhanging_average(n) for n in g.nodes),
             re.compile(r"^mismatch: output \d+\[")),
    # torch-mlir's StableHLO pads a ceil_mode max pool at both ends: IREE's values are other windows'.
    KnownBug("torch-mlir-stablehlo-ceil-mode-pool-padding", ("iree",),
             lambda g: any(_ceil_window(n) and n.op == "max_pool2d" for n in g.nodes),
             re.compile(r"^mismatch: output \d+\[")),
)


def known_bug(graph: Graph, cell: "Cell") -> KnownBug | None:
    """The documented bug that this failing cell of ``graph`` shows, if any."""
    for bug in KNOWN:
        if bug.matches(graph, cell):
            return bug
    return None


# --- bugs the attribute fuzz meets (minic/verify/fuzz_attributes.py) ---------------------
# There a case is an ONNX model, and ONNX Runtime's outputs are the reference; a documented
# bug of ONNX Runtime's is recognized by its trigger in the model and by undoing its symptom:
# the case is ``known`` only where minic agrees with ONNX Runtime's outputs once the bug is
# undone (its wrong values put back as the spec's, or the model run in a form the spec says
# is equal and the bug does not touch).

@dataclass(frozen=True)
class KnownOnnxRuntimeBug:
    anchor: str                              # the section of docs/production-bugs.md
    triggered: Callable[[object], bool]      # does this ModelProto contain the trigger?
    undo: Callable[[object, dict, list, list], list]   # (model, feeds, minic's outputs, ONNX Runtime's)
                                                       # -> ONNX Runtime's outputs without the bug

    @property
    def ref(self) -> str:
        return f"{DOC}#{self.anchor}"


def _elem_types(model) -> dict[str, int]:
    """The ONNX element type of every value of ``model``'s main graph that shape inference can type."""
    import onnx
    try:
        g = onnx.shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - a model inference refuses: its declared types only
        g = model.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.input, *g.value_info, *g.output]}
    types.update({t.name: t.data_type for t in g.initializer})
    return types


def _bool_mask_attention_mode_2(model) -> bool:
    """An Attention node whose qk_matmul_output (mode 2: the mask added) is wanted, with a bool mask."""
    from onnx import TensorProto, helper
    types = _elem_types(model)
    for node in model.graph.node:
        modes = [helper.get_attribute_value(a) for a in node.attribute if a.name == "qk_matmul_output_mode"]
        if (node.op_type == "Attention" and modes == [2] and len(node.input) > 3 and len(node.output) > 3
                and node.output[3] and types.get(node.input[3]) == TensorProto.BOOL):
            return True
    return False


def _lowest_as_minus_inf(model, feeds: dict, ours: list, theirs: list) -> list:
    """ONNX Runtime's outputs with its lowest finite float put back as -inf where minic has -inf."""
    import numpy as np
    out = []
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        if b.dtype.kind == "f" and a.shape == b.shape:
            b = np.where((b == np.finfo(b.dtype).min) & np.isneginf(a), b.dtype.type(-np.inf), b)
        out.append(b)
    return out


def _narrowing_castlike(model) -> bool:
    """A CastLike from float32 or float64 to float16 or bfloat16."""
    from onnx import TensorProto as T
    types = _elem_types(model)
    return any(node.op_type == "CastLike" and types.get(node.input[0]) in (T.FLOAT, T.DOUBLE)
               and types.get(node.input[1]) in (T.FLOAT16, T.BFLOAT16) for node in model.graph.node)


def _castlike_as_cast(model, feeds: dict, ours: list, theirs: list) -> list:
    """ONNX Runtime's outputs for the model with each CastLike written as the Cast it is (the spec:
    CastLike(x, like) = Cast(x, to=the element type of like))."""
    import onnx
    from onnx import helper
    from minic.verify.fuzz_attributes import _onnxruntime
    types = _elem_types(model)
    model = type(model).FromString(model.SerializeToString())
    for node in model.graph.node:
        if node.op_type == "CastLike" and types.get(node.input[1]):
            cast = helper.make_node("Cast", [node.input[0]], list(node.output), to=types[node.input[1]],
                                    **{a.name: helper.get_attribute_value(a) for a in node.attribute})
            node.CopyFrom(cast)
    return _onnxruntime(model.SerializeToString(), feeds) or theirs


KNOWN_ONNXRUNTIME = (
    # A False of a bool attn_mask becomes float-lowest instead of the spec's -inf.
    KnownOnnxRuntimeBug("ort-attention-bool-mask-lowest", _bool_mask_attention_mode_2, _lowest_as_minus_inf),
    # A CastLike to float16 of a float32 value, then ops that run in float32: its rounding is lost.
    KnownOnnxRuntimeBug("ort-castlike-to-float16-not-rounded", _narrowing_castlike, _castlike_as_cast),
)
