"""The command line: what a user sees, and the exit codes of the Errors table."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from minic import backends

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import cli  # noqa: E402


def test_models_lists_the_zoo(capsys):
    code, out, _ = cli(capsys, "models")
    assert code == 0
    for name in ("mlp", "cnn", "resnet50", "bert-base", "llama-tiny"):
        assert name in out


def test_run_prints_shapes_checksum_latency_and_error(capsys):
    code, out, err = cli(capsys, "run", "mlp", "--size", "small", "--backend", "interp", "--repeat", "2")
    assert code == 0, err
    assert "output 0: float32[2, 10]" in out
    assert "checksum:" in out
    assert "interp" in out and "torch" in out and " ok " in out


def test_run_with_an_inputs_file(capsys, tmp_path):
    x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    code, out, err = cli(capsys, "run", "mlp", "--size", "small", "--backend", "interp", "--inputs",
                         str(tmp_path / "in.npz"), "--repeat", "1")
    assert code == 0, err
    assert "float32[5, 10]" in out
    np.savez(tmp_path / "two.npz", a=x, b=x)
    code, _, err = cli(capsys, "run", "mlp", "--size", "small", "--inputs", str(tmp_path / "two.npz"))
    assert code == 1 and err.startswith("error:") and "expected 1 arrays" in err and "Traceback" not in err


@pytest.mark.parametrize("argv,words", [
    (("run", "no-such-model"), "unknown model 'no-such-model'"),
    (("run", "mlp", "--backend", "nope"), "unknown backend 'nope'"),
    (("run", "mlp", "--inputs", "missing.npz"), "no such inputs file"),
    (("run", "model.txt"), "unknown model file type"),
    (("show", "missing.onnx"), "no such file"),
])
def test_user_errors_are_one_line_exit_1(capsys, argv, words):
    code, out, err = cli(capsys, *argv)
    assert code == 1
    assert words in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_debug_shows_the_traceback(capsys):
    code, _, err = cli(capsys, "--debug", "run", "no-such-model")
    assert code == 1 and "Traceback" in err


def test_usage_errors_exit_2(capsys):
    code, _, err = cli(capsys, "run", "mlp", "--no-such-flag")
    assert code == 2 and "usage:" in err


def test_internal_errors_are_labelled(capsys, monkeypatch):
    def broken(source, **options):
        raise RuntimeError("boom")
    monkeypatch.setitem(backends._BACKENDS, "broken", broken)
    code, _, err = cli(capsys, "run", "mlp", "--size", "small", "--backend", "broken")
    assert code == 3
    assert "internal error: RuntimeError: boom" in err and "please report" in err


def test_show_graph(capsys):
    code, out, err = cli(capsys, "show", "mlp", "--size", "small", "--emit", "graph")
    assert code == 0, err
    assert out.startswith("graph @mlp(") and ("matmul" in out or "gemm" in out)
