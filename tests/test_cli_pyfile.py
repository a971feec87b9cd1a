"""Every command takes ``path/to/file.py:Name`` (minic/frontend/pyfile.py through
minic/cli/model_args.py), with PyTorch eager as the reference."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import cli  # noqa: E402

MODEL = '''
import torch
from torch import nn

class Net(nn.Module):
    """A matmul (tunable), a bias and a relu: tiny, and every path takes it."""
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2

def factory():
    return Net(), (torch.randn(3, 8),)

def just_module():
    return Net()

def wrong():
    return 42

def needs_args(width):
    return Net()

class NeedsArgs(nn.Module):
    def __init__(self, width):
        super().__init__()

NOT_A_MODEL = 3
'''


@pytest.fixture(scope="module")
def model_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user") / "my_model.py"
    path.write_text(textwrap.dedent(MODEL))
    return path


def ok(capsys, *argv) -> str:
    code, out, err = cli(capsys, *argv)
    assert code == 0, err + out
    return out


def test_run_class_with_shape_and_factory_with_inputs(capsys, model_file):
    out = ok(capsys, "run", f"{model_file}:Net", "--shape", "2,8", "--repeat", "1")
    assert "model Net: inputs float32[2, 8]; reference: torch" in out and "output 0: float32[2, 4]" in out
    assert " minic " in out and " ok " in out
    out = ok(capsys, "run", f"{model_file}:factory", "--backend", "interp", "--repeat", "1")
    assert "inputs float32[3, 8]; reference: torch" in out and "output 0: float32[3, 4]" in out


def test_inputs_file_by_name_and_by_order(capsys, model_file, tmp_path):
    x = np.ones((5, 8), np.float32)
    np.savez(tmp_path / "named.npz", x=x)
    np.savez(tmp_path / "ordered.npz", x)
    for f in ("named.npz", "ordered.npz"):
        out = ok(capsys, "run", f"{model_file}:just_module", "--inputs", str(tmp_path / f), "--backend", "interp",
                 "--repeat", "1")
        assert "output 0: float32[5, 4]" in out
    np.save(tmp_path / "one.npy", x)                      # an .npy file: the one input
    out = ok(capsys, "run", f"{model_file}:Net", "--inputs", str(tmp_path / "one.npy"), "--backend", "interp",
             "--repeat", "1")
    assert "output 0: float32[5, 4]" in out
    np.savez(tmp_path / "wrong.npz", y=x)
    code, _, err = cli(capsys, "run", f"{model_file}:Net", "--inputs", str(tmp_path / "wrong.npz"))
    assert code == 1 and "expected 1 arrays named x (or arr_0); found y" in err


def test_show_viz_compile_tune(capsys, model_file, tmp_path):
    assert "graph @Net(" in ok(capsys, "show", f"{model_file}:Net", "--shape", "2,8")
    assert "define" in ok(capsys, "show", f"{model_file}:factory", "--emit", "llvm")
    ok(capsys, "viz", f"{model_file}:factory", "-o", str(tmp_path / "g.dot"))
    assert "relu" in (tmp_path / "g.dot").read_text()
    ok(capsys, "compile", f"{model_file}:factory", "--target", "aarch64", "-o", str(tmp_path / "cross"))
    assert (tmp_path / "cross" / "model.o").stat().st_size > 0
    out = ok(capsys, "tune", f"{model_file}:factory", "--trials", "1", "--model-repeat", "0",
             "--records", str(tmp_path / "records.jsonl"))
    assert "kernels kept the default schedule" in out


def test_verify_report_debug_commands(capsys, model_file, tmp_path):
    out = ok(capsys, "verify", f"{model_file}:factory", "mlp", "--size", "small", "--backends", "interp,minic",
             "--markdown")
    assert "| factory | ok" in out and "| mlp | ok" in out     # each model its own inputs
    ok(capsys, "report", f"{model_file}:factory", "-o", str(tmp_path / "r.html"), "--backends", "interp",
       "--no-profile", "--no-coverage")
    assert "factory" in (tmp_path / "r.html").read_text()
    out = ok(capsys, "coverage", f"{model_file}:factory", "--paths", "interp,minic", "--no-whole")
    assert "coverage of factory" in out and "| relu | 1 | ok | ok |" in out
    out = ok(capsys, "bisect", f"{model_file}:factory", "--paths", "interp,minic")
    assert "bisect factory: minic against interp" in out and "4 of 4 node outputs compared" in out
    out = ok(capsys, "profile", f"{model_file}:factory", "--paths", "minic", "--repeat", "1", "--no-roofline")
    assert "profile factory (float32[3, 8])" in out and "| fc |" in out     # the user's module names


def test_bench_runs_the_file_in_its_workers(capsys, model_file):
    out = ok(capsys, "bench", f"{model_file}:Net", "--shape", "2,8", "--vs", "torch", "--threads", "1",
             "--rounds", "1", "--calls", "1", "--warmup", "0")
    assert "minic" in out and "torch" in out and "crash" not in out


@pytest.mark.parametrize("spec,words", [
    ("missing.py:Net", "missing.py: no such Python file"),
    ("{f}:Nope", "has no attribute 'Nope' (models found there: NeedsArgs, Net, factory, just_module, "
                 "needs_args, wrong)"),
    ("{f}", "name the model in the file"),
    ("{f}:wrong", "wrong returned a int; expected an nn.Module or (module, example_inputs)"),
    ("{f}:NOT_A_MODEL", "NOT_A_MODEL is a int; expected an nn.Module class"),
    ("{f}:needs_args", "needs_args needs arguments"),
    ("{f}:NeedsArgs", "NeedsArgs needs arguments"),
    ("{f}:Net", "no example inputs; give --inputs FILE.npz or --shape"),
])
def test_bad_python_models_are_one_line_errors(capsys, model_file, spec, words):
    code, _, err = cli(capsys, "show", spec.format(f=model_file))
    assert code == 1 and words in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_file_that_raises_on_import(capsys, tmp_path):
    (tmp_path / "broken.py").write_text("import torch\nraise RuntimeError('no GPU\\nhere')\n")
    (tmp_path / "syntax.py").write_text("def f(:\n")
    code, _, err = cli(capsys, "show", f"{tmp_path}/broken.py:Net", "--shape", "1")
    assert code == 1 and "broken.py: importing it raised RuntimeError: no GPU here" in err
    code, _, err = cli(capsys, "show", f"{tmp_path}/syntax.py:Net")
    assert code == 1 and "syntax.py:1: syntax error" in err


def test_dynamic_dims_from_the_command_line(capsys, model_file, tmp_path):
    """--dynamic keeps the named dims symbolic: a saved model then runs at other batch sizes."""
    import json
    import minic
    out = ok(capsys, "compile", f"{model_file}:factory", "--target", "host", "--dynamic", "x:0=B",
             "-o", str(tmp_path / "saved"))
    assert "saved factory" in out
    manifest = json.loads((tmp_path / "saved" / "manifest.json").read_text())
    assert manifest["inputs"][0]["shape"] == ["B", 8]
    saved = minic.load_compiled(tmp_path / "saved")
    net = minic.load(f"{model_file}:Net", [np.zeros((1, 8), np.float32)]).module
    for n in (1, 5):
        x = np.random.default_rng(n).standard_normal((n, 8)).astype(np.float32)
        import torch
        np.testing.assert_allclose(saved(x), net(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    static = ok(capsys, "compile", f"{model_file}:factory", "--target", "host", "-o", str(tmp_path / "static"))
    assert "saved factory" in static
    assert json.loads((tmp_path / "static" / "manifest.json").read_text())["inputs"][0]["shape"] == [3, 8]
    out = ok(capsys, "run", f"{model_file}:Net", "--shape", "2,8", "--dynamic", "0:0", "--repeat", "1")
    assert " minic " in out and " ok " in out


@pytest.mark.parametrize("spec, words", [("x", "write all, none, or INPUT:AXIS"),
                                         ("x:first", "axis 'first' is not an integer"),
                                         ("y:0", "the model has no input 'y'"),
                                         ("x:3", "has no axis 3")])
def test_bad_dynamic_specs_are_one_line_errors(capsys, model_file, tmp_path, spec, words):
    code, out, err = cli(capsys, "compile", f"{model_file}:factory", "--target", "host", "--dynamic", spec,
                         "-o", str(tmp_path / "out"))
    assert code == 1 and words in err and len(err.strip().splitlines()) == 1, err
