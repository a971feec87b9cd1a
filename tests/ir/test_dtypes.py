"""Every element type through the whole compiler: text form, interpreter, lowering,
LLVM codegen and the runtime's input checks, each against PyTorch eager."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import minic
from minic.verify.tolerance import tolerance
from minic.errors import UserError
from minic.frontend.torch import TORCH_DTYPES, numpy_of
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.text import parse_graph, print_graph
from minic.ir.types import DType, TensorType
from minic.ir.verify import infer_node


def _array(dtype: DType, n: int = 20) -> np.ndarray:
    data = (np.arange(n) % 7 - 3).astype(np.float32)
    if dtype == DType.bool:
        return data > 0
    if dtype.is_unsigned:
        return np.abs(data).astype(dtype.numpy)
    return (data * (0.37 if dtype.is_float else 1)).astype(dtype.numpy)


@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
def test_text_round_trip(dtype, tmp_path):
    """Constants of every dtype print and parse back bit for bit, inline and in the .npz side file."""
    big, small = constant("big", _array(dtype).reshape(4, 5)), constant("small", _array(dtype)[:3])
    x = Value("x", TensorType(("B", 5), dtype))
    node = Node("identity", [x], [], ops.get("identity").attrs())
    node.outputs = [Value("y", infer_node(node)[0])]
    graph = Graph("g", [x], [node.outputs[0], big, small], [node], [big, small])
    for text, where in ((print_graph(graph), None),
                        (print_graph(graph, tmp_path / "g.npz", inline_limit=4), tmp_path / "g.mc")):
        back = parse_graph(text, where)
        assert back.inputs[0].type == x.type
        for a, b in zip(graph.constants, back.constants):
            assert b.data.dtype == a.data.dtype and b.data.tobytes() == a.data.tobytes()


class Mixed(torch.nn.Module):
    """Arithmetic, max, a reduction (integers sum in i64), a comparison, where and a cast."""
    def forward(self, x, y):
        c = torch.maximum((x + y) * y, x)
        return torch.where(c > x, c, c.sum(dim=-1, keepdim=True)), (c - x).to(torch.float32)


# u16, u32, u64 are ONNX's: torch 2.13 has no arithmetic on them ("add_stub" not implemented for
# 'UInt32'), so they are checked against ONNX's expected outputs (the node suite) and numpy, below.
NUMERIC = [d for d in DType if d != DType.bool and d not in (DType.u16, DType.u32, DType.u64)]


@pytest.mark.parametrize("dtype", [DType.u16, DType.u32, DType.u64], ids=lambda d: d.value)
def test_wide_unsigned_end_to_end(dtype):
    """Arithmetic, unsigned compares and division, a cast from float past the signed range."""
    x = Value("x", TensorType((4,), dtype))
    y = Value("y", TensorType((4,), dtype))
    nodes, outs = [], []
    for op, args in (("add", [x, y]), ("div", [x, y]), ("gt", [x, y]), ("max", [x, y])):
        node = Node(op, args, [], ops.get(op).attrs())
        node.outputs = [Value(f"{op}_out", infer_node(node)[0])]
        nodes.append(node)
        outs.append(node.outputs[0])
    graph = Graph("g", [x, y], outs, nodes)
    top = np.iinfo(dtype.numpy).max
    a = np.array([top, top // 2 + 3, 7, 0], dtype.numpy)
    b = np.array([1, 2, 3, 1], dtype.numpy)
    want = [a + b, a // b, a > b, np.maximum(a, b)]
    for backend in ("interp", "minic"):
        got = minic.compile(graph, backend=backend)(a, b)
        for o, w in zip(got, want):
            assert o.dtype == w.dtype and np.array_equal(o, w), (backend, o, w)


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: d.value)
def test_dtype_end_to_end(dtype):
    torch_dtype = TORCH_DTYPES[dtype]
    g = torch.Generator().manual_seed(0)
    if dtype.is_float:
        x, y = (torch.randn(3, 5, generator=g).to(torch_dtype) for _ in range(2))
    else:
        x, y = (torch.randint(0, 5, (3, 5), generator=g).to(torch_dtype) for _ in range(2))
    want = [numpy_of(t) for t in Mixed()(x, y)]
    for backend in ("interp", "minic"):
        got = minic.compile(Mixed(), (x, y), backend=backend)(numpy_of(x), numpy_of(y))
        for o, w in zip(got, want):
            assert o.dtype == w.dtype, backend
            err = np.max(np.abs(o.astype(np.float64) - w.astype(np.float64))) / max(1.0, np.max(np.abs(w.astype(np.float64))))
            assert err <= tolerance(dtype.numpy), (backend, err)
    run = minic.compile(Mixed(), (x, y))
    with pytest.raises(UserError, match="expected dtype"):
        run(numpy_of(x).astype(np.float32 if dtype != DType.f32 else np.float64), numpy_of(y))
