"""``python -m minic onnx export|optimize|compare|viz|custom-op`` (in-process)."""

import pytest

from minic.cli import main


def test_export_writes_a_checked_model(tmp_path, capsys):
    assert main(["onnx", "export", "llama-tiny", "--size", "small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "full check: passed" in out and "input_ids: ['B', 'T']" in out
    assert (tmp_path / "llama_tiny.onnx").is_file()


def test_optimize_prints_the_pass_log_and_table(tmp_path, capsys):
    assert main(["onnx", "optimize", "llama-tiny", "--size", "small", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "fold-reshape-dims" in out and "| ort-basic" in out and "| onnxoptimizer" in out
    assert (tmp_path / "llama_tiny_opt.onnx").is_file()
    # an .onnx file is accepted too
    assert main(["onnx", "optimize", str(tmp_path / "llama_tiny_opt.onnx"),
                 "--out", str(tmp_path / "again")]) == 0


def test_compare_prints_three_tables(tmp_path, capsys):
    argv = ["onnx", "compare", "llama-tiny", "--size", "small", "--count", "6", "--repeats", "2",
            "--seq", "8", "--out", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "| int8-qdq" in out and "top-1 agree" in out and "latency, median ms" in out
    assert "ort-cuda homemade" in out                        # present, or says why missing
    assert (tmp_path / "llama_tiny_int8-qdq.onnx").is_file()


def test_viz_writes_before_and_after_pictures(tmp_path):
    assert main(["onnx", "viz", "mlp", "--size", "small", "--out", str(tmp_path)]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["mlp_after.png", "mlp_after.svg", "mlp_before.png", "mlp_before.svg"]


def test_custom_op_demo_shows_the_error_and_three_fixes(capsys):
    assert main(["onnx", "custom-op"]) == 0
    out = capsys.readouterr().out
    assert "is not a registered function/op" in out
    assert out.count("max |err|") == 3


def test_bad_input_exits_1_with_one_line(tmp_path, capsys):
    assert main(["onnx", "export", "no-such-model"]) == 1
    assert main(["onnx", "compare", str(tmp_path / "x.onnx")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: unknown model 'no-such-model'")
    assert err[1].startswith("error: compare needs a zoo model")
