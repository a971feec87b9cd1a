"""The qnn path of minic.debug: its bounds are the bridge's, and coverage sees its CPU fallback."""
from minic.api import load
from minic.debug.coverage import coverage
from minic.debug.paths import PATHS, choose
from bridges.qnn import tolerance


def test_debug_path_bounds_are_the_bridge_policy():
    path = PATHS["qnn"]
    assert path.precisions[0] == "fp16" and path.precision_option == "mode"
    assert path.tolerance == {"fp16": tolerance.FP16, "int8": tolerance.bound("qdq", "uint8"),
                              "int16": tolerance.bound("qdq", "uint16")}


def test_coverage_reports_the_erf_left_on_the_cpu(erf_module):
    module, inputs = erf_module
    table = coverage(load(module, inputs), [choose("qnn")])
    cells = {row.op: row.cells["qnn"] for row in table.rows}
    assert cells["gemm"].status == "supported"
    assert cells["erf"].status == "refused" and "Erf x1" in cells["erf"].reason
    assert table.whole["qnn"].status == "fallback" and "(Erf)" in table.whole["qnn"].reason
