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


KNOWN = (
    # ONNX shape inference declares the pool's output one window longer than the runtime
    # makes it, and the checker then rejects the shapes of an op after it.
    KnownBug("onnx-ceil-mode-pool-shape", ("onnxruntime",),
             lambda g: any(_dropped_window(n) for n in g.nodes),
             re.compile(r"^crash: InferenceError: \[ShapeInferenceError\]")),
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
# the case is ``known`` only where minic agrees with ONNX Runtime's outputs once the bug's own
# wrong values are put back as the spec's.

@dataclass(frozen=True)
class KnownOnnxRuntimeBug:
    anchor: str                              # the section of docs/production-bugs.md
    triggered: Callable[[object], bool]      # does this ModelProto contain the trigger?
    as_spec: Callable[[list, list], list]    # (minic's outputs, ONNX Runtime's) -> ONNX Runtime's, the bug undone

    @property
    def ref(self) -> str:
        return f"{DOC}#{self.anchor}"


def _bool_mask_attention_mode_2(model) -> bool:
    """An Attention node whose qk_matmul_output (mode 2: the mask added) is wanted, with a bool mask."""
    from onnx import TensorProto, helper
    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    types.update({t.name: t.data_type for t in model.graph.initializer})
    for node in model.graph.node:
        modes = [helper.get_attribute_value(a) for a in node.attribute if a.name == "qk_matmul_output_mode"]
        if (node.op_type == "Attention" and modes == [2] and len(node.input) > 3 and len(node.output) > 3
                and node.output[3] and types.get(node.input[3]) == TensorProto.BOOL):
            return True
    return False


def _lowest_as_minus_inf(ours: list, theirs: list) -> list:
    """ONNX Runtime's outputs with its lowest finite float put back as -inf where minic has -inf."""
    import numpy as np
    out = []
    for a, b in zip(ours, theirs):
        a, b = np.asarray(a), np.asarray(b)
        if b.dtype.kind == "f" and a.shape == b.shape:
            b = np.where((b == np.finfo(b.dtype).min) & np.isneginf(a), b.dtype.type(-np.inf), b)
        out.append(b)
    return out


KNOWN_ONNXRUNTIME = (
    # A False of a bool attn_mask becomes float-lowest instead of the spec's -inf.
    KnownOnnxRuntimeBug("ort-attention-bool-mask-lowest", _bool_mask_attention_mode_2, _lowest_as_minus_inf),
)
