"""bisect names the layer where a planted precision change overflows, on two path pairs:
minic against its interpreter (one process), and minic against ONNX Runtime (another runtime,
on the graph minic imports from the same ONNX export, ORT's intermediates marked as outputs)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import minic
from minic.debug.bisect import bisect, reduce
from minic.debug.expose import all_outputs, export_onnx
from minic.debug.paths import choose, choose_all
from minic.debug.stats import diff
from minic.errors import UserError

sys.path.insert(0, str(Path(__file__).parents[1]))
from cli_helpers import cli  # noqa: E402


class Planted(torch.nn.Module):
    """fc2's sums reach ~1.6e5: fine in f32, past f16's largest finite value (65504)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.fc3 = torch.nn.Linear(64, 8)
        with torch.no_grad():
            self.fc2.weight.mul_(2e5)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = self.norm(self.fc2(h))     # the planted layer
        return self.fc3(h)


@pytest.fixture(scope="module")
def planted():
    torch.manual_seed(1)
    return minic.load(Planted(), (torch.randn(4, 32),))


def test_minic_f16_against_the_interpreter_names_fc2(planted):
    result = bisect(planted, choose("interp"), choose("minic:f16"))
    first = result.first
    assert first is not None and first.node.op == "gemm" and first.node.scope == "fc2"
    assert "test_bisect.py" in first.node.source and "self.fc2(h)" in first.node.source
    assert first.diff.lost > 0 and first.diff.b.inf > 0 and first.diff.a.inf == 0
    assert first.diff.a.hi > 65504                      # the reference's range shows why
    chain = result.chain()
    assert chain and all(s.diff.within(result.tolerance) for s in chain)
    assert {s.node.scope for s in chain} >= {"fc1"}
    text = result.text()
    assert "first divergence" in text and "[module fc2]" in text and "Inf" in text
    # inf - mean in the LayerNorm below is where NaN starts.
    assert result.first_nan is not None and result.first_nan.node.scope == "norm"
    assert "first NaN" in text and len(result.diverged) >= 2


def test_minic_f16_against_onnxruntime_names_fc2(planted):
    result = bisect(planted, choose("onnxruntime"), choose("minic:f16"))
    assert result.common.onnx_model is not None         # compared on the ONNX export's tensors
    first = result.first
    assert first is not None and first.node.source == "/fc2/Gemm" and first.node.scope == "fc2"
    assert first.diff.b.inf > 0
    names = {s.value.name for s in result.steps}
    assert "fc1.Gemm_output_0" in names                 # ORT's own intermediates, by their ONNX names


def test_f32_paths_agree_and_the_report_says_where_they_differ_most(planted):
    result = bisect(planted, choose("interp"), choose("minic"))
    assert result.first is None
    assert len(result.steps) == sum(len(n.outputs) for n in result.common.graph.nodes)
    assert "no node leaves the tolerance" in result.text()


def test_reduce_keeps_the_overflowing_layer_and_still_disagrees(planted):
    result = bisect(planted, choose("onnxruntime"), choose("minic:f16"))
    reduced = reduce(result, max_checks=12)
    assert len(reduced.nodes) < len(result.common.graph.nodes)
    assert "gemm" in {n.op for n in reduced.nodes}
    assert result.first.value in reduced.outputs or any(result.first.value in n.inputs for n in reduced.nodes)
    exposed, feed = all_outputs(reduced), result.feed(reduced)
    ref = minic.compile(exposed, feed, backend="interp")(*feed)
    half = minic.compile(exposed, feed, backend="minic", precision="f16", use_cache=False)(*feed)
    assert any(not diff(r, h).within(result.tolerance) for r, h in zip(ref, half))


def test_cli_bisect_on_an_onnx_file(planted, tmp_path, capsys):
    import onnx
    path = tmp_path / "planted.onnx"
    onnx.save(export_onnx(planted), str(path))
    np.save(tmp_path / "x.npy", planted.example_inputs[0])
    code, out, err = cli(capsys, "bisect", str(path), "--paths", "onnxruntime,minic:f16")
    assert code == 0, err
    assert "first divergence" in out and "/fc2/Gemm" in out


@pytest.mark.parametrize("spec, message", [("nope", "unknown path 'nope'"),
                                           ("onnxruntime:f16-acc", "runs at f32"),
                                           ("interp:f16-acc", "runs at f32, f16")])
def test_bad_paths_are_one_line_errors(spec, message):
    with pytest.raises(UserError, match=message):
        choose_all(spec)


def test_cli_bisect_needs_two_paths(capsys):
    code, _, err = cli(capsys, "bisect", "mlp", "--paths", "minic")
    assert code == 1 and "two paths" in err and err.count("\n") == 1


@pytest.mark.parametrize("reference, half", [("mlir-linalg", "interp:f16"), ("tvm", "minic:f16")])
def test_the_graph_paths_expose_every_value_too(planted, reference, half):
    """TVM and MLIR run the common graph with every node output made a graph output."""
    result = bisect(planted, choose(reference), choose(half))
    assert len(result.steps) == sum(len(n.outputs) for n in result.common.graph.nodes)
    assert result.first is not None and result.first.node.scope == "fc2" and result.first.diff.b.inf > 0
