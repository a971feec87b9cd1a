"""Sizes an op computes from symbolic sizes (a strided convolution's or pool's rows, a pad's
T + 3, a concatenation's T + U, a strided slice) are derived dims: the model compiles once
with them and matches ONNX Runtime at every input size; a size too small for an op is one
line, before any kernel runs."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic.errors import UserError
from minic.runtime.compiled import CompiledModel
from minic.runtime.specialize import Specialized

ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")


class Net(torch.nn.Module):
    """A ResNet-like stem and block, then pad, concat and a strided slice over N, H, W."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 7, stride=2, padding=3)
        self.b1 = torch.nn.Conv2d(16, 32, 3, padding=1)
        self.b2 = torch.nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=4)
        self.head = torch.nn.Conv2d(32, 8, 1)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.stem(x)), 3, 2, 1)
        z = self.b2(torch.relu(self.b1(y)))
        a = torch.nn.functional.avg_pool2d(z, 3, 1, 1, count_include_pad=False)
        p = torch.nn.functional.pad(a, (1, 2, 0, 1))
        c = torch.cat([p, p * 2], dim=3)
        return self.head(c).mean(dim=2), c[:, :, 1:-1:2, :]


@pytest.fixture(scope="module")
def net_file(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("derived") / "net.onnx"
    torch.onnx.export(Net().eval(), (torch.randn(1, 3, 64, 64),), str(path), input_names=["x"],
                      dynamic_axes={"x": {0: "N", 2: "H", 3: "W"}}, dynamo=False)
    return path


def test_the_sizes_read_as_formulas(net_file):
    from minic.frontend.onnx import from_onnx_file
    types = {n.op: str(n.outputs[0].type) for n in from_onnx_file(net_file).nodes if n.outputs[0].type.rank == 4}
    assert types["max_pool2d"] == "f32[N, 16, ((H + 3)/4), ((W + 3)/4)]"          # stem and pool: one floor
    assert types["pad"] == "f32[N, 32, ((H + 7)/8 + 1), ((W + 7)/8 + 3)]"
    assert types["concat"] == "f32[N, 32, ((H + 7)/8 + 1), 2*((W + 7)/8 + 3)]"
    assert types["slice"] == "f32[N, 32, ((H + 7)/16), 2*((W + 7)/8 + 3)]"        # [1:-1:2] of H/8 + 1 rows


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_one_compilation_matches_onnxruntime_at_every_size(net_file, backend, tmp_path):
    rng = np.random.default_rng(0)
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(net_file, [rng.standard_normal((1, 3, 64, 64)).astype(np.float32)], backend=backend,
                        **options)
    assert not isinstance(run, Specialized)
    if backend == "minic":
        assert isinstance(run, CompiledModel) and len(run.layout.derived) >= 6
    session = ort.InferenceSession(str(net_file), providers=["CPUExecutionProvider"])
    for shape in [(1, 3, 64, 64), (2, 3, 37, 53), (1, 3, 100, 29), (1, 3, 17, 17)]:
        x = rng.standard_normal(shape).astype(np.float32)
        for got, want in zip(run(x), session.run(None, {"x": x})):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(UserError, match=r"size \(\(H \+ 7\)/16\) is 0 at .*'H': 8.*too small"):
        run(np.zeros((1, 3, 8, 8), np.float32))          # the strided slice has no row left


def test_a_saved_layout_keeps_the_sizes_it_checks(net_file, tmp_path):
    from minic.runtime.layout import EntryLayout
    run = minic.compile(net_file, [np.zeros((1, 3, 32, 32), np.float32)], cache_dir=tmp_path)
    again = EntryLayout.from_json(run.layout.to_json())
    assert again == run.layout and "((H + 7)/16)" in again.derived


class Frames(torch.nn.Module):
    """wav2vec 2.0's front end, small: strided 1-D convolutions over raw samples, group norm."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(1, 8, 10, stride=5)
        self.norm = torch.nn.GroupNorm(8, 8)
        self.c2 = torch.nn.Conv1d(8, 8, 3, stride=2)

    def forward(self, x):
        y = torch.nn.functional.gelu(self.norm(self.c1(x[:, None, :])))
        return self.c2(y).transpose(1, 2)


def test_torch_exports_sizes_as_formulas_and_one_compilation_runs_every_length(tmp_path):
    """torch.export's sympy sizes, ``(s1//5) - 1``, become derived dims; the model from the
    torch frontend compiles once and matches eager at three lengths."""
    from minic.frontend.torch import from_torch
    from minic.runtime import CompileOptions, compile_graph
    torch.manual_seed(0)
    module = Frames().eval()
    graph = from_torch(module, (torch.randn(2, 400),), ({0: "B", 1: "T"},))
    assert [str(v.type) for v in graph.outputs] == ["f32[B, (T/10 - 1), 8]"]     # ⌊(⌊(T-10)/5⌋+1-3)/2⌋+1
    compiled = compile_graph(graph, CompileOptions(cache_dir=tmp_path))
    for batch, length in ((2, 400), (1, 1001), (3, 23)):
        x = torch.randn(batch, length, generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            want = module(x).numpy()
        got = compiled(x.numpy())
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with pytest.raises(UserError, match="too small"):
        compiled(np.zeros((1, 14), np.float32))


def _resize_file(path, scales, **attrs):
    from onnx import TensorProto, helper, save
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest", **attrs)
    graph = helper.make_graph([node], "up", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("scales", TensorProto.FLOAT, [4], scales)])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
    return str(path)


@pytest.mark.parametrize("scales, attrs, kind", [
    ([1, 1, 2, 2], {}, CompiledModel),                                          # a U-Net's / YOLO's upsampling
    ([1, 1, 3, 2], {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, CompiledModel),
    ([1, 1, 2, 2], {"coordinate_transformation_mode": "align_corners"}, CompiledModel),
    ([1, 1, 2, 2], {"nearest_mode": "ceil"}, Specialized),                     # not each element twice
    ([1, 1, 2.5, 2], {}, Specialized)])
def test_a_nearest_resize_by_a_whole_factor_keeps_its_sizes_symbolic(tmp_path, scales, attrs, kind):
    path = _resize_file(tmp_path / "up.onnx", scales, **attrs)
    run = minic.compile(path, [np.zeros((1, 3, 4, 5), np.float32)], cache_dir=tmp_path)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for shape in [(1, 3, 4, 5), (2, 3, 7, 3), (1, 3, 1, 9)]:
        x = np.random.default_rng(shape[2]).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(run(x), session.run(None, {"x": x})[0])
    assert type(run) is kind


def test_torch_nearest_upsampling_keeps_its_sizes_symbolic(tmp_path):
    from minic.frontend.torch import from_torch
    from minic.runtime import CompileOptions, compile_graph

    class Up(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=(3, 2), mode="nearest")

    graph = from_torch(Up(), (torch.randn(1, 2, 5, 6),), ({0: "N", 2: "H", 3: "W"},))
    assert str(graph.outputs[0].type) == "f32[N, 2, 3*H, 2*W]"
    compiled = compile_graph(graph, CompileOptions(cache_dir=tmp_path))
    for shape in [(1, 2, 5, 6), (2, 2, 7, 3)]:
        x = torch.randn(*shape)
        np.testing.assert_array_equal(compiled(x.numpy()), Up()(x).numpy())


def test_a_torch_cnn_with_upsampling_compiles_once_for_every_size():
    """minic.compile on a torch module with dynamic N, H, W: the conv's rows, torch's
    2·(⌊(H+2)/4⌋ - 2) + 2 after the upsampling and minic's 2*((H + 2)/4 - 1), are one size."""

    class UpNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.c2 = torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Conv2d(8, 4, 3, stride=2)

        def forward(self, x):
            y = torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
            return torch.nn.functional.interpolate(self.c2(y), scale_factor=2)

    torch.manual_seed(0)
    module = UpNet().eval()
    run = minic.compile(module, [torch.randn(2, 3, 40, 48)], dynamic={"x": {0: "N", 2: "H", 3: "W"}})
    assert type(run) is CompiledModel
    for shape in [(2, 3, 40, 48), (1, 3, 33, 21), (3, 3, 64, 64)]:
        x = torch.randn(*shape)
        with torch.no_grad():
            np.testing.assert_allclose(run(x.numpy()), module(x).numpy(), rtol=1e-4, atol=1e-5)
