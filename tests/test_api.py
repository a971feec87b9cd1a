"""minic.compile accepts every kind of model a user has and returns numpy → numpy."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import minic
from minic import backends
from minic.errors import UserError


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x)), x.sum(dim=1)


def test_module_with_two_outputs_through_interp_matches_torch():
    torch.manual_seed(0)
    m, x = Tiny().eval(), torch.randn(2, 4)
    got = minic.compile(m, (x,), backend="interp")(x.numpy())
    want = minic.compile(m, (x,), backend="torch")(x.numpy())
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_zoo_name_and_graph_and_text_file(tmp_path):
    from minic.ir.text import print_graph
    run = minic.compile("mlp", backend="interp", size="small")
    source = minic.load("mlp", size="small")
    x = source.example_inputs[0]
    ref = minic.compile("mlp", backend="torch", size="small")(x)
    np.testing.assert_allclose(run(x), ref, rtol=1e-4, atol=1e-5)
    graph = minic.api.graph_of(source)
    np.testing.assert_allclose(minic.compile(graph, backend="interp")(x), ref, rtol=1e-4, atol=1e-5)
    (tmp_path / "mlp.mc").write_text(print_graph(graph, npz_path=tmp_path / "mlp.npz"))
    np.testing.assert_allclose(minic.compile(tmp_path / "mlp.mc", backend="interp")(x), ref, rtol=1e-4, atol=1e-5)


def test_bad_models_and_backends():
    with pytest.raises(UserError, match="needs example_inputs"):
        minic.compile(Tiny(), backend="interp")
    with pytest.raises(UserError, match="cannot compile a int"):
        minic.compile(3)
    with pytest.raises(UserError, match="unknown backend"):
        minic.compile("mlp", backend="nope", size="small")


def test_every_backend_is_listed():
    assert {"torch", "interp", "minic", "onnxruntime", "tvm", "mlir"} <= set(backends.names())
