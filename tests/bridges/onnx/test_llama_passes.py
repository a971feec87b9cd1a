"""The homemade passes on exported llama-tiny: each pass before/after, then the pipeline."""
import numpy as np
import onnx
import pytest
import torch

from bridges.onnx.compare import ort_session
from bridges.onnx.graph_tools import constants, op_histogram, static_shapes
from bridges.onnx.optimize import node_counts
from bridges.onnx.passes import PASSES, run_passes

PAIRS = [(1, 5), (3, 17), (2, 64)]        # (batch, seq) pairs other than the export's (2, 16)


def assert_same_as_torch(model, module, pairs=PAIRS):
    session = ort_session(model, level="disabled")       # run our graph as written
    for batch, seq in pairs:
        ids = np.random.default_rng(seq).integers(0, 256, size=(batch, seq))
        with torch.no_grad():
            ref = module(torch.from_numpy(ids)).numpy()
        out = session.run(None, {"input_ids": ids})[0]
        np.testing.assert_allclose(out, ref, atol=1e-4, rtol=0)


def shape_gathers(model):
    """(tensor, index) of every Gather(Shape(tensor), index) left in the graph."""
    producer = {o: n for n in model.graph.node for o in n.output}
    known = constants(model.graph)
    found = []
    for node in model.graph.node:
        if node.op_type != "Gather":
            continue
        src = producer.get(node.input[0])
        if src is not None and src.op_type == "Shape":
            found.append((src.input[0], int(known[node.input[1]])))
    return found


def test_fold_shape_gather_folds_static_dims_only(llama_small):
    exported, module = llama_small
    before = shape_gathers(exported.model)
    after_model = PASSES["fold-shape-gather"](exported.model)
    after = shape_gathers(after_model)
    assert len(after) < len(before)
    shapes = static_shapes(after_model)
    # what is left reads a dynamic or unknown dim, never a static one
    assert all(not isinstance(shapes[t][k], int) for t, k in after)
    assert_same_as_torch(after_model, module)


def test_fold_constant_nodes_and_gather_shrink_the_chains(llama_small):
    exported, module = llama_small
    m = PASSES["fold-shape-gather"](exported.model)
    folded = PASSES["eliminate-dead-nodes"](PASSES["fold-constant-nodes"](
        PASSES["fold-constant-gather"](m)))
    assert op_histogram(folded)["Unsqueeze"] < op_histogram(m)["Unsqueeze"]
    assert_same_as_torch(folded, module)


def test_fold_reshape_dims_makes_head_split_targets_constant(llama_small):
    exported, module = llama_small
    m = PASSES["fold-reshape-dims"](exported.model)
    known = constants(m.graph)
    targets = [known.get(n.input[1]) for n in m.graph.node if n.op_type == "Reshape"]
    head_split = [t.tolist() for t in targets if t is not None]
    assert head_split.count([0, 0, 4, 16]) == 6           # q, k, v in each of 2 layers
    assert_same_as_torch(PASSES["eliminate-dead-nodes"](m), module)


def test_identity_and_reshape_passes_find_nothing_to_do_in_llama(llama_small):
    # The zoo's llama has no Identity (no tied weights) and no Reshape -> Reshape:
    # these passes must leave it exactly as it is.
    model = llama_small[0].model
    for name in ("eliminate-identity", "fuse-reshapes", "eliminate-nop-transpose"):
        assert PASSES[name](model) == model, name


def test_pipeline_removes_at_least_18_percent_of_nodes(llama_small, llama_small_opt):
    exported, module = llama_small
    optimized, log = llama_small_opt
    total_before, compute_before = node_counts(exported.model)
    total_after, compute_after = node_counts(optimized)
    assert total_after <= 0.82 * total_before
    assert compute_after <= 0.82 * compute_before
    assert log.rounds >= 2                                # the last round confirms the fixed point
    onnx.checker.check_model(optimized, full_check=True)
    assert_same_as_torch(optimized, module)


def test_every_pass_keeps_the_model_valid_and_dynamic(llama_small):
    exported, module = llama_small
    checked = []

    def check(model, name):
        onnx.checker.check_model(model, full_check=True)
        dims = [d.dim_param for d in model.graph.input[0].type.tensor_type.shape.dim]
        assert dims == ["B", "T"], name
        checked.append(name)
    optimized, _ = run_passes(exported.model, check=check)
    assert set(checked) == set(PASSES)
    assert_same_as_torch(optimized, module, pairs=[(4, 33)])


@pytest.mark.parametrize("name", ["bert-base", "cnn"])
def test_pipeline_on_other_zoo_models(name):
    from bridges.onnx.export import export_zoo
    exported, module = export_zoo(name, "small")
    optimized, _ = run_passes(exported.model)
    x = exported.example_inputs[0]
    x = np.concatenate([x, x[:1]])                          # another batch size
    with torch.no_grad():
        ref = module(torch.from_numpy(x)).numpy()
    out = ort_session(optimized).run(None, {exported.input_names[0]: x})[0]
    np.testing.assert_allclose(out, ref, atol=1e-4, rtol=0)


class ReshapeAndSharedWeights(torch.nn.Module):
    """What makes the exporter write Reshape -> Reshape and Identity nodes."""

    def __init__(self):
        super().__init__()
        # Two parameters with equal values: the exporter keeps one initializer
        # and writes the other as Identity(first).
        self.a = torch.nn.Parameter(torch.ones(6))
        self.b = torch.nn.Parameter(torch.ones(6))

    def forward(self, x):
        y = x.view(-1, 2, 3).reshape(-1, 6)          # two Reshapes back to back
        return y * self.a + self.b


def test_identity_and_reshape_passes_on_an_exported_module():
    from bridges.onnx.export import export_module
    module = ReshapeAndSharedWeights()
    exported = export_module(module, (torch.randn(4, 6),), input_names=("x",),
                             dynamic_axes=({0: "B"},))
    before = op_histogram(exported.model)
    assert before["Identity"] >= 1 and before["Reshape"] == 2
    optimized, log = run_passes(exported.model)
    after = op_histogram(optimized)
    assert after["Identity"] == 0 and after["Reshape"] == 1
    assert {"eliminate-identity", "fuse-reshapes"} <= {s.name for s in log.changed()}
    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    out = ort_session(optimized).run(None, {"x": x})[0]
    np.testing.assert_allclose(out, module(torch.from_numpy(x)).detach().numpy(), atol=1e-6)
