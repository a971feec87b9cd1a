"""Shared by the cross tests: a small graph whose kernel LLVM vectorizes."""
import numpy as np
import pytest

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType, TensorType


def make_scale_shift() -> Graph:
    """y = relu(x * w + b) over x[B, 256]: an elementwise kernel LLVM vectorizes."""
    rng = np.random.default_rng(0)
    x = Value("x", TensorType(("B", 256), DType.f32))
    w, b = constant("w", rng.standard_normal(256, np.float32)), constant("b", rng.standard_normal(256, np.float32))
    h = [Value(f"h{k}", TensorType(("B", 256), DType.f32)) for k in range(3)]
    mk = lambda op, ins, out: Node(op, ins, [out], ops.get(op).make_attrs())
    return Graph("scale_shift", [x], [h[2]], [mk("mul", [x, w], h[0]), mk("add", [h[0], b], h[1]),
                                             mk("relu", [h[1]], h[2])], [w, b])


@pytest.fixture
def scale_shift() -> Graph:
    return make_scale_shift()


@pytest.fixture
def scale_shift_mc(tmp_path):
    """The same graph as a .mc text file (weights in a .npz beside it)."""
    from minic.ir.text import print_graph
    path = tmp_path / "scale_shift.mc"
    path.write_text(print_graph(make_scale_shift(), npz_path=path.with_suffix(".npz")))
    return path
