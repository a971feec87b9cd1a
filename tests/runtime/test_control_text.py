"""Graphs with a run-time ``loop`` or ``if`` (minic/ir/ops/control.py) in the text form
(minic/ir/text.py): each body printed as a graph of its own that the attribute names, parsed
back into a structurally equal graph that the interpreter runs to the same results; a ``.mc``
file with a loop compiles.  The models are those of test_run_time_loops.py and
test_run_time_if.py."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import minic
from minic.frontend.onnx import from_onnx_file
from minic.ir.graph import Graph, structurally_equal
from minic.ir.interpret import interpret
from minic.ir.text import ParseError, graph_names, parse_graph, print_graph

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_run_time_if as ifs  # noqa: E402
import test_run_time_loops as loops  # noqa: E402


def _lstm_file(tmp_path: Path) -> Path:
    path = tmp_path / "lstm.onnx"
    loops._export("LSTM", path, dynamo=False)
    return path


# Each model, and inputs at two sizes (or conditions) to run it on.
rng = np.random.default_rng(0)
f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)     # noqa: E731
CASES = {
    "loop": (lambda p: loops._loop_file(p), [(f32(2, 3), np.array(3)), (f32(4, 3), np.array(0))]),
    "if": (lambda p: ifs._sample_rate_file(p), [(f32(2, 4), np.array(16000)), (f32(3, 4), np.array(8000))]),
    "lstm": (_lstm_file, [(f32(2, 5, 6),), (f32(1, 9, 6),)]),
    "if_in_loop": (ifs.if_in_loop_file, [(f32(2, 2), f32(2, 2), np.array(3)), (f32(1, 2), f32(1, 2), np.array(6))]),
    "loop_in_if": (ifs.loop_in_if_file, [(f32(3), np.array(True), np.array(2)), (f32(4), np.array(False), np.array(5))]),
}


def _bodies(graph: Graph) -> list[Graph]:
    return [g for g, _ in graph_names(graph).values()][1:]


@pytest.mark.parametrize("name", sorted(CASES))
def test_graphs_with_loops_and_ifs_round_trip_and_run(name, tmp_path):
    make, inputs = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = from_onnx_file(make(tmp_path))
    assert {"loop", "if"} & {n.op for n in graph.nodes}
    text = print_graph(graph)
    parsed = parse_graph(text)
    assert structurally_equal(parsed, graph)
    assert print_graph(parsed) == text
    assert len(_bodies(parsed)) == len(_bodies(graph)) > 0
    for arrays in inputs:
        for got, want in zip(interpret(parsed, arrays), interpret(graph, arrays), strict=True):
            np.testing.assert_array_equal(got, want)


def test_nested_bodies_print_after_their_parents_with_unique_names(tmp_path):
    """A 2-layer bidirectional LSTM has four loop bodies; a loop in an if's branch puts the loop's
    body after the branch; every graph of the text has a name of its own."""
    graph = from_onnx_file(ifs.loop_in_if_file(tmp_path))
    text = print_graph(graph)
    headers = [line.split("(")[0] for line in text.splitlines() if line.startswith("graph @")]
    assert len(headers) == len(set(headers)) == 4              # the model, then, its loop's body, else
    names = [name for _, name in graph_names(graph).values()]
    assert headers == [f"graph @{n}" for n in names]
    then = next(n for n in graph.nodes if n.op == "if").attrs.then_branch
    assert names.index(graph_names(graph)[id(then)][1]) == 1
    assert "loop" in {n.op for n in then.nodes}


def test_two_bodies_of_one_name_print_under_two_names():
    text = print_graph(_two_loops(same_body=False))
    assert "body = @step," in text and "body = @step.1," in text
    parsed = parse_graph(text)
    a, b = (n.attrs.body for n in parsed.nodes)
    assert (a.name, b.name) == ("step", "step.1") and a is not b
    assert structurally_equal(parsed, _two_loops(same_body=False))
    shared = parse_graph(print_graph(_two_loops(same_body=True)))     # one object: printed once, shared again
    a, b = (n.attrs.body for n in shared.nodes)
    assert a is b and print_graph(shared).count("graph @step") == 1


def _two_loops(same_body: bool) -> Graph:
    """Two loops over xs, each body h + x (the second's body a separate object of the same name)."""
    text = """
        graph @m(%h0: f32[4], %xs: f32[T, 4]) -> (f32[4]) {
          %a = loop(%h0, %xs) {body = @step, carried = 1, scanned = 1} : f32[4]
          %b = loop(%a, %xs) {body = @step, carried = 1, scanned = 1} : f32[4]
          return %b
        }
        graph @step(%i: i64[], %h: f32[4], %x: f32[4]) -> (f32[4]) {
          %y = add(%h, %x) : f32[4]
          return %y
        }"""
    graph = parse_graph(text)
    if not same_body:
        from dataclasses import replace
        other = parse_graph(text).nodes[0].attrs.body
        graph.nodes[1].attrs = replace(graph.nodes[1].attrs, body=other)
    return graph


def test_a_body_of_another_structure_is_not_structurally_equal():
    a, b = _two_loops(True), _two_loops(True)
    assert structurally_equal(a, b)
    b.nodes[0].attrs.body.nodes[0].op = "sub"
    assert not structurally_equal(a, b)


def test_large_body_constants_go_to_the_side_file_keyed_by_the_body(tmp_path):
    path = _lstm_file(tmp_path)
    graph = from_onnx_file(path)
    mc = tmp_path / "lstm.mc"
    mc.write_text(print_graph(graph, npz_path=tmp_path / "lstm.npz"))
    with np.load(tmp_path / "lstm.npz") as side:
        assert any("/" in key for key in side.files)
    parsed = parse_graph(mc.read_text(), mc)
    assert structurally_equal(parsed, graph)


@pytest.mark.parametrize("text,words", [
    ("graph @m(%x: f32[4]) -> (f32[4]) {\n  return %x\n}\ngraph @m(%y: f32[4]) -> (f32[4]) {\n  return %y\n}",
     "4:7: graph @m is defined twice (first at 1:7)"),
    ("graph @m(%x: f32[4]) -> (f32[4]) {\n  return %x\n}\ngraph @b(%y: f32[4]) -> (f32[4]) {\n  return %y\n}",
     "4:7: graph @b is not the model (the first graph), and no attribute names it"),
    ("graph @m(%h: f32[4], %xs: f32[T, 4]) -> (f32[4]) {\n"
     "  %a = loop(%h, %xs) {body = @nowhere, carried = 1, scanned = 1} : f32[4]\n  return %a\n}",
     "2:30: undefined graph @nowhere"),
    ("graph @m(%h: f32[4], %xs: f32[T, 4]) -> (f32[4]) {\n"
     "  %a = loop(%h, %xs) {body = @m, carried = 1, scanned = 1} : f32[4]\n  return %a\n}",
     "2:30: graph @m holds itself (@m -> @m): a body cannot"),
    ("graph @m(%x: f32[4]) -> (f32[4]) {\n  %y = relu(%x) {body = @m} : f32[4]\n  return %y\n}",
     "2:18: unknown attribute 'body' of relu"),
    ("graph @m(%x: f32[4]) -> (f32[4]) {\n  %y = reduce_sum(%x) {axes = @m} : f32[]\n  return %y\n}",
     "2:31: type mismatch: attribute 'axes' of reduce_sum must be a list of ints, got '@m'"),
    ("graph @m(%h: f32[4], %xs: f32[T, 4]) -> (f32[4]) {\n"
     "  %a = loop(%h, %xs) {body = 3, carried = 1, scanned = 1} : f32[4]\n  return %a\n}",
     "2:30: type mismatch: attribute 'body' of loop must be a graph (@name), got '3'"),
])
def test_bad_body_references_are_one_line_errors_with_their_place(text, words):
    with pytest.raises(ParseError) as e:
        parse_graph(text, "x.mc")
    assert "\n" not in str(e.value) and str(e.value).startswith("x.mc:")
    assert words in str(e.value)


def test_a_mc_file_with_a_loop_compiles(tmp_path):
    """The LSTM over a dynamic T, printed to a .mc file (its weights in the side .npz), compiled by
    minic.compile("x.mc"): one compilation serves two lengths, as from the ONNX file."""
    path = _lstm_file(tmp_path)
    graph = from_onnx_file(path)
    (tmp_path / "lstm.mc").write_text(print_graph(graph, npz_path=tmp_path / "lstm.npz"))
    x = np.zeros((2, 5, 6), np.float32)
    run = minic.compile(str(tmp_path / "lstm.mc"), [x], cache_dir=tmp_path / "cache")
    for shape in [(2, 5, 6), (1, 8, 6)]:
        x = f32(*shape)
        np.testing.assert_allclose(run(x), interpret(graph, [x])[0], rtol=1e-5, atol=1e-5)
