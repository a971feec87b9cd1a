"""coverage asks each path about each op type of a model, and reports the path's own refusals."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import minic
from minic import models
from minic.api import graph_of
from minic.debug.coverage import coverage
from minic.debug.paths import choose_all

sys.path.insert(0, str(Path(__file__).parents[1]))
from cli_helpers import cli  # noqa: E402

REGRESSIONS = Path(__file__).parents[1] / "verify" / "regressions"


@pytest.mark.parametrize("name", models.names())
def test_every_zoo_model_is_covered_on_minic_and_onnxruntime(name):
    source = minic.load(name, size="small")
    result = coverage(source, choose_all("minic,onnxruntime"), whole=False)
    graph = graph_of(source)
    assert sum(r.nodes for r in result.rows) == len(graph.nodes)
    assert {r.op for r in result.rows} == {n.op for n in graph.nodes}
    for r in result.rows:
        assert r.cells["minic"].status == "supported", (r.op, r.cells["minic"])
        assert r.cells["onnxruntime"].status == "supported", (r.op, r.cells["onnxruntime"])
    assert result.covered("minic") == len(graph.nodes)


def test_every_op_alone_can_pass_while_the_model_is_refused_with_the_paths_reason():
    # A ceil_mode pool whose last window ONNX's shape inference keeps (docs/production-bugs.md).
    source = minic.load(REGRESSIONS / "onnxruntime_f35a25d839.mc")
    result = coverage(source, choose_all("minic,onnxruntime,mlir-tosa"))
    assert all(r.cells[p].status == "supported" for r in result.rows for p in result.paths)
    assert result.whole["minic"].status == "supported"
    assert result.whole["mlir-tosa"].status == "supported"
    refused = result.whole["onnxruntime"]
    assert refused.status == "refused" and "ShapeInferenceError" in refused.reason
    table = result.markdown()
    assert "refused [1]" in table and "[1] onnxruntime, whole model: InferenceError" in table


def test_a_refusal_counts_only_the_nodes_that_fail(tmp_path):
    # minic's TOSA emitter has no dilated max-pool (TOSA's MAX_POOL2D has no dilation); one of two is.
    text = """graph @pools(%x: f32[2, 1, 5, 3]) -> (f32[2, 1, 3, 1], f32[2, 1, 3, 2]) {
  %a = max_pool2d(%x) {kernel = [2, 3], stride = [2, 1], padding = [1, 0, 1, 0], dilation = [2, 1], ceil_mode = false, count_include_pad = true} : f32[2, 1, 3, 1]
  %b = max_pool2d(%x) {kernel = [2, 2], stride = [2, 1], padding = [1, 0, 1, 0], dilation = [1, 1], ceil_mode = false, count_include_pad = true} : f32[2, 1, 3, 2]
  return %a, %b
}"""
    path = tmp_path / "pools.mc"
    path.write_text(text)
    result = coverage(minic.load(path), choose_all("minic,mlir-tosa,mlir-linalg"), whole=False)
    (row,) = result.rows
    assert row.nodes == 2 and row.cells["minic"].status == "supported"
    assert row.cells["mlir-linalg"].status == "supported"
    tosa = row.cells["mlir-tosa"]
    assert (tosa.status, tosa.failing) == ("refused", 1) and "dilation [2, 1]" in tosa.reason
    assert result.covered("mlir-tosa") == 1 and "refused 1/2 [1]" in result.markdown()


def test_cli_coverage_prints_the_table(capsys):
    code, out, err = cli(capsys, "coverage", "mlp", "--paths", "interp,minic,tvm,mlir-linalg")
    assert code == 0, err
    assert "| gemm | 2 | ok | ok | ok | ok |" in out
    assert "| **whole model** | | ok | ok | ok | ok |" in out


def test_cli_coverage_asks_interp_and_minic_unless_told_all(capsys):
    code, out, err = cli(capsys, "coverage", "mlp", "--no-whole")
    assert code == 0, err
    assert "| op | nodes | interp | minic |" in out
    assert re.search(r"^\[\d+/\d+ \d+\.\ds\] coverage: gemm on minic$", err, re.M), err


def test_cli_coverage_all_asks_every_available_path(capsys, monkeypatch):
    import minic.debug.coverage as cov
    from minic.debug.paths import available
    asked = []

    def fake(source, paths, whole=True, progress=None):
        asked.extend(c.label for c in paths)
        return cov.Coverage(source.name, [c.label for c in paths], [])
    monkeypatch.setattr(cov, "coverage", fake)
    code, out, err = cli(capsys, "coverage", "mlp", "--paths", "all")
    assert code == 0, err
    assert asked == available() and {"onnxruntime", "tvm", "mlir-linalg"} <= set(asked)
