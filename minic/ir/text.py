"""The textual form of the tensor IR: ``print_graph`` and ``parse_graph``.

    graph @mlp(%x: f32[B, 784]) -> (f32[B, 10]) {
      const @b0 : f32[10] = dense<0.0>
      const @w0 : f32[784, 10] = file("mlp.npz", "w0")
      %0 = matmul(%x, @w0) : f32[B, 10]
      %1 = add(%0, @b0) : f32[B, 10] group 0
      return %1
    }

The grammar is ``grammar.lark`` beside this file.  Printing then parsing gives
a structurally equal graph, and printing that again gives the same text:
floats are spelled so that they read back to the same bits.  Every error in a
text — syntax, unknown op or attribute, a type that disagrees with the op's
inference, an undefined or twice-defined value, a bad ``.npz`` reference —
is one ``ParseError`` that starts with ``file:line:col`` (minic/ir/text_build.py
builds the graph from the parse tree and makes those checks).

A graph that an op carries as an attribute (a ``loop``'s body, an ``if``'s branches:
minic/ir/ops/control.py) is a graph of its own in the same file, after the model's,
and the attribute names it, as an MLIR op names a function by its symbol (``@f``)
or a TVM Relax call names a function of its IRModule:

    graph @rnn(%h0: f32[4], %xs: f32[T, 4]) -> (f32[4]) {
      %h = loop(%h0, %xs) {body = @step, carried = 1, scanned = 1} : f32[4]
      return %h
    }

    graph @step(%i: i64[], %h: f32[4], %x: f32[4]) -> (f32[4]) {
      %0 = add(%h, %x) : f32[4]
      return %0
    }

The first graph is the model; the others are the graphs its attributes name, depth first
(a loop inside an if's branch comes after the branch), each printed once: two nodes
that hold the same graph object name the same ``@step``.  Graph names are one namespace:
where two different bodies have the same name, the later is printed as ``@step.1``
(``graph_names``).  Each graph has its own values, so a body's ``%x`` is not the model's;
a body reads outer values only through the op's inputs.  In an ``.npz`` side file a body's
constant is keyed ``"step/w"``, the model's plainly ``"w"``.
"""
from __future__ import annotations

import functools
import io
import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
from lark import Lark
from lark.exceptions import UnexpectedCharacters, UnexpectedInput

from minic.errors import UserError
from minic.files import write_atomic
from minic.ir.graph import Graph, Node, Value, shown_attr_items
from minic.ir.ops.layout import END
from minic.ir.text_build import MAX_DIGITS, ParseError, float_of, graph_of_tree
from minic.ir.types import DType
from minic.limits import fewer_collections

__all__ = ["MAX_DIGITS", "ParseError", "graph_names", "parse_graph", "print_graph"]


# --- printing -------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9_.]+")


def print_graph(graph: Graph, npz_path: str | os.PathLike | None = None, inline_limit: int = 16,
                elide: bool = False) -> str:
    """The text of ``graph``, then of each graph an attribute holds (a loop's body, an if's
    branches), each once, named uniquely.  With ``npz_path``, each constant of more than
    ``inline_limit`` elements is saved there (unless all its elements are equal:
    a splat ``dense<0.0>`` is short at any size) and named as ``file("x.npz", "w")``;
    the text names the file without a folder, so keep it beside the text file.
    Without ``npz_path`` every constant is written inline — or, with ``elide``
    (dumps for reading), large ones print as ``elided`` and the text no longer parses."""
    names = graph_names(graph)
    side: dict[str, np.ndarray] = {}
    texts = [_graph_text(g, name, names, side, npz_path, inline_limit, elide, body=g is not graph)
             for g, name in names.values()]
    if side:                             # written atomically: a reader never sees half a file
        buffer = io.BytesIO()
        np.savez(buffer, **side)
        write_atomic(Path(npz_path), buffer.getvalue())
    return "\n\n".join(texts) + "\n"


GraphNames = dict[int, tuple[Graph, str]]        # id(graph) -> (the graph, its name in the text)


def graph_names(graph: Graph) -> GraphNames:
    """``graph`` and every graph its nodes' attributes hold, depth first in text order, each
    object once (two loops that share a body share its text), each under a name no other
    graph of the text has: a body's own name, or that name with ``.1``, ``.2``... after it."""
    names: GraphNames = {}
    taken: set[str] = set()

    def visit(g: Graph) -> None:
        if id(g) in names:
            return
        name, k = g.name, 0
        while name in taken:
            k += 1
            name = f"{g.name}.{k}"
        taken.add(name)
        names[id(g)] = (g, name)
        for node in g.nodes:
            for _, v in shown_attr_items(node.attrs):
                if isinstance(v, Graph):
                    visit(v)
    visit(graph)
    return names


def _graph_text(graph: Graph, name: str, names: GraphNames, side: dict[str, np.ndarray],
                npz_path: str | os.PathLike | None, inline_limit: int, elide: bool, body: bool) -> str:
    params = ", ".join(f"{_ref(v)}: {v.type}" for v in graph.inputs)
    results = ", ".join(str(v.type) for v in graph.outputs)
    lines = [f"graph @{_name(name)}({params}) -> ({results}) {{"]
    for c in graph.constants:
        large = c.data.size > inline_limit and not _is_splat(c.data)
        if large and npz_path is not None:
            # A body's constants are keyed by its name too ("body/w"): its @w is not the model's.
            key = f"{name}/{c.name}" if body else c.name
            # bf16 has no numpy dtype of its own: its bits go to the file as u16, and the
            # declared type reads them back (see ``load``).
            side[key] = c.data.view(np.uint16) if c.type.dtype == DType.bf16 else c.data
            data = f"file({json.dumps(os.path.basename(npz_path))}, {json.dumps(key)})"
        elif large and elide:
            data = "elided"
        else:
            data = _dense(c.data)
        lines.append(f"  const {_ref(c)} : {c.type} = {data}")
    lines += ["  " + _node_text(node, names) for node in graph.nodes]
    lines += [("  return " + ", ".join(_ref(v) for v in graph.outputs)).rstrip(), "}"]
    return "\n".join(lines)


def _name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UserError(f"name '{name}' cannot be printed: names use letters, digits, '_' and '.'")
    return name


def _ref(v: Value) -> str:
    return ("@" if v.is_constant else "%") + _name(v.name)


def _node_text(node: Node, names: GraphNames) -> str:
    outs = ", ".join(_ref(v) for v in node.outputs)
    ins = ", ".join(_ref(v) for v in node.inputs)
    items = shown_attr_items(node.attrs)
    attrs = " {" + ", ".join(f"{k} = {_attr_text(v, names)}" for k, v in items) + "}" if items else ""
    group = f" group {node.group}" if node.group is not None else ""
    return f"{outs} = {node.op}({ins}){attrs} : {', '.join(str(v.type) for v in node.outputs)}{group}"


def _attr_text(v: Any, names: GraphNames, in_list: bool = False) -> str:
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, DType):
        return v.value
    if isinstance(v, (int, np.integer)):
        return "end" if v == END else str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))            # Python's repr reads back to the same double
    if isinstance(v, str):
        return v if in_list else json.dumps(v)     # in a list a str is a dim: B*T
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_attr_text(x, names, in_list=True) for x in v) + "]"
    if isinstance(v, Graph):             # a loop's body: a graph printed after this one, by its name there
        return "@" + names[id(v)][1]
    raise TypeError(f"cannot print attribute value {v!r} of type {type(v).__name__}")


def _is_splat(data: np.ndarray) -> bool:
    bits = data.reshape(-1).view(f"u{data.dtype.itemsize}")
    return bits.size > 0 and bool((bits == bits[0]).all())


def _dense(data: np.ndarray) -> str:
    if _is_splat(data):
        return f"dense<{_element_text(data.reshape(-1)[0])}>"
    return "dense<[" + ", ".join(_element_text(x) for x in data.reshape(-1)) + "]>"


def _element_text(x: np.generic) -> str:
    if x.dtype == np.bool_:
        return "true" if x else "false"
    if x.dtype.kind in "iu":
        return str(int(x))
    if np.isnan(x):
        text = "-nan" if np.signbit(x) else "nan"
    else:
        text = str(x)                    # numpy's shortest spelling for this dtype: 0.1, 1e-08
        if text.lstrip("-").isdigit():
            text += ".0"                 # bf16 spells -0.0 as "-0", which would read back as the int 0
    if float_of(text, x.dtype).tobytes() == x.tobytes():
        return text
    # The readable spelling does not read back to x's bits: an exact one, though not as readable.
    return f"nan:0x{int(x.view(f'u{x.dtype.itemsize}')):x}" if np.isnan(x) else float(x).hex()


# --- parsing --------------------------------------------------------------------

@functools.cache
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True)


@fewer_collections
def parse_graph(text: str, path: str | os.PathLike | None = None) -> Graph:
    """The Graph that ``text`` spells, verified.  ``path`` (the file the text came
    from) names errors and is where ``file("x.npz", ...)`` is looked for."""
    where = str(path) if path is not None else "<text>"
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, where) from None
    folder = Path(path).parent if path is not None else Path(".")
    return graph_of_tree(text, where, folder, tree)


# How a syntax error names what it expected; string terminals show as themselves.
_TERMINALS = {"LOCAL": "a value like %x", "GLOBAL": "a name like @w", "IDENT": "a name",
              "INT": "an integer", "FLOAT": "a float", "STRING": "a string",
              "$END": "end of input", "<END-OF-FILE>": "end of input"}


def _syntax_error(e: UnexpectedInput, text: str, where: str) -> ParseError:
    if isinstance(e, UnexpectedCharacters):
        found, expected = repr(text[e.pos_in_stream]), e.allowed
    else:                                          # an UnexpectedToken: LALR raises no other kind
        found = "end of input" if e.token.type == "$END" else repr(str(e.token))
        expected = e.accepts or e.expected     # accepts: what this parse state really takes
    line, column = e.line, e.column
    if found == "end of input":                    # point just past the last character
        end = len(text.rstrip())
        line, column = text.count("\n", 0, end) + 1, end - text.rfind("\n", 0, end)
    names = " or ".join(sorted({_describe(t) for t in expected}))
    return ParseError(where, line, column, f"syntax error: unexpected {found}" + (f"; expected {names}" if names else ""))


def _describe(terminal: str) -> str:
    # Any other terminal the parser expects is one of the grammar's literal strings: "(", "const".
    # (The lexer never names the ignored WS and COMMENT among those it expected.)
    return _TERMINALS.get(terminal) or f"'{_lark().get_terminal(terminal).pattern.value}'"
