"""Pictures of a Graph, drawn with graphviz: ops with their result types, inputs
and outputs, colours by op kind, and each fused group (``Node.group``) boxed as
one kernel."""
from __future__ import annotations

from pathlib import Path

from minic import tools
from minic.errors import UserError
from minic.files import write_atomic
from minic.ir import ops
from minic.ir.graph import Graph

KIND_COLOURS = {
    ops.OpKind.ELEMENTWISE: "lightyellow",
    ops.OpKind.REDUCTION: "lightsalmon",
    ops.OpKind.NORMALIZE: "plum",
    ops.OpKind.CONTRACTION: "lightskyblue",
    ops.OpKind.WINDOW: "palegreen",
    ops.OpKind.LAYOUT: "gray90",
}


def to_dot(graph: Graph, title: str = ""):
    """A ``graphviz.Digraph`` of the graph (constants are left out: they are weights)."""
    import graphviz
    dot = graphviz.Digraph(graph.name, graph_attr={"rankdir": "TB", "label": title or f"@{graph.name}",
                                                   "labelloc": "t", "fontsize": "18"},
                           node_attr={"shape": "box", "style": "rounded,filled", "fontname": "Helvetica",
                                      "fontsize": "10"})
    key: dict[int, str] = {}
    for i, v in enumerate(graph.inputs):
        key[id(v)] = f"in{i}"
        dot.node(f"in{i}", f"%{v.name}\n{v.type}", shape="ellipse", fillcolor="palegreen")
    groups: dict[int, list[tuple[str, str, str]]] = {}
    for i, node in enumerate(graph.nodes):
        label = f"{node.op}\n" + "\n".join(str(o.type) for o in node.outputs)
        colour = KIND_COLOURS[ops.get(node.op).kind]
        for o in node.outputs:
            key[id(o)] = f"n{i}"
        if node.group is None:
            dot.node(f"n{i}", label, fillcolor=colour)
        else:
            groups.setdefault(node.group, []).append((f"n{i}", label, colour))
    for g, members in groups.items():
        with dot.subgraph(name=f"cluster_g{g}") as sub:     # "cluster_" makes graphviz draw a box
            sub.attr(label=f"kernel #g{g}", style="dashed", color="steelblue", fontsize="9")
            for name, label, colour in members:
                sub.node(name, label, fillcolor=colour)
    for i, node in enumerate(graph.nodes):
        for v in node.inputs:
            if id(v) in key:
                dot.edge(key[id(v)], f"n{i}")
    for i, v in enumerate(graph.outputs):
        dot.node(f"out{i}", f"output {i}\n{v.type}", shape="ellipse", fillcolor="lightpink")
        if id(v) in key:
            dot.edge(key[id(v)], f"out{i}")
    return dot


def render(dot, out: str | Path) -> Path:
    """Write the picture to ``out``; its suffix (.svg, .png, .pdf, .dot) picks the format."""
    out = Path(out)
    fmt = out.suffix.lstrip(".").lower()
    if fmt == "dot":
        return write_atomic(out, dot.source.encode())
    if fmt not in ("svg", "png", "pdf"):
        raise UserError(f"{out}: unknown picture format '.{fmt}' (use .svg, .png, .pdf or .dot)")
    tools.dot(f"drawing {out}")
    return write_atomic(out, dot.pipe(format=fmt))
