"""Whole models through MLIR: Graph -> linalg -> LLVM -> JIT, against PyTorch and minic's interpreter."""
import warnings

import numpy as np
import pytest
import torch

from bridges.mlir.backend import compile as mlir_compile
from minic.backends import ModelSource
from minic.errors import UserError
from minic.ir.interpret import interpret

warnings.filterwarnings("ignore", category=FutureWarning)


class Mixer(torch.nn.Module):
    """Elementwise, contraction, reduction, normalization and layout ops in one module."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(11, 8)
        self.fc = torch.nn.Linear(8, 8)
        self.ln = torch.nn.LayerNorm(8)

    def forward(self, ids, x):
        h = self.emb(ids) + x                                  # gather, broadcast add
        h = torch.nn.functional.gelu(self.ln(self.fc(h)))       # gemm/matmul, layer_norm, gelu(erf)
        a = torch.softmax(h @ h.transpose(1, 2) / 3.0, dim=-1)  # batched matmul, transpose, softmax
        h = torch.cat([a @ h, h[:, :, 2:6].sum(-1, keepdim=True).expand(-1, -1, 4)], dim=-1)
        h = torch.where(h > 0, torch.tanh(h), torch.sigmoid(h) * h.amax(-1, keepdim=True))
        return torch.log_softmax(h, -1) + h.float().mean()


class Convs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=4, bias=False)
        self.pool = torch.nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.avg = torch.nn.AvgPool2d(2, stride=2, padding=1, count_include_pad=False)

    def forward(self, x):
        h = torch.relu(self.bn(self.c1(x)))
        h = self.avg(self.pool(self.c2(h)))
        return torch.flatten(h, 1)


VIAS = ["linalg", "tosa"]     # emit linalg directly, or TOSA lowered by tosa-to-linalg-pipeline


def check(module, inputs, dynamic_axes=(), via="linalg"):
    torch.manual_seed(0)
    module.eval()
    arrays = tuple(np.ascontiguousarray(t.numpy()) for t in inputs)
    source = ModelSource(type(module).__name__, arrays, module=module, dynamic_axes=dynamic_axes)
    run = mlir_compile(source, via=via)
    got = run(*arrays)
    want = module(*inputs).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    np.testing.assert_allclose(got, interpret(source.graph, list(arrays))[0], atol=1e-5, rtol=0)
    return run, source


@pytest.mark.parametrize("via", VIAS)
def test_mixed_ops_match_torch_and_the_interpreter(via):
    torch.manual_seed(1)
    check(Mixer(), (torch.randint(0, 11, (2, 5)), torch.randn(2, 5, 8)), via=via)


@pytest.mark.parametrize("via", VIAS)
def test_convs_and_pools_match_torch(via):
    torch.manual_seed(2)
    m = Convs()
    with torch.no_grad():                       # non-trivial running statistics
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    check(m, (torch.randn(2, 3, 15, 13),), via=via)


def test_dynamic_batch_compiles_one_kernel_per_binding():
    torch.manual_seed(3)
    m = torch.nn.Sequential(torch.nn.Linear(6, 4), torch.nn.ReLU()).eval()
    run, source = check(m, (torch.randn(3, 6),), dynamic_axes=({0: "B"},))
    x5 = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_allclose(run(x5), m(torch.from_numpy(x5)).detach().numpy(), atol=1e-5)
    assert sorted(run.kernels) == [(("B", 3),), (("B", 5),)]
    with pytest.raises(UserError, match="expected rank 2"):
        run(x5[0])


def test_unknown_option_is_a_user_error():
    src = ModelSource("m", (np.zeros((1, 2), np.float32),), module=torch.nn.Linear(2, 2))
    with pytest.raises(UserError, match="unknown option"):
        mlir_compile(src, tile=4)
    with pytest.raises(UserError, match="via='onnx'; choose from linalg, tosa"):
        mlir_compile(src, via="onnx")


ZOO_SLOW = {"resnet50", "bert-base", "llama-tiny"}      # each op of theirs is covered above


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ZOO_SLOW else n
                                  for n in ["mlp", "cnn", "resnet50", "bert-base", "llama-tiny"]])
def test_zoo_model_matches_torch(name, via):
    import minic

    from minic.api import load
    source = load(name, size="small")
    got = minic.backends.get("mlir")(source, via=via)(*source.example_inputs)
    want = source.module(*[torch.from_numpy(a) for a in source.example_inputs]).detach().numpy()
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def test_cli_model_emit(capsys):
    from minic.cli import main
    assert main(["mlir", "mlp", "--emit", "linalg", "--emit", "affine", "--run"]) == 0
    out = capsys.readouterr().out
    assert "IR after stage 'linalg'" in out and "linalg.generic" in out and "affine.for" in out
    assert "max |mlir - minic interpreter|" in out


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet50", "bert-base", "llama-tiny"])
def test_cli_emits_tosa_for_every_zoo_model(capsys, name):
    from minic.cli import main
    assert main(["mlir", name, "--emit", "tosa"]) == 0
    out = capsys.readouterr().out
    assert "IR after stage 'tosa'" in out and "tosa.matmul" in out and "linalg." not in out


def test_cli_model_from_tosa_down_to_linalg_and_run(capsys):
    from minic.cli import main
    assert main(["mlir", "cnn", "--emit", "tosa", "--emit", "linalg", "--run"]) == 0
    out = capsys.readouterr().out
    tosa_text, linalg_text = out.split("IR after stage 'linalg'")
    assert "tosa.conv2d" in tosa_text and "tosa.max_pool2d" in tosa_text
    assert "linalg.conv_2d_nhwc_fhwc" in linalg_text and "tosa." not in linalg_text
    assert "JIT run (tosa): max |mlir - minic interpreter|" in out


@pytest.mark.parametrize("kwargs", [dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
                                    dict(kernel_size=2, stride=1, padding=1, count_include_pad=False),
                                    dict(kernel_size=3, stride=2, ceil_mode=True, count_include_pad=True)])
@pytest.mark.parametrize("via", VIAS)
def test_avg_pool_divisors(kwargs, via):
    torch.manual_seed(4)
    check(torch.nn.AvgPool2d(**kwargs), (torch.randn(1, 2, 7, 8),), via=via)


class Positions(torch.nn.Module):
    """What the corpus decoders and RoBERTa build from token ids: position ids from a cumsum
    of the padding mask, an arange-based causal mask, and a gather of the embeddings."""

    def __init__(self):
        super().__init__()
        self.pos = torch.nn.Embedding(16, 4)

    def forward(self, ids):
        mask = ids.ne(1).int()
        pos = (torch.cumsum(mask, dim=1).type_as(mask) * mask).long() + 1   # RoBERTa's position ids
        t = torch.arange(ids.shape[1])
        causal = (t[None, :] <= t[:, None]).float()
        h = torch.gather(self.pos(pos), 2, pos[..., None].expand(-1, -1, 4) % 4)
        return causal @ h + torch.cumsum(h, dim=-1)


def test_masks_and_positions_from_data_match_torch_at_two_lengths():
    torch.manual_seed(5)
    module = Positions().eval()
    run, _ = check(module, (torch.randint(0, 5, (2, 7)),), dynamic_axes=({0: "B", 1: "T"},))
    ids = torch.randint(0, 5, (2, 11))
    np.testing.assert_allclose(run(ids.numpy()), module(ids).detach().numpy(), atol=1e-5, rtol=0)


def one_node(op, arrays, **attrs):
    """A one-node graph of ``op`` on ``arrays``: the MLIR path's result and the op's reference."""
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.types import DType, TensorType
    from minic.ir.verify import infer_node
    from bridges.mlir.backend import MlirModel
    inputs = [Value(f"x{k}", TensorType(a.shape, DType.of(a.dtype))) for k, a in enumerate(arrays)]
    node = Node(op, inputs, [], ops.get(op).make_attrs(**attrs))
    node.outputs = [Value("y", infer_node(node)[0])]
    return MlirModel(Graph(op, inputs, node.outputs, [node]))(*arrays), ops.get(op).reference(node.attrs, *arrays)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_running_ops_match_the_reference_for_every_direction(op, dtype):
    x = np.random.default_rng(6).integers(-3, 4, (3, 5, 4)).astype(dtype)
    for axis in (1, -1):
        for exclusive in (False, True):
            for reverse in (False, True):
                attrs = dict(axis=axis, exclusive=exclusive, reverse=reverse)
                got, want = one_node(op, [x], **attrs)
                np.testing.assert_array_equal(got, want, err_msg=str(attrs))


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_mod_matches_the_reference_both_ways(dtype):
    rng = np.random.default_rng(7)
    a, b = rng.integers(-9, 10, (4, 6)).astype(dtype), rng.integers(-4, 5, (6,)).astype(dtype)
    b = np.where(b == 0, 3, b).astype(dtype)          # an integer x mod 0 is a DataError in the reference
    if dtype == np.float32:
        a, b = a * 0.75, b * 0.5
    for fmod in (False, True):
        got, want = one_node("mod", [a, b], fmod=fmod)
        np.testing.assert_allclose(got, want, atol=1e-6, err_msg=f"fmod={fmod}")
