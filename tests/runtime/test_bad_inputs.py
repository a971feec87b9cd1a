"""A compiled model (and the interpreter) called with bad inputs: every case is a
one-line UserError raised before native code runs; odd-but-valid inputs work."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import minic
from minic.errors import UserError


@pytest.fixture(scope="module", params=["minic", "interp"])
def mlp(request):
    source = minic.load("mlp", size="small")
    return minic.compile(source, backend=request.param), source


@pytest.mark.parametrize("make,words", [
    (lambda x: (), "takes 1 inputs, got 0"),
    (lambda x: (x, x), "takes 1 inputs, got 2"),
    (lambda x: (x.astype(np.float64),), "expected dtype f32, got float64"),
    (lambda x: (x[None],), "expected rank 2"),
    (lambda x: (np.zeros((2, 5), np.float32),), "axis 1: expected 64, got 5"),
    (lambda x: (np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (10**12, 64), (0, 4)),),
     "needs 232.8 TiB"),
])
def test_bad_inputs_are_clear_errors(mlp, make, words):
    run, source = mlp
    with pytest.raises(UserError, match=words):
        run(*make(source.example_inputs[0]))


def test_non_contiguous_and_empty_inputs_are_handled(mlp):
    run, source = mlp
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    np.testing.assert_allclose(run(np.asfortranarray(x)), run(x), rtol=1e-6)
    wide = np.repeat(x, 2, axis=1)
    np.testing.assert_allclose(run(wide[:, ::2]), run(x), rtol=1e-6)       # a strided view
    assert run(np.zeros((0, 64), np.float32)).shape == (0, 10)


def test_nan_and_inf_propagate_like_pytorch(mlp):
    run, source = mlp
    x = source.example_inputs[0].copy()
    x[0, 0], x[1, :] = np.nan, np.inf
    want = source.module(torch.from_numpy(x)).detach().numpy()
    got = run(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))


def test_errors_name_an_input_as_the_graph_does(tmp_path):
    """The buffer of input 'x.1' is x_1 (a C identifier); a message says 'x.1'."""
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.loops import Role
    from minic.ir.types import DType, TensorType
    from minic.runtime import CompileOptions, compile_graph
    t = TensorType(("B", 4), DType.f32)
    x, y = Value("x.1", t), Value("y", t)
    model = compile_graph(Graph("g", [x], [y], [Node("relu", [x], [y], ops.get("relu").make_attrs())]),
                          CompileOptions(cache_dir=tmp_path))
    assert [s.name for s in model.layout.role(Role.INPUT)] == ["x_1"]
    with pytest.raises(UserError, match=r"input 'x\.1': expected dtype f32"):
        model(np.zeros((2, 4), np.float64))
