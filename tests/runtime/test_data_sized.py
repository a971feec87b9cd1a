"""Ops whose output size is decided by the data (nonzero, unique, NMS) in the middle of a
model: compiled parts around them (minic/runtime/split.py), against ONNX Runtime."""
from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import minic
from minic.frontend.onnx import from_onnx
from minic.runtime.specialize import Specialized
from minic.runtime.split import SplitModel, cut

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def ort_run(m, feeds):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def nonzero_model():
    """relu(x - 0.5) -> NonZero -> float indices * 2 + their count: compiled, host, compiled."""
    c = helper.make_tensor("half", F, [], [0.5])
    two = helper.make_tensor("two", F, [], [2.0])
    nodes = [helper.make_node("Sub", ["x", "half"], ["d"]), helper.make_node("Relu", ["d"], ["r"]),
             helper.make_node("NonZero", ["r"], ["i"]), helper.make_node("Cast", ["i"], ["f"], to=F),
             helper.make_node("Mul", ["f", "two"], ["y"]),
             helper.make_node("ReduceSum", ["y"], ["s"], keepdims=0)]
    return model(nodes, [("x", F, [3, 4])], [("y", F), ("s", F)], [c, two])


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_nonzero_between_compiled_parts(backend, tmp_path):
    m = nonzero_model()
    path = tmp_path / "nz.onnx"
    onnx.save(m, path)
    rng = np.random.default_rng(0)
    x = rng.random((3, 4), dtype=np.float32)
    run = minic.compile(str(path), [x], backend=backend)
    for data in (x, rng.random((3, 4), dtype=np.float32), np.zeros((3, 4), np.float32), np.ones((3, 4), np.float32)):
        got, want = run(data), ort_run(m, {"x": data})
        for g, w in zip(got, want):
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


def test_the_compiled_model_is_cut_at_the_data_sized_op():
    graph = from_onnx(nonzero_model())
    pieces = cut(graph)
    assert [getattr(p, "op", None) for p in pieces] == [None, "nonzero", None]
    before, _, after = pieces
    assert [n.op for n in before.nodes] == ["sub", "relu"]
    assert after.inputs[0].type.shape[1] == pieces[1].attrs.count        # the count symbol is its dim
    assert isinstance(minic.compile(graph, [np.zeros((3, 4), np.float32)]), SplitModel)


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_unique_and_nms_in_a_model(backend, tmp_path):
    """Scores from a matmul, NMS over them, then Unique over the selected classes."""
    w = helper.make_tensor("w", F, [4, 3], np.random.default_rng(1).standard_normal(12).tolist())
    nodes = [helper.make_node("MatMul", ["feat", "w"], ["logits"]),            # [1, 6, 3]
             helper.make_node("Sigmoid", ["logits"], ["p"]),
             helper.make_node("Transpose", ["p"], ["scores"], perm=[0, 2, 1]),  # [1, 3, 6]
             helper.make_node("NonMaxSuppression", ["boxes", "scores", "k", "iou", "floor"], ["sel"]),
             helper.make_node("Gather", ["sel", "one"], ["cls"], axis=1),
             helper.make_node("Unique", ["cls"], ["u", "first", "inv", "counts"], sorted=1)]
    inits = [w, helper.make_tensor("k", I64, [1], [2]), helper.make_tensor("iou", F, [1], [0.5]),
             helper.make_tensor("floor", F, [1], [0.3]), helper.make_tensor("one", I64, [], [1])]
    m = model(nodes, [("feat", F, [1, 6, 4]), ("boxes", F, [1, 6, 4])],
              [("sel", I64), ("u", I64), ("counts", I64), ("inv", I64)], inits)
    path = tmp_path / "nms.onnx"
    onnx.save(m, path)
    rng = np.random.default_rng(2)
    corners = rng.random((1, 6, 2), dtype=np.float32)
    boxes = np.concatenate([corners, corners + rng.random((1, 6, 2), dtype=np.float32)], axis=2)
    feat = rng.standard_normal((1, 6, 4)).astype(np.float32)
    run = minic.compile(str(path), [feat, boxes], backend=backend)
    for scale in (1.0, 3.0, -3.0):
        got, want = run(feat * scale, boxes), ort_run(m, {"feat": feat * scale, "boxes": boxes})
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


class Selecting(torch.nn.Module):
    """torch.nonzero, a boolean mask's selection and torch.unique, as torch's exporter writes
    them (NonZero, NonZero + GatherND, Unique) after a layer whose weights decide the data."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        return torch.nonzero(h > 0.2).float().sum(0) + h[h > 0.2].sum(), torch.unique(torch.round(h * 3))


def test_a_file_torchs_exporter_wrote(tmp_path):
    torch.manual_seed(0)
    path = tmp_path / "selecting.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Selecting().eval(), (torch.randn(4, 6),), str(path), dynamo=False, opset_version=17)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    run = minic.compile(str(path), [rng.standard_normal((4, 6)).astype(np.float32)])
    for scale in (1.0, 3.0, 0.01):
        x = (rng.standard_normal((4, 6)) * scale).astype(np.float32)
        for got, want in zip(run(x), session.run(None, {session.get_inputs()[0].name: x})):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class Selections(torch.nn.Module):
    """torch's ops whose output size the data decides: nonzero, masked_select (a mask that
    broadcasts), x[mask] over the leading axes and over a later one."""

    def forward(self, x, m):
        return (torch.nonzero(x > 0), torch.masked_select(x, m) * 2, x[x > 0.5].sum(), x[:, x[0] > 0])


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_torch_nonzero_masked_select_and_mask_indexing(backend, tmp_path):
    """Each is a nonzero (its count a fresh symbol that torch's unbacked size u0 maps to) and a gather
    (compose.compress); compiled, the model is cut at each nonzero."""
    model = Selections()
    rng = np.random.default_rng(3)
    example = [torch.randn(3, 4), torch.rand(4) > 0.5]
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(model, example, backend=backend, **options)
    if backend == "minic":
        assert isinstance(run, SplitModel)
    for k in range(4):
        x = rng.standard_normal((3, 4)).astype(np.float32) * (k > 0)        # all zeros first: empty selections
        m = rng.random(4) > 0.5
        want = model(torch.from_numpy(x), torch.from_numpy(m))
        got = run(x, m)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape)
            np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_compress_with_a_condition_decided_at_run_time(backend, tmp_path):
    """ONNX Compress whose condition is a graph input: kept slices counted at run time (it was
    compiled per value of the condition)."""
    m = model([helper.make_node("Compress", ["x", "c"], ["y"], axis=1), helper.make_node("Compress", ["x", "c2"], ["z"])],
              [("x", F, [3, 4]), ("c", TensorProto.BOOL, [4]), ("c2", TensorProto.BOOL, [12])], [("y", F), ("z", F)])
    path = tmp_path / "compress.onnx"
    onnx.save(m, path)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    run = minic.compile(str(path), [x, np.ones(4, bool), np.ones(12, bool)], backend=backend)
    assert not isinstance(run, Specialized)
    for _ in range(3):
        c, c2 = rng.random(4) > 0.5, rng.random(12) > 0.5
        for g, w in zip(run(x, c, c2), ort_run(m, {"x": x, "c": c, "c2": c2})):
            np.testing.assert_array_equal(g, w)
