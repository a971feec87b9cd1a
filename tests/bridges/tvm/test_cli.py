"""``python -m minic tvm ...`` end to end on small models."""
import pytest
import torch

from minic.cli import main


def test_build_prints_counts_and_error(capsys, tmp_path):
    assert main(["tvm", "build", "mlp", "--size", "small", "--dump-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert 'imported mlp: main(x: R.Tensor((2, 64), dtype="float32"))' in out
    assert "well-formed before and after every pass" in out
    assert "DeadCodeElimination" in out and "built untuned" in out
    error = float(out.split("max abs error vs PyTorch: ")[1].split()[0])
    assert error <= 1e-4
    assert (tmp_path / "05-FuseOps.py").is_file()


def test_build_from_an_onnx_file_checks_against_onnxruntime(capsys, tmp_path, zoo_arrays):
    module, inputs, _ = zoo_arrays("mlp", "small")
    path = tmp_path / "mlp.onnx"
    torch.onnx.export(module, tuple(torch.from_numpy(a) for a in inputs), str(path),
                      input_names=["x"], dynamic_axes={"x": {0: "B"}}, dynamo=False)
    assert main(["tvm", "build", str(path), "--dim", "3"]) == 0
    out = capsys.readouterr().out
    assert 'R.Tensor((3, 64), dtype="float32")' in out
    assert float(out.split("max abs error vs ONNX Runtime: ")[1].split()[0]) <= 1e-4


def test_tune_with_zero_trials_touches_nothing(capsys, tmp_path):
    assert main(["tvm", "tune", "mlp", "--size", "small", "--trials", "0",
                 "--work-dir", str(tmp_path / "db")]) == 0
    out = capsys.readouterr().out
    assert "0 trials in the database, nothing to do" in out
    assert "fused_matmul_add_relu" in out


def test_cross_writes_aarch64(capsys, tmp_path):
    assert main(["tvm", "cross", "cnn", "--size", "small", "--archive", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ELF machine AArch64" in out and "NEON instructions:" in out
    assert (tmp_path / "cnn.tar").is_file()


def test_reorder_demo(capsys):
    assert main(["tvm", "reorder", "--n", "64"]) == 0
    out = capsys.readouterr().out
    assert "for i, k, j in T.grid(64, 64, 64)" in out and "outputs identical: True" in out


def test_bad_model_is_exit_1(capsys):
    assert main(["tvm", "build", "no-such-model"]) == 1
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


def test_unreadable_onnx_file_is_exit_1(capsys, tmp_path):
    (tmp_path / "x.onnx").write_bytes(b"not protobuf")
    assert main(["tvm", "bench", str(tmp_path / "x.onnx")]) == 1
    assert "cannot read ONNX file" in capsys.readouterr().err


def test_build_tuned_without_a_database_is_exit_1(capsys, tmp_path):
    assert main(["tvm", "build", "mlp", "--size", "small", "--tuned", "--work-dir", str(tmp_path)]) == 1
    assert "no tuning database" in capsys.readouterr().err


def test_bench_times_each_thread_count(capsys, tmp_path):
    assert main(["tvm", "bench", "mlp", "--size", "small", "--trials", "0", "--threads", "1,2",
                 "--repeat", "2", "--work-dir", str(tmp_path / "db")]) == 0
    out = capsys.readouterr().out
    for row in ("| PyTorch eager, 1 thread |", "| PyTorch eager, 2 threads |", "| TVM untuned, 2 threads |",
                "| TVM tuned (0 trials/kernel), 1 thread |", "| TVM tuned (0 trials/kernel), 2 threads |"):
        assert row in out


def test_bad_thread_list_and_both_budgets_are_rejected(capsys):
    assert main(["tvm", "bench", "mlp", "--size", "small", "--threads", "1,x"]) == 1
    assert "--threads: expected numbers like 1,2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:    # argparse: the two budgets exclude each other
        main(["tvm", "tune", "mlp", "--trials", "8", "--total-trials", "16"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
