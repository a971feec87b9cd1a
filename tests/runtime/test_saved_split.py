"""Saved models compiled as parts (minic/runtime/saved_split.py): a torch LSTM over a dynamic
time axis, an ONNX If on a run-time condition, a loop inside an if's branch, and data-sized ops
(nonzero; NMS and unique, which read the model's constants on the host) saved, loaded in a fresh
process that imports neither torch nor LLVM, and right at two sizes against the in-memory
SplitModel; what still cannot be saved is refused in one line, and leaves nothing on disk."""
from __future__ import annotations

import json
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

import minic
from minic.errors import DataError, UserError
from minic.runtime.split import SplitModel

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import test_data_sized as data_sized  # noqa: E402
import test_run_time_if as ifs  # noqa: E402
import test_run_time_loops as loops  # noqa: E402
from cli_helpers import cli  # noqa: E402
from test_saved import edit_manifest, run_fresh  # noqa: E402

rng = np.random.default_rng(0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def _tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _saved_matches(run, inputs: list[tuple], tmp_path: Path) -> None:
    """``run`` saved, loaded in a fresh process: the same arrays as in memory for each of ``inputs``."""
    assert isinstance(run, SplitModel)
    folder = minic.save(run, tmp_path / "saved")
    for k, arrays in enumerate(inputs):
        (tmp_path / str(k)).mkdir()
        got, stdout = run_fresh(folder, arrays, tmp_path / str(k))
        assert stdout.strip() == "heavy:", stdout                 # no torch, llvmlite, sympy, onnx, lark
        for g, w in zip(got, _tuple(run(*arrays)), strict=True):
            np.testing.assert_array_equal(g, w)                   # the same machine code: the same bits


def test_a_torch_lstm_over_a_dynamic_time_axis(tmp_path, cache):
    model = loops.TorchRecurrent(loops.TORCH_LAYERS["lstm_2_layers_bidirectional"]).eval()
    run = minic.compile(model, [torch.zeros(2, 5, 6)], dynamic={"x": {1: "T"}}, cache_dir=cache)
    assert "loop" in repr(run)
    inputs = [(rng.standard_normal((2, t, 6)).astype(np.float32),) for t in (5, 11)]
    _saved_matches(run, inputs, tmp_path)
    with torch.no_grad():                                        # and right, not only the same
        want = model(torch.from_numpy(inputs[1][0]))
    for g, w in zip(minic.load_compiled(tmp_path / "saved")(*inputs[1]), want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-5)


def test_an_onnx_if_on_a_run_time_condition(tmp_path, cache):
    path = ifs._sample_rate_file(tmp_path)
    run = minic.compile(path, [np.zeros((2, 4), np.float32), np.array(16000)], cache_dir=cache)
    assert "if" in repr(run)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    _saved_matches(run, [(x, np.array(16000)), (x[:2], np.array(8000))], tmp_path)
    saved = minic.load_compiled(tmp_path / "saved")
    np.testing.assert_array_equal(saved(x, np.array(16000)), np.maximum(x, 0))
    np.testing.assert_array_equal(saved(x=x, sample_rate=np.array(8000)), -x)


def test_a_loop_inside_an_if_branch_is_a_split_folder_inside_one(tmp_path, cache):
    run = minic.compile(ifs.loop_in_if_file(tmp_path),
                        [np.zeros(3, np.float32), np.array(True), np.array(2)], cache_dir=cache)
    x = rng.standard_normal(4).astype(np.float32)
    _saved_matches(run, [(x, np.array(True), np.array(3)), (x[:2], np.array(False), np.array(5))], tmp_path)
    manifest = json.loads((tmp_path / "saved" / "manifest.json").read_text())
    then = next(s for s in manifest["steps"] if s.get("op") == "if")["attrs"]["then_branch"]["graph"]
    assert json.loads((tmp_path / "saved" / then / "manifest.json").read_text())["kind"] == "split"


def test_a_data_sized_op_between_parts(tmp_path, cache):
    path = tmp_path / "nz.onnx"
    onnx.save(data_sized.nonzero_model(), path)
    x = rng.random((3, 4), dtype=np.float32)
    run = minic.compile(str(path), [x], cache_dir=cache)
    assert "nonzero" in repr(run)
    _saved_matches(run, [(x,), (np.ones((3, 4), np.float32),)], tmp_path)


def test_host_ops_that_read_the_models_constants(tmp_path, cache):
    """NMS's limits are constants of the model, read on the host: saved beside the parts."""
    m = data_sized.model(*_nms_parts())
    onnx.save(m, tmp_path / "nms.onnx")
    inputs = [tuple(rng.random((1, 6, 4), dtype=np.float32) for _ in range(2)) for _ in range(2)]
    run = minic.compile(str(tmp_path / "nms.onnx"), list(inputs[0]), cache_dir=cache)
    _saved_matches(run, inputs, tmp_path)
    manifest = json.loads((tmp_path / "saved" / "manifest.json").read_text())
    assert manifest["constants"] and (tmp_path / "saved" / "constants.bin").stat().st_size > 0


def _nms_parts():
    from onnx import helper
    F, I64 = data_sized.F, data_sized.I64
    w = helper.make_tensor("w", F, [4, 3], np.random.default_rng(1).standard_normal(12).tolist())
    nodes = [helper.make_node("MatMul", ["feat", "w"], ["logits"]), helper.make_node("Sigmoid", ["logits"], ["p"]),
             helper.make_node("Transpose", ["p"], ["scores"], perm=[0, 2, 1]),
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "k", "iou", "floor"], ["sel"]),
             helper.make_node("Gather", ["sel", "one"], ["cls"], axis=1),
             helper.make_node("Unique", ["cls"], ["u", "first", "inv", "counts"], sorted=1)]
    inits = [w, helper.make_tensor("k", I64, [1], [2]), helper.make_tensor("iou", F, [1], [0.5]),
             helper.make_tensor("floor", F, [1], [0.3]), helper.make_tensor("one", I64, [], [1])]
    return (nodes, [("feat", F, [1, 6, 4]), ("boxes", F, [1, 6, 4])],
            [("sel", I64), ("u", I64), ("counts", I64), ("inv", I64)], inits)


def test_errors_of_the_saved_model_are_those_of_the_in_memory_one(tmp_path, cache):
    run = minic.compile(loops._loop_file(tmp_path), [np.zeros((2, 3), np.float32), np.array(3)], cache_dir=cache)
    saved = minic.load_compiled(minic.save(run, tmp_path / "saved"))
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(DataError) as want:
        run(x, np.array(-2))
    with pytest.raises(DataError) as got:
        saved(x, np.array(-2))
    assert str(got.value) == str(want.value) and "node #0" in str(got.value)
    with pytest.raises(UserError, match="give the inputs in order or by name"):
        saved(x, m=np.array(2))


def test_what_cannot_be_saved_is_refused_in_one_line_and_leaves_nothing(tmp_path, cache):
    """A part compiled per size that a call brings (specialize.Specialized) needs the compiler."""
    from minic.backends import ModelSource
    from minic.runtime.specialize import Specialized
    path = tmp_path / "nz.onnx"
    onnx.save(data_sized.nonzero_model(), path)
    run = minic.compile(str(path), [np.ones((3, 4), np.float32)], cache_dir=cache)
    last = run.steps[-1]
    last.run = Specialized(ModelSource(last.part.name, (), graph=last.part), None, last.part.inputs, frozenset())
    with pytest.raises(UserError) as e:
        minic.save(run, tmp_path / "out" / "nz")
    assert "\n" not in str(e.value)
    assert str(e.value).startswith(f"minic.save: nz: part {last.part.name} is compiled again for each size of nonzero")
    assert list((tmp_path / "out").iterdir()) == []               # no folder, no staging left behind


def test_the_version_and_cpu_checks_cover_a_split_folder(tmp_path, cache):
    run = minic.compile(ifs._sample_rate_file(tmp_path), [np.zeros((2, 4), np.float32), np.array(1)], cache_dir=cache)
    folder = minic.save(run, tmp_path / "saved")
    manifest = json.loads((folder / "manifest.json").read_text())
    parts = [s["part"] for s in manifest["steps"] if "part" in s]
    assert set(json.loads((folder / parts[0] / "manifest.json").read_text())["cpu_features"]) <= set(
        manifest["cpu_features"])
    edit_manifest(folder, minic="0.0.1")
    with pytest.raises(UserError, match="saved by minic 0.0.1; this is minic") as e:
        minic.load_compiled(folder)
    assert "\n" not in str(e.value)
    minic.save(run, folder)                                       # over an older save: replaced whole
    edit_manifest(folder / parts[0], machine="riscv64")
    with pytest.raises(UserError, match=f"{parts[0]}: built for riscv64"):
        minic.load_compiled(folder)


TAGGER = textwrap.dedent("""
    import torch

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.lstm = torch.nn.LSTM(6, 8, batch_first=True)
            self.fc = torch.nn.Linear(8, 3)

        def forward(self, x):
            return self.fc(self.lstm(x)[0])

    def make():
        return Tagger().eval(), (torch.randn(2, 5, 6),)
""")


def test_cli_compile_host_saves_an_lstm_over_a_dynamic_time_axis(capsys, tmp_path):
    """The command of issue 32, which ended in "minic.save takes a model compiled by minic's own
    backend, not a SplitModel"."""
    (tmp_path / "tagger.py").write_text(TAGGER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code, out, err = cli(capsys, "compile", f"{tmp_path}/tagger.py:make", "--target", "host",
                             "--dynamic", "x:1=T", "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert "manifest.json" in out and "step" in out
    saved = minic.load_compiled(tmp_path / "out")
    sys.path.insert(0, str(tmp_path))
    try:
        import tagger
    finally:
        sys.path.remove(str(tmp_path))
    model = tagger.Tagger().eval()
    for steps in (5, 9):
        x = rng.standard_normal((2, steps, 6)).astype(np.float32)
        with torch.no_grad():
            np.testing.assert_allclose(saved(x), model(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-5)
    with np.load(tmp_path / "out" / "example_inputs.npz") as inputs:
        assert saved(**inputs).shape == (2, 5, 3)
