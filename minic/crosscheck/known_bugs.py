"""Bugs in production tools that random graphs keep finding, each documented in
docs/production-bugs.md.  The fuzzer reports a failing cell that matches one
as ``known`` (with the doc reference) instead of as a new failure, so that CI
stays a test of minic while the tools' bugs stay visible in every report.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from minic.ir.graph import Graph, Node

DOC = "docs/production-bugs.md"


@dataclass(frozen=True)
class KnownBug:
    anchor: str                              # the section of docs/production-bugs.md
    backends: tuple[str, ...]
    matches: Callable[[Graph], bool]         # does this graph contain the trigger?

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
    KnownBug("onnx-ceil-mode-pool-shape", ("onnxruntime",),
             lambda g: any(_dropped_window(n) for n in g.nodes)),
)


def known_bug(graph: Graph, backend: str) -> KnownBug | None:
    """The documented bug this graph may trip on this path, if any."""
    for bug in KNOWN:
        if backend in bug.backends and bug.matches(graph):
            return bug
    return None
