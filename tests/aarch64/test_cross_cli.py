"""The command line of the ARM target: compile, run --target --emulate, show --emit asm."""
import numpy as np
import pytest

from minic import backends
from minic.cli import main
from minic import tools
from minic.aarch64 import tensor_file
from minic.aarch64 import backend as cross_backend


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def only_tools(tmp_path, *programs: str):
    """A folder to use as PATH that holds links to ``programs`` and nothing else."""
    import os
    folder = tmp_path / "bin"
    folder.mkdir()
    for program in programs:
        os.symlink(tools.find(program), folder / program)
    return folder


@pytest.fixture
def own_registry():
    """minic-aarch64, registered by run --emulate, is gone after the test (so that
    other tests' 'all backends' matrices do not grow an emulated column)."""
    yield
    backends._BACKENDS.pop(cross_backend.NAME, None)


def test_compile_writes_an_executable_that_runs_under_qemu(capsys, tmp_path):
    import subprocess
    from minic.api import load
    out_dir = tmp_path / "mlp"
    code, out, err = cli(capsys, "compile", "mlp", "--size", "small", "--target", "aarch64-linux-gnu",
                         "--mcpu", "cortex-a55", "-o", str(out_dir))
    assert code == 0, err
    assert "static executable" in out and "run it: qemu-aarch64" in out
    done = subprocess.run([tools.qemu("aarch64-linux-gnu"), str(out_dir / "model"),
                           str(out_dir / "example_inputs.bin"), str(out_dir / "outputs.bin"), "3"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "3 run(s), median" in done.stdout, done.stderr
    source = load("mlp", size="small")
    expected = backends.get("torch")(source)(*source.example_inputs)
    np.testing.assert_allclose(tensor_file.read(out_dir / "outputs.bin").arrays[0], expected, rtol=1e-4, atol=1e-5)


def test_compile_without_a_cross_gcc_says_what_to_install(capsys, tmp_path, monkeypatch, scale_shift_mc):
    monkeypatch.setenv("PATH", str(only_tools(tmp_path)))          # no programs at all
    code, out, err = cli(capsys, "compile", str(scale_shift_mc), "--target", "aarch64", "-o", str(tmp_path / "out"))
    assert code == 1 and "'aarch64-linux-gnu-gcc', which is not installed" in err
    assert "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross" in err
    assert len(err.strip().splitlines()) == 1
    assert (tmp_path / "out" / "model.o").is_file() and (tmp_path / "out" / "harness.c").is_file()


def test_run_emulated_compares_with_torch_and_the_host_build(capsys, own_registry):
    code, out, err = cli(capsys, "run", "mlp", "--size", "small", "--target", "aarch64", "--emulate", "--repeat", "2")
    assert code == 0, err
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│")}
    assert " ok " in rows["minic-aarch64"] and " ok " in rows["minic"] and " ok " in rows["torch"]
    assert "minic-aarch64 (cortex-a55" in out and "vs host build: max abs diff" in out
    assert "EMULATED" in out


def test_run_emulated_without_qemu_is_one_clear_line(capsys, own_registry, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(only_tools(tmp_path, "aarch64-linux-gnu-gcc")))
    code, _, err = cli(capsys, "run", "mlp", "--size", "small", "--target", "aarch64", "--emulate", "--repeat", "1")
    assert code == 1 and "minic-aarch64 needs 'qemu-aarch64', which is not installed" in err
    assert "apt-get install qemu-user" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_target_without_emulate_is_a_user_error(capsys):
    code, _, err = cli(capsys, "run", "mlp", "--target", "aarch64")
    assert code == 1 and "--target and --emulate go together" in err


def test_show_asm_for_cortex_a55_has_neon(capsys, scale_shift_mc):
    code, out, err = cli(capsys, "show", str(scale_shift_mc), "--emit", "asm", "--target", "aarch64-linux-gnu",
                         "--mcpu", "cortex-a55")
    assert code == 0, err
    assert "minic_entry" in out
    assert any(op in out for op in ("fmul\tv", "fadd\tv", "fmla\tv")) and ".4s" in out
