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

def test_onnx_runtimes_lowest_float_for_a_bool_mask_is_known_to_the_attribute_fuzz():
    """minic keeps the spec's -inf (docs/production-bugs.md#ort-attention-bool-mask-lowest); the attribute
    fuzz counts the case as known, and a model without the trigger, or another difference, as a mismatch."""
    import numpy as np
    import onnx
    from minic.verify.fuzz_attributes import Case, run_one
    from tests.verify.test_production_bugs import attention_with_bool_mask
    model, feeds = attention_with_bool_mask()
    case = Case(0, "attention", 0, "qk_matmul_output_mode", 2, model.SerializeToString(), list(feeds.values()))
    outcome = run_one(case, "interp")
    assert (outcome.status, outcome.detail) == ("known", "docs/production-bugs.md#ort-attention-bool-mask-lowest")

    float_mask = onnx.ModelProto()
    float_mask.CopyFrom(model)
    float_mask.graph.input[3].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    minus_inf = np.where(feeds["M"], np.float32(0), np.float32(-np.inf))
    case = Case(0, "attention", 0, "qk_matmul_output_mode", 2, float_mask.SerializeToString(),
                [*list(feeds.values())[:3], minus_inf])
    assert run_one(case, "interp").status == "ok"               # a float mask's -inf stays -inf in both

    from minic.verify.known_bugs import KNOWN_ONNXRUNTIME
    bug = KNOWN_ONNXRUNTIME[0]
    assert bug.triggered(model) and not bug.triggered(float_mask)
    theirs = [np.zeros(2, np.float32), np.array([np.finfo(np.float32).min, 1.0], np.float32)]
    assert bug.undo(model, feeds, [theirs[0], np.array([-np.inf, 1.0], np.float32)], theirs)[1].tolist() == [-np.inf, 1.0]
    assert bug.undo(model, feeds, [theirs[0], np.array([-np.inf, 2.0], np.float32)], theirs)[1].tolist()[1] == 1.0


def test_a_castlike_to_float16_is_known_where_onnx_runtime_agrees_once_written_as_cast():
    """docs/production-bugs.md#ort-castlike-to-float16-not-rounded: minic keeps the spec's NaN."""
    import numpy as np
    from minic.verify.fuzz_attributes import Case, run_one
    from tests.verify.test_production_bugs import castlike_to_float16
    x = np.array([-3, -0.5, 0, 0.5, 3], np.float16)
    outcome = run_one(Case(0, "castlike", 1, "value_float", 1e-30, castlike_to_float16().SerializeToString(), [x]),
                      "interp")
    assert (outcome.status, outcome.detail) == ("known", "docs/production-bugs.md#ort-castlike-to-float16-not-rounded")
    outcome = run_one(Case(0, "cast", 1, "value_float", 1e-30, castlike_to_float16("Cast").SerializeToString(), [x]),
                      "interp")
    assert outcome.status == "ok"
