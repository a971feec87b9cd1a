"""Pictures: an ONNX graph drawn with graphviz (``dot``), as SVG and PNG.

Boxes are nodes (op type, and the node's name underneath); arrows are the values
between them.  Weights (initializers) are left out to keep the picture about the
computation; ``Constant`` nodes are drawn small and grey, and shape-arithmetic
ops (Shape, Gather, Unsqueeze, Concat...) light blue, so that the chains the
homemade passes fold stand out in the "before" picture.
"""
from __future__ import annotations

from pathlib import Path

import onnx

from minic import tools

SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Cast", "Slice",
             "ConstantOfShape", "Range", "Expand"}


def to_dot(model: onnx.ModelProto, title: str = ""):
    """A ``graphviz.Digraph`` of the model's top-level graph."""
    import graphviz

    g = model.graph
    dot = graphviz.Digraph(name=g.name or "onnx", graph_attr={"rankdir": "TB", "label": title,
                                                              "labelloc": "t", "fontsize": "20",
                                                              "size": "16,40", "dpi": "72"},
                           node_attr={"shape": "box", "style": "rounded,filled",
                                      "fontname": "Helvetica", "fontsize": "10"})
    weights = {init.name for init in g.initializer}
    producer: dict[str, str] = {}
    # Keys are plain identifiers: graphviz reads "a:b" as port b of node a.
    for i, info in enumerate(g.input):
        if info.name not in weights:
            dot.node(f"input{i}", info.name, shape="ellipse", fillcolor="palegreen")
            producer[info.name] = f"input{i}"
    for i, node in enumerate(g.node):
        key = f"n{i}"
        if node.op_type == "Constant":
            dot.node(key, "const", fillcolor="gray90", fontsize="7", height="0.2")
        else:
            color = "lightblue" if node.op_type in SHAPE_OPS else "lightyellow"
            dot.node(key, node.op_type, fillcolor=color)
        for out in node.output:
            producer[out] = key
    for i, node in enumerate(g.node):
        for name in node.input:
            if name in producer:
                dot.edge(producer[name], f"n{i}")
    for i, info in enumerate(g.output):
        dot.node(f"output{i}", info.name, shape="ellipse", fillcolor="lightpink")
        if info.name in producer:
            dot.edge(producer[info.name], f"output{i}")
    return dot


def render(model: onnx.ModelProto, stem: str | Path, title: str = "") -> list[Path]:
    """Write ``stem.svg`` and ``stem.png``; return their paths."""
    tools.dot(f"drawing {stem}.svg")
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    dot = to_dot(model, title)
    paths = []
    for fmt in ("svg", "png"):
        written = dot.render(filename=stem.name, directory=str(stem.parent), format=fmt,
                             cleanup=True)
        paths.append(Path(written))
    return paths
