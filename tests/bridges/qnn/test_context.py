"""The context binary: EPContext model + .bin, reloaded in a fresh session, same results."""
import numpy as np
import onnx

from bridges.qnn.context import compile_to
from bridges.qnn.prepare import QnnConfig, prepare
from tests.bridges.qnn.conftest import sinh_erf_model
from tests.cli_helpers import cli


def test_round_trip_is_bit_identical(tmp_path):
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    # Sinh is rewritten for the HTP, so the whole graph goes into the context binary.
    model = prepare(sinh_erf_model(erf=False), ("x",), (x,), QnnConfig()).model
    binary = compile_to(model, {"x": x}, tmp_path / "ctx", "tiny")
    assert binary.ep_context_nodes == 1
    assert binary.binaries and all(b.stat().st_size > 0 for b in binary.binaries)
    assert set(binary.reloaded_placement.values()) == {"QNNExecutionProvider"}
    assert binary.in_memory_vs_reloaded.abs == 0.0
    stored = onnx.load(str(binary.context_model))
    assert [n.op_type for n in stored.graph.node] == ["EPContext"]


def test_cli_compile_writes_and_reloads(capsys, tmp_path):
    out_dir = tmp_path / "mlp_ctx"
    code, out, err = cli(capsys, "qnn", "compile", "mlp", "-o", str(out_dir), "--mode", "int8",
                         "--calibration", "1")
    assert code == 0, err
    assert (out_dir / "mlp_ctx.onnx").is_file() and list(out_dir.glob("*.bin"))
    assert "reloaded vs in-memory run: max |diff| 0 " in out
    assert "emulation figures, not a device's" in out


def test_cli_compile_refuses_a_model_that_needs_the_cpu(capsys, tmp_path, sinh_erf_path):
    code, _, err = cli(capsys, "qnn", "compile", str(sinh_erf_path), "-o", str(tmp_path / "x"))
    assert code == 1 and "cannot run on the HTP: erf (Erf)" in err
