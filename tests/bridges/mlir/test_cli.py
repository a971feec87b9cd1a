"""``python -m minic mlir lab ...``."""
import pytest

from minic.cli import main


def test_emit_affine_with_unroll_and_run(capsys):
    assert main(["mlir", "lab", "--shape", "4", "8", "6", "--unroll", "4",
                 "--emit", "affine", "--emit", "unrolled", "--run"]) == 0
    out = capsys.readouterr().out
    assert "IR after stage 'affine'" in out and "IR after stage 'unrolled'" in out
    assert "affine.for %arg6 = 0 to 8 step 4" in out
    assert "JIT run: max |mlir - numpy|" in out and "ok at 1e-5" in out


@pytest.mark.parametrize("stage, marker", [("linalg", "linalg.matmul"), ("llvm", "llvm.func"),
                                           ("tosa", "tosa.matmul")])
def test_emit_each_form(capsys, stage, marker):
    assert main(["mlir", "lab", "--shape", "2", "3", "4", "--emit", stage]) == 0
    out = capsys.readouterr().out
    assert f"IR after stage '{stage}'" in out and marker in out


def test_bench(capsys):
    assert main(["mlir", "lab", "--bench", "--shape", "16", "16", "16", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert "scalar" in out and "vectorized" in out and "speedup" in out


@pytest.mark.parametrize("argv, message", [
    (["--emit", "loops"], "--emit loops: unknown stage"),
    (["--shape", "0", "1", "1"], "m must be a positive integer"),
    (["--unroll", "0"], "factor must be an integer >= 2"),
])
def test_bad_input_exits_1_with_one_line(capsys, argv, message):
    assert main(["mlir", "lab", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
