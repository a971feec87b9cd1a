"""Small CLI items a new user met: `run --inputs x.npy`, `run --repeat 0`, a full disk
during `tune` and `show -o`, `compile --target x86_64-linux-gnu` without `--mcpu`,
and `bench --plot` bars proportional to the figures.  Each ends in a result or a
one-line error, never an internal error or an abort."""
from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from minic import tools
from minic.ir.graph import Graph, Node, Value
from minic.ir import ops
from minic.ir.text import print_graph
from minic.ir.types import DType, TensorType
from minic.options import default_cpu

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def one_line_error(code: int, err: str) -> str:
    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "internal error" not in err, err
    return lines[0]


def test_run_takes_an_npy_file_for_a_one_input_model(tmp_path, capsys):
    x = np.random.default_rng(3).standard_normal((3, 64)).astype(np.float32)      # the small MLP: [B, 64]
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "x.npz", x)
    code, out, err = cli(capsys, "run", "mlp", "--size", "small", "--inputs", str(tmp_path / "x.npy"), "--repeat", "1")
    assert code == 0, err
    assert "inputs float32[3, 64]" in out and "│ ok" in out
    checksum = re.search(r"checksum: (\S+)", out).group(1)
    code, out, err = cli(capsys, "run", "mlp", "--size", "small", "--inputs", str(tmp_path / "x.npz"), "--repeat", "1")
    assert code == 0 and re.search(r"checksum: (\S+)", out).group(1) == checksum       # the same answer


def test_run_input_file_errors_are_one_line(tmp_path, capsys):
    a, b = Value("a", TensorType((2,), DType.f32)), Value("b", TensorType((2,), DType.f32))
    y = Value("y", TensorType((2,), DType.f32))
    two = tmp_path / "two.mc"
    two.write_text(print_graph(Graph("two", [a, b], [y], [Node("add", [a, b], [y], ops.get("add").make_attrs())], [])))
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    line = one_line_error(*cli(capsys, "run", str(two), "--inputs", str(tmp_path / "x.npy"))[::2])
    assert "takes 2 inputs (a, b); 1 given" in line
    np.save(tmp_path / "rank3.npy", np.ones((2, 3, 4), np.float32))
    line = one_line_error(*cli(capsys, "run", "mlp", "--size", "small", "--inputs", str(tmp_path / "rank3.npy"))[::2])
    assert "input 0 is float32[2, 3, 4]; mlp takes float32 of rank 2" in line
    np.save(tmp_path / "wide.npy", np.ones((2, 65), np.float32))
    line = one_line_error(*cli(capsys, "run", "mlp", "--size", "small", "--inputs", str(tmp_path / "wide.npy"))[::2])
    assert "the reference (torch) cannot run these inputs" in line
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY junk")
    line = one_line_error(*cli(capsys, "run", "mlp", "--size", "small", "--inputs", str(tmp_path / "junk.npy"))[::2])
    assert "not a readable .npz or .npy file" in line


@pytest.mark.parametrize("repeat", ["0", "-3"])
def test_run_repeat_below_one_is_a_user_error(capsys, repeat):
    line = one_line_error(*cli(capsys, "run", "mlp", "--size", "small", "--repeat", repeat)[::2])
    assert f"--repeat must be at least 1" in line and repeat in line


@pytest.fixture
def full_disk(monkeypatch):
    """Every write through minic.files.write_atomic fails as on a full disk (ENOSPC)."""
    import minic.files
    real = os.fdopen

    class Full:
        def __init__(self, f) -> None:
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.f.close()

        def write(self, data) -> int:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(minic.files.os, "fdopen", lambda fd, mode="r": Full(real(fd, mode)))


def test_full_disk_during_show_is_one_line(tmp_path, capsys, full_disk):
    out = tmp_path / "mlp.mc"
    line = one_line_error(*cli(capsys, "show", "mlp", "--size", "small", "--emit", "opt", "-o", str(out))[::2])
    assert "cannot write" in line and "No space left on device" in line
    assert list(tmp_path.iterdir()) == []                  # nothing half written, no temporary left


def test_full_disk_during_tune_is_one_line(tmp_path, capsys, full_disk):
    records = tmp_path / "r.jsonl"
    code, out, err = cli(capsys, "tune", "mlp", "--size", "small", "--trials", "1", "--records", str(records),
                         "--model-repeat", "0")
    line = one_line_error(code, "\n".join(x for x in err.splitlines() if not x.startswith("[")))   # no progress
    assert f"cannot write {records}: No space left on device" in line
    assert not records.exists() and not list(tmp_path.glob(".*.tmp"))


def test_default_cpu_follows_the_target():
    assert default_cpu("aarch64") == default_cpu("aarch64-linux-gnu") == "cortex-a55"
    assert default_cpu("x86_64-linux-gnu") == "generic" and default_cpu("riscv64-linux-gnu") == "generic"


def test_compile_for_x86_64_without_mcpu(tmp_path):
    """Before: LLVM was handed cortex-a55 for x86-64 and aborted the process.  Run in a child
    process so that an abort fails this test instead of killing the test run."""
    out = tmp_path / "x86"
    done = subprocess.run([sys.executable, "-m", "minic", "compile", "mlp", "--size", "small",
                           "--target", "x86_64-linux-gnu", "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert "LLVM ERROR" not in done.stderr and "not a recognized processor" not in done.stderr, done.stderr
    assert "for x86_64-linux-gnu (generic, 4 threads)" in done.stdout, done.stdout + done.stderr
    assert (out / "model.o").read_bytes()[:4] == b"\x7fELF"
    if done.returncode == 1 and "x86_64-linux-gnu-gcc" in done.stderr:
        return                                             # no cross gcc to link with: said in one line
    assert done.returncode == 0, done.stderr
    # An x86-64 static executable runs right here: its answer is PyTorch's.
    from minic.aarch64 import tensor_file
    from minic.api import load
    from minic import backends
    run = subprocess.run([str(out / "model"), str(out / "example_inputs.bin"), str(out / "outputs.bin"), "1"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    source = load("mlp", size="small")
    expected = backends.get("torch")(source)(*source.example_inputs)
    np.testing.assert_allclose(tensor_file.read(out / "outputs.bin").arrays[0], expected, rtol=1e-4, atol=1e-5)


def test_plot_bars_are_proportional_to_the_figures(tmp_path):
    """Each bar's drawn length is BAR x its median / the longest median, all from one left edge."""
    from minic.cli.bench_cmd import BAR, plot
    if tools.find("dot") is None:
        pytest.skip("graphviz's dot is not installed (scripts/setup.sh installs it)")
    config = SimpleNamespace(label="batch 1, 1 thread")
    medians = {"minic": 1.0e-3, "torch": 2.6e-3, "onnxruntime": 1.4e-3, "tvm": 2.0e-5}
    results = [SimpleNamespace(path=p, config=config, blocks=[m], median=m) for p, m in medians.items()]
    pic = tmp_path / "bars.svg"
    plot(pic, results)
    bars = [[float(v) for v in re.findall(r"(-?[\d.]+),-?[\d.]+", points)]
            for points in re.findall(r'<polygon fill="#(?:d95f02|7570b3)"[^>]*points="([^"]+)"', pic.read_text())]
    assert len(bars) == len(medians)
    lefts, lengths = [min(xs) for xs in bars], [max(xs) - min(xs) for xs in bars]
    assert max(lefts) - min(lefts) < 0.5                   # one left edge
    for length, m in zip(lengths, medians.values()):
        assert abs(length - max(1, round(BAR * m / max(medians.values())))) <= 1


def test_compile_with_a_cpu_llvm_does_not_know_is_a_user_error(tmp_path, capsys):
    """LLVM only warns of a CPU it does not know for a triple, then may abort the process
    (x86-64 code for an ARM core): minic asks it first and refuses in one line.  The case
    that aborted runs in a child process (an abort fails the test, not the test run)."""
    done = subprocess.run([sys.executable, "-m", "minic", "compile", "mlp", "--size", "small", "--target",
                           "x86_64-linux-gnu", "--mcpu", "cortex-a55", "-o", str(tmp_path / "out")],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    line = one_line_error(done.returncode, done.stderr)
    assert "'cortex-a55' is not a recognized processor" in line and "LLVM ERROR" not in done.stderr
    # These two built for LLVM's baseline without a word before:
    for args, refused in ((["--mcpu", "skylake"], "'skylake' is not a recognized processor"),
                          (["--features", "+bogus"], "'+bogus' is not a recognized feature")):
        line = one_line_error(*cli(capsys, "compile", "mlp", "--size", "small", "--target", "aarch64", *args,
                                   "-o", str(tmp_path / "arm"))[::2])
        assert refused in line
