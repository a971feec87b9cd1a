"""A failing cell is "known" only with the documented bug's trigger in the graph AND
its symptom in the cell: any other failure of the same graph is a new failure."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from minic.verify.known_bugs import known_bug
from minic.verify.matrix import Cell
from minic.ir.text import parse_graph

REGRESSION = Path(__file__).parent / "regressions" / "onnxruntime_f35a25d839.mc"
SYMPTOM = ("InferenceError: [ShapeInferenceError] Inference error(s): (op_type:Where, node name: /Where): "
           "[ShapeInferenceError] Incompatible dimensions")


def pool_graph(ceil_mode_drops_a_window: bool):
    graph = parse_graph(REGRESSION.read_text(), REGRESSION)
    if not ceil_mode_drops_a_window:             # the same pool without ceil_mode: no window to drop
        pool = next(n for n in graph.nodes if n.op == "avg_pool2d")
        pool.attrs = dataclasses.replace(pool.attrs, ceil_mode=False)
    return graph


def test_the_documented_symptom_on_the_trigger_is_known():
    bug = known_bug(pool_graph(True), Cell("g", "onnxruntime", "crash", detail=SYMPTOM))
    assert bug is not None and bug.ref == "docs/production-bugs.md#onnx-ceil-mode-pool-shape"


def test_other_failures_of_the_same_graph_are_new():
    graph = pool_graph(True)
    for cell in (Cell("g", "onnxruntime", "mismatch", detail="output 0[0, 0, 0, 1]: 1.5 vs 2.5"),
                 Cell("g", "onnxruntime", "crash", detail="RuntimeError: something else went wrong"),
                 Cell("g", "minic", "crash", detail=SYMPTOM)):             # not a path the bug is on
        assert known_bug(graph, cell) is None, cell


def test_the_symptom_without_the_trigger_is_new():
    assert known_bug(pool_graph(False), Cell("g", "onnxruntime", "crash", detail=SYMPTOM)) is None


def test_openvino_pool_bugs_are_known_on_their_regressions():
    folder = REGRESSION.parent
    for name, symptom, anchor in (
            ("openvino_0aa4664a88.mc", "output 0[0, 0, 0, 1]: np.float32(0.34) vs np.float32(0.52)",
             "openvino-ceil-mode-avg-pool-divisor"),
            ("openvino_3cb3bb7a9a.mc", "output 0: shape [2, 2, 2, 1] vs [2, 2, 1, 1]", "openvino-ceil-mode-pool-shape")):
        graph = parse_graph((folder / name).read_text(), folder / name)
        bug = known_bug(graph, Cell("g", "openvino", "mismatch", detail=symptom))
        assert bug is not None and bug.anchor == anchor, name
        pool = graph.nodes[0]
        pool.attrs = dataclasses.replace(pool.attrs, ceil_mode=False)     # no overhang, no dropped window
        assert known_bug(graph, Cell("g", "openvino", "mismatch", detail=symptom)) is None, name
