"""Bugs in production tools that random graphs keep finding, each documented in
docs/production-bugs.md.  The fuzzer reports a failing cell that matches one
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
    # makes it, and the checker then rejects the shapes of an op after it.
    KnownBug("onnx-ceil-mode-pool-shape", ("onnxruntime",),
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
