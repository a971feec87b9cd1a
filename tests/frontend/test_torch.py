"""The torch frontend: every zoo model, small and full, through torch.export and
the interpreter, against PyTorch eager; dynamic dims; the conversion table on
ops the zoo does not use; and the errors.

Tolerance: each element of the interpreter's output must be within 1e-4 of
torch's, absolutely or relatively: |got - want| <= 1e-4 * max(1, |want|).
"""
import inspect
from collections import Counter

import numpy as np
import pytest
import sympy
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._sympy.functions import FloorDiv, Mod

import minic.models as zoo
from minic.errors import UnsupportedError, UserError
from minic.frontend.torch import Converter, from_torch
from minic.ir.interpret import interpret
from minic.ir.verify import verify

TOLERANCE = 1e-4


def assert_matches_torch(graph, module, inputs) -> None:
    with torch.no_grad():
        want = module(*inputs)
    want = want if isinstance(want, tuple) else (want,)
    got = interpret(graph, [x.numpy() for x in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = w.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype
        if w.dtype == np.bool_ or w.dtype.kind == "i":
            np.testing.assert_array_equal(g, w)
        else:
            error = np.max(np.abs(g - w) / np.maximum(1.0, np.abs(w)), initial=0.0)
            assert error <= TOLERANCE, f"max error {error:.2e}"


# Full-size bert-base takes ~40 s on two busy cores (export and interpreter); its
# small version runs the very same conversions, so only `-m slow` runs it.
SLOW = {("bert-base", "full")}
ZOO_CASES = [pytest.param(name, size, marks=[pytest.mark.slow] if (name, size) in SLOW else [])
             for size in ("small", "full") for name in zoo.names()]


@pytest.mark.parametrize("name, size", ZOO_CASES)
def test_zoo_model_matches_torch(name: str, size: str) -> None:
    model, inputs = zoo.get(name, size)
    graph = verify(from_torch(model, inputs))
    assert [v.name for v in graph.inputs] == list(zoo.info(name).input_names)
    assert all(isinstance(d, int) for v in graph.values() for d in v.type.shape)
    assert_matches_torch(graph, model, inputs)


def other_sizes(name: str, inputs: tuple[torch.Tensor, ...], batch: int, seq: int) -> tuple[torch.Tensor, ...]:
    """The example inputs resized on their dynamic axes (tokens redrawn, images tiled)."""
    (x,) = inputs
    if x.dtype == torch.int64:
        return (torch.randint(0, int(x.max()) + 1, (batch, seq)),)
    return (x[:1].repeat(batch, *([1] * (x.dim() - 1))) * torch.linspace(0.5, 1.5, batch).view(-1, *([1] * (x.dim() - 1))),)


@pytest.mark.parametrize("name", zoo.names())
def test_dynamic_axes(name: str) -> None:
    model, inputs = zoo.get(name, "small")
    axes = zoo.info(name).dynamic_axes
    graph = verify(from_torch(model, inputs, dynamic_axes=axes))
    expected_input = tuple(axes[0].get(i, d) for i, d in enumerate(inputs[0].shape))
    assert graph.inputs[0].type.shape == expected_input
    assert graph.outputs[0].type.shape[0] == "B"
    for batch, seq in [(3, 5), (1, 11)]:
        assert_matches_torch(graph, model, other_sizes(name, inputs, batch, seq))


def test_dynamic_products_become_monomials() -> None:
    class Flat(nn.Module):
        def forward(self, x, y):
            rows = x.reshape(-1, 4)                         # [B*T, 4]
            return rows * 2, rows.view(-1) + y.repeat_interleave(4)     # [B*T, 4], [4*B*T]

    inputs = (torch.randn(2, 3, 4), torch.randn(2, 3))
    graph = verify(from_torch(Flat(), inputs, dynamic_axes=({0: "B", 1: "T"}, {0: "B", 1: "T"})))
    assert [v.type.shape for v in graph.outputs] == [("B*T", 4), ("4*B*T",)]
    assert_matches_torch(graph, Flat(), (torch.randn(5, 7, 4), torch.randn(5, 7)))


def test_dynamic_axis_with_an_example_of_size_one() -> None:
    model, (x,) = zoo.get("mlp", "small")
    graph = verify(from_torch(model, (x[:1],), dynamic_axes=({0: "B"},)))
    assert str(graph.inputs[0].type) == "f32[B, 64]"
    assert_matches_torch(graph, model, (x[:1],))
    assert_matches_torch(graph, model, (torch.randn(5, 64),))


def test_constants_are_named_by_fqn_and_shared() -> None:
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(10, 4)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.embed.weight        # weight tying: one parameter, used twice
            self.register_buffer("offset", torch.arange(4.0))
            self.scale = torch.tensor([0.5, 1.0, 1.5, 2.0])   # neither parameter nor buffer: lifted

        def forward(self, tokens):
            return self.head(self.embed(tokens) * self.scale + self.offset)

    module = Tied().eval()
    tokens = torch.tensor([[1, 2, 3]])
    graph = verify(from_torch(module, (tokens,), name="tied"))
    assert graph.name == "tied"
    # torch.export keeps one of the tied names; either way there is one constant for it.
    names = sorted(c.name for c in graph.constants)
    assert names in (["embed.weight", "offset", "scale"], ["head.weight", "offset", "scale"])
    assert_matches_torch(graph, module, (tokens,))

    model, inputs = zoo.get("llama-tiny", "small")
    names = {c.name for c in from_torch(model, inputs).constants}
    assert {"layers.0.attention.wq.weight", "embed.weight", "mask"} <= names


class Kitchen(nn.Module):
    """Ops the zoo does not use, each compared with torch through the interpreter."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2)
        self.dilated = nn.Conv2d(6, 6, 3, padding=2, dilation=2)
        self.bn = nn.BatchNorm2d(6, affine=False)
        self.ln = nn.LayerNorm(6, elementwise_affine=False)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, image, ids):
        x = self.bn(self.dilated(self.conv(image)))                        # [2, 6, 4, 4]
        pooled = F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False)
        a = F.adaptive_avg_pool2d(x, 2) + pooled[:, :, 1::2, 1::2]           # [2, 6, 2, 2]
        rows = a.flatten(2).transpose(1, 2)                                 # [2, 4, 6]
        h = self.ln(rows)
        first, second = h.split([2, 4], dim=-1)
        g = F.gelu(first, approximate="tanh").sum(dim=-1, keepdim=True) - second.amax(dim=1).unsqueeze(1)
        s = torch.log_softmax(g, dim=-1) * torch.tanh(g).exp().abs()
        counts = (ids > 2).to(torch.float32).sum(dim=1)                     # [2]
        s = s + counts.view(2, 1, 1) + ids[:, 0].view(2, 1, 1) / 4          # int / int is a float
        picked = torch.where((ids[:, :1] == 3).unsqueeze(-1), s, -s).select(1, 0)   # [2, 4]
        steps = torch.arange(4, dtype=torch.float32)                        # folded to a constant
        both = torch.cat([picked, torch.maximum(picked, steps).squeeze(0)], dim=0)
        flags = torch.stack([ids[0] != 3, ids[1] >= 2, ids[0] <= 1]).to(torch.int32)
        return torch.sub(both, steps.expand(4, 4), alpha=2).permute(1, 0), flags


def test_ops_outside_the_zoo_match_torch() -> None:
    torch.manual_seed(0)
    module = Kitchen().eval()
    inputs = (torch.randn(2, 4, 8, 8), torch.tensor([[3, 1, 4, 1], [5, 9, 2, 6]]))
    graph = verify(from_torch(module, inputs))
    ops = Counter(n.op for n in graph.nodes)
    for op in ("conv2d", "batch_norm", "avg_pool2d", "layer_norm", "split", "gelu", "log_softmax",
               "reduce_max", "where", "cast", "concat", "not"):
        assert ops[op] >= 1, op
    assert len(graph.outputs) == 2
    assert "arange" in {c.name for c in graph.constants}
    assert_matches_torch(graph, module, inputs)


def test_unsupported_op_names_the_op_and_the_source_line() -> None:
    class Cumulative(nn.Module):
        def forward(self, x):
            return x.erfinv() + 1

    line = inspect.getsourcelines(Cumulative.forward)[1] + 1
    with pytest.raises(UnsupportedError) as err:
        from_torch(Cumulative(), (torch.randn(3),))
    message = str(err.value)
    assert message.startswith("unsupported ATen op aten.erfinv.default at ")
    assert f"test_torch.py:{line} (return x.erfinv() + 1)" in message


def test_sizes_that_are_sums_or_floor_divisions_are_derived_dims() -> None:
    class Grow(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("tail", torch.ones(2, 3))

        def forward(self, x):
            return torch.cat([x, self.tail], dim=1)

    graph = from_torch(Grow(), (torch.randn(2, 5),), dynamic_axes=({1: "T"},))
    assert str(graph.outputs[0].type) == "f32[2, (T + 3)]"
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    np.testing.assert_array_equal(interpret(graph, [x])[0], np.concatenate([x, np.ones((2, 3), np.float32)], 1))

    b, t = sympy.symbols("s0 s1")
    cx = Converter(program=None, name="g", dynamic_axes=None, symbols={b: "B", t: "T"})
    assert cx.sym_dim(2 * b * t**2) == "2*B*T*T"
    assert cx.sym_dim(t + 3) == "(T + 3)"
    assert cx.sym_dim(FloorDiv(t - 10, 5) + 1) == "(T/5 - 1)"
    with pytest.raises(UserError, match=r"size Mod\(s1, 3\) is not a sum, multiple or floor division of named"):
        cx.sym_dim(Mod(t, 3))


def test_bad_dynamic_axes_and_failed_exports_are_user_errors() -> None:
    model, inputs = zoo.get("mlp", "small")
    with pytest.raises(UserError, match="dynamic_axes has 2 entries for 1 inputs"):
        from_torch(model, inputs, dynamic_axes=({0: "B"}, {0: "B"}))

    class Branchy(nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    with pytest.raises(UnsupportedError, match="torch.export failed for Branchy"):
        from_torch(Branchy(), (torch.randn(3),))

    class Scaled(nn.Module):
        def forward(self, x, n: int):
            return x * n

    with pytest.raises(UserError, match="input 'n' is 3, not a tensor"):
        from_torch(Scaled(), (torch.randn(3), 3))


def test_pool_indices_match_torch() -> None:
    """max_pool's second output (the flat index of each maximum in its plane), 1-D to 3-D and un-batched."""
    class Indices(nn.Module):
        def forward(self, x, y, z):
            a, i = F.max_pool1d(x, 3, 2, 1, return_indices=True)
            b, j = F.max_pool2d(y, 2, ceil_mode=True, return_indices=True)
            c, k = F.max_pool3d(z, 2, 1, 1, dilation=(1, 2, 1), return_indices=True)
            return a, i, b, j, c, k

    inputs = (torch.randn(2, 3, 9), torch.randn(3, 5, 7), torch.randn(1, 2, 4, 5, 4))
    assert_matches_torch(from_torch(Indices(), inputs), Indices(), inputs)


def test_adaptive_max_pool_indices_are_unsupported() -> None:
    class Indices(nn.Module):
        def forward(self, x):
            return F.adaptive_max_pool2d(x, 3, return_indices=True)

    with pytest.raises(UnsupportedError, match=r"adaptive_max_pool2d.* at .*test_torch\.py:\d+ .*indices output"):
        from_torch(Indices(), (torch.randn(1, 1, 7, 7),))
