"""The zoo on the HTP against PyTorch and ORT CPU, and the ``qnn`` column of ``minic verify``."""
import pytest

from minic import models
from minic.cli.verify_cmd import verify_models
from bridges.qnn.accuracy import markdown, measure
from bridges.qnn.prepare import QnnConfig
from tests.cli_helpers import cli


@pytest.mark.parametrize("mode", ["fp16", "int8"])
@pytest.mark.parametrize("name", models.names())
def test_zoo_within_policy_against_torch_and_ort_cpu(name, mode):
    row = measure(name, "small", QnnConfig(mode=mode, calibration=2), count=2, repeats=1)
    assert row.ok, row
    assert row.cpu_nodes == 0 and row.htp_nodes > 0
    assert row.vs_torch.abs > 0 and row.emulated_ms > 0
    assert "emulated ms" in markdown([row])


def test_verify_has_a_qnn_column_for_the_whole_zoo():
    cells = verify_models(models.names(), ["qnn"], "small", seed=0)
    assert [c.model for c in cells] == models.names()
    bad = [f"{c.model}: {c.status} {c.detail}" for c in cells if c.status != "ok"]
    assert not bad, bad


def test_cli_verify_with_the_qnn_backend(capsys):
    code, out, err = cli(capsys, "verify", "mlp", "--backends", "qnn", "--markdown")
    assert code == 0, err
    assert "| mlp | ok " in out


def test_cli_accuracy_table(capsys):
    code, out, err = cli(capsys, "qnn", "accuracy", "mlp", "--modes", "fp16,int8", "--count", "2",
                         "--repeats", "1")
    assert code == 0, err
    assert "HTP emulated on x86-64" in out and "not a device's" in out
    assert out.count("| mlp | small |") == 2


def test_random_graphs_leave_qnn_out_unless_named():
    from minic import backends
    from minic.cli.verify_cmd import fuzz_backends
    from minic.verify.matrix import backend_tolerance

    assert "qnn" in backends.names()
    assert "qnn" not in fuzz_backends() and "onnxruntime" in fuzz_backends()
    assert backend_tolerance("qnn", 1e-4) == 2e-2 and backend_tolerance("onnxruntime", 1e-4) == 1e-4


def test_cli_run_judges_qnn_by_its_bound_and_labels_its_latency(capsys):
    code, out, err = cli(capsys, "run", "mlp", "--size", "small", "--backend", "qnn", "--repeat", "2")
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("│ qnn") or " qnn " in line[:12])
    assert " ok " in row and "(emulated)" in row
