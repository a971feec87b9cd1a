"""The placement report on a model with ops the HTP lacks (Sinh, standalone Erf)."""
from bridges.qnn.placement import parse_log, report
from bridges.qnn.prepare import QnnConfig, prepare
from tests.bridges.qnn.conftest import sinh_erf_model
from tests.cli_helpers import cli

import numpy as np


def prepared(rewrites: bool, mode: str = "fp16"):
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    return prepare(sinh_erf_model(), ("x",), (x,), QnnConfig(mode=mode, rewrites=rewrites, calibration=1),
                   calibrate_on=(x,))


def test_report_names_each_cpu_node_and_why():
    plain = report(prepared(False).model, "as exported")
    where = {n.name: n.where for n in plain.nodes}
    assert where == {"fc1": "HTP", "sinh": "CPU", "erf": "CPU", "fc2": "HTP"}
    assert plain.missing() == [("Erf", 1, "Operators of type Erf are not supported by QNN EP"),
                               ("Sinh", 1, "Operators of type Sinh are not supported by QNN EP")]
    assert plain.blocking == ["sinh (Sinh)", "erf (Erf)"]
    assert plain.partitions == 2                  # fc1 | sinh, erf on the CPU | fc2
    assert "fallback to CPU EP has been explicitly disabled" not in plain.refusal   # ours names the nodes
    assert "sinh (Sinh), erf (Erf)" in plain.refusal


def test_rewrite_moves_sinh_to_the_htp_and_erf_still_blocks():
    rewritten = prepared(True)
    assert rewritten.rewrites == {"decompose-hyperbolic": 1}
    after = report(rewritten.model, "rewritten", rewritten.rewrites)
    assert [n.name for n in after.on("CPU")] == ["erf"]
    assert {n.op_type for n in after.on("HTP")} == {"MatMul", "Neg", "Exp", "Sub", "Mul"}
    assert after.blocking == ["erf (Erf)"]


def test_qdq_report_explains_the_qdq_nodes_around_cpu_ops():
    qdq = report(prepared(False, "int8").model, "int8")
    cpu = {n.name: n.reason for n in qdq.on("CPU")}
    assert cpu["erf"] == "Operators of type Erf are not supported by QNN EP"
    assert cpu["s_DequantizeLinear"].startswith("in the Erf node unit of erf")
    assert "single Quantize/Dequantize node in a partition" in cpu["s_QuantizeLinear"]
    assert {n.op_type for n in qdq.on("HTP")} == {"MatMul", "QuantizeLinear", "DequantizeLinear"}


def test_parse_log_joins_the_backend_rejection_to_the_node():
    log = ("[W:onnxruntime:, qnn_model_wrapper.cc:565 CreateQnnNode] QNN.backendValidateOpConfig() failed "
           "for node `asin` of type `ElementWiseAsin` with error code 3110\n"
           "[V:onnxruntime:, qnn_execution_provider.cc:1713 LogNodeSupport] Validation FAILED for 1 nodes "
           "in OrtNodeUnit (Asin) :\n\tOperator type: Asin Node name: asin Node index: 1\n"
           "\tREASON : Failed to add node.\n\n")
    assert parse_log(log) == {"asin": "Failed to add node. HTP backend rejected QNN op ElementWiseAsin: "
                                      "QNN_OP_PACKAGE_ERROR_VALIDATION_FAILURE (the HTP op package "
                                      "rejects this op for these data types/shapes)"}


def test_cli_placement_shows_both_graphs(capsys, sinh_erf_path):
    code, out, err = cli(capsys, "qnn", "placement", str(sinh_erf_path), "--summary")
    assert code == 0, err
    before, after = out.split("with the bridge's rewrites")
    assert "Sinh: 1 node(s) -- Operators of type Sinh are not supported by QNN EP" in before
    assert "blocking nodes: sinh (Sinh), erf (Erf)" in before
    assert "Sinh" not in after.split("missing from the NPU coverage")[1]
    assert "blocking nodes: erf (Erf)" in after


def test_cli_placement_zoo_model_offloads_fully(capsys):
    code, out, err = cli(capsys, "qnn", "placement", "llama-tiny", "--summary", "--mode", "int8",
                         "--calibration", "1")
    assert code == 0, err
    assert "missing from the NPU coverage: nothing" in out
    assert "with CPU fallback disabled: the session builds (full offload)" in out
    assert "clamp-additive-mask x1" in out


def test_cli_placement_bad_model_is_a_user_error(capsys, tmp_path):
    code, _, err = cli(capsys, "qnn", "placement", str(tmp_path / "missing.onnx"))
    assert code == 1 and "no such ONNX file" in err


def test_cli_coverage_table(capsys, sinh_erf_path):
    code, out, err = cli(capsys, "qnn", "coverage", "mlp", str(sinh_erf_path), "--modes", "fp16",
                         "--calibration", "1")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows[0].startswith("| mlp | fp16 | none | 3 | 0 |") and "| builds, all HTP | none |" in rows[0]
    assert "| refused |" in rows[1] and "Sinh x1" in rows[1]                    # as exported
    assert "decompose-hyperbolic x1" in rows[2] and "Sinh" not in rows[2].split("|")[-2]
