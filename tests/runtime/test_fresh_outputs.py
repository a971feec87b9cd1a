"""Every output is an array of its own on every path: writing into a result changes
neither the caller's input, nor a constant of the model, nor another output, nor
what the next call returns."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import DType, TensorType


def graphs() -> dict[str, Graph]:
    x = Value("x", TensorType((2, 3), DType.f32))
    c = constant("c", np.arange(6, dtype=np.float32).reshape(2, 3))
    r = Value("r", TensorType((3, 2), DType.f32))
    reshape = Node("reshape", [x], [r], ops.get("reshape").make_attrs(shape=(3, 2)))
    return {"input": Graph("input", [x], [x], [], []),                     # the output is the input
            "constant": Graph("constant", [x], [c], [], [c]),              # the output is a constant
            "twice": Graph("twice", [x], [x, x], [], []),                  # one value, two outputs
            "view": Graph("view", [x], [r], [reshape], []),                # numpy's reshape is a view
            "both": Graph("both", [x], [c, x], [], [c])}


@pytest.mark.parametrize("backend", ["interp", "minic"])
@pytest.mark.parametrize("name", list(graphs()))
def test_writing_into_a_result_changes_nothing_else(backend, name, tmp_path):
    graph = graphs()[name]
    x = np.arange(6, dtype=np.float32).reshape(2, 3) + 10
    options = {"cache_dir": tmp_path} if backend == "minic" else {}
    run = minic.compile(graph, [x.copy()], backend=backend, **options)
    given = x.copy()
    first = run(given)
    first = list(first) if isinstance(first, tuple) else [first]
    expected = [o.copy() for o in first]
    for k, out in enumerate(first):
        out[...] = -1 - k                         # each output written with its own figure
    np.testing.assert_array_equal(given, x)       # the caller's input is untouched
    for k, out in enumerate(first):               # no output shares memory with another
        assert (out == -1 - k).all()
    again = run(x.copy())
    again = list(again) if isinstance(again, tuple) else [again]
    for got, want in zip(again, expected):        # the model's constants are untouched
        np.testing.assert_array_equal(got, want)
