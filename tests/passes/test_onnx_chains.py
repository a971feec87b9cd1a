"""The shape programs PyTorch's ONNX exporter writes (Shape -> Gather ->
Unsqueeze -> Concat -> Reshape) fold away at -O2, with static and with symbolic
batch and sequence dims."""
from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
import torch

from minic.frontend.onnx import from_onnx
from minic.ir.interpret import interpret
from minic.passes import optimize

SHAPE_OPS = {"shape", "reshape_dynamic", "gather", "concat", "unsqueeze", "div", "cast"}


class Heads(torch.nn.Module):
    """Multi-head attention's reshapes, written with sizes read at run time."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        heads = self.proj(x).view(b, t, 4, c // 4).transpose(1, 2)
        return heads.reshape(x.size(0), -1)


def imported(dynamic: bool):
    torch.manual_seed(0)
    model, x = Heads().eval(), torch.randn(2, 3, 16)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), f, input_names=["x"], dynamo=False,
                          dynamic_axes={"x": {0: "B", 1: "T"}} if dynamic else None)
    return model, from_onnx(onnx.load_from_string(f.getvalue()))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "symbolic"])
def test_shape_chains_fold_away(dynamic: bool):
    model, graph = imported(dynamic)
    optimized = optimize(graph, level=2, verify_each=True)
    left = {n.op for n in optimized.nodes} & SHAPE_OPS
    assert not left, f"shape-program ops left after -O2: {sorted(left)}"
    reshapes = [n.outputs[0].type.shape for n in optimized.nodes if n.op == "reshape"]
    assert reshapes == ([("B", "T", 4, 4), ("B", "16*T")] if dynamic else [(2, 3, 4, 4), (2, 48)])
    sizes = [(2, 3), (1, 5)] if dynamic else [(2, 3)]
    for b, t in sizes:
        x = torch.randn(b, t, 16)
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(interpret(optimized, [x.numpy()])[0], expected, rtol=1e-5, atol=1e-5)


def test_the_import_has_shape_programs_to_fold():
    """Guards the test above: with dynamic dims the import keeps the chains."""
    _, graph = imported(dynamic=True)
    assert {"shape", "reshape_dynamic"} <= {n.op for n in graph.nodes}


@pytest.mark.parametrize("name", ["bert-base", "llama-tiny"])
def test_zoo_exports_lose_their_shape_programs(name: str):
    """The transformers' view/reshape calls read sizes at run time; with symbolic
    B and T every shape program still folds into a static reshape."""
    import minic.models as zoo
    model, inputs = zoo.get(name, size="small")
    info = zoo.info(name)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, inputs, f, input_names=list(info.input_names), dynamo=False,
                          dynamic_axes=dict(zip(info.input_names, info.dynamic_axes)))
    graph = from_onnx(onnx.load_from_string(f.getvalue()))
    assert "reshape_dynamic" in {n.op for n in graph.nodes}
    stats = []
    optimized = optimize(graph, level=2, verify_each=True, stats=stats)
    assert not {n.op for n in optimized.nodes} & {"shape", "reshape_dynamic"}
    fusion = stats[-1]                   # fuse-groups copies a slice read by several nodes for each
    assert fusion.name == "fuse-groups" and fusion.nodes_before < len(graph.nodes) * 0.7
    ids = inputs[0][:1, :5].numpy()                     # other sizes for B and T
    for arrays in ([x.numpy() for x in inputs], [ids]):
        np.testing.assert_allclose(interpret(optimized, arrays)[0], interpret(graph, arrays)[0], rtol=1e-5, atol=1e-5)
