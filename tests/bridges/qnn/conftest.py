"""Shared pieces of the QNN tests.

The ``qnn`` backend and CLI are entry points (pyproject.toml); until the package
metadata is reinstalled (``pip install -e .``), the installed metadata may not
list them yet.  ``declared_entry_points`` then adds the ones pyproject.toml
declares, so that the tests go through ``minic.compile(backend="qnn")`` and
``python -m minic qnn`` exactly as they will once installed.
"""
from __future__ import annotations

import tomllib
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[3]


def _declared(group: str) -> list[EntryPoint]:
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][group]
    return [EntryPoint(name, value, group) for name, value in table.items() if name == "qnn"]


@pytest.fixture(autouse=True)
def declared_entry_points(monkeypatch):
    import minic.backends
    import minic.cli

    def with_declared(group: str):
        installed = list(entry_points(group=group))
        names = {ep.name for ep in installed}
        return installed + [ep for ep in _declared(group) if ep.name not in names]

    monkeypatch.setattr(minic.backends, "entry_points", with_declared)
    monkeypatch.setattr(minic.cli, "entry_points", with_declared)


def sinh_erf_model(erf: bool = True) -> onnx.ModelProto:
    """x[B, 8] -> MatMul -> Sinh -> Erf -> MatMul -> y[B, 4] (without ``erf``: no Erf).

    The QNN EP has no Sinh and no Erf (outside its GELU pattern): both stay on
    the CPU; the bridge's decompose-hyperbolic rewrite moves Sinh to the HTP.
    """
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 4])
    weights = [numpy_helper.from_array((rng.standard_normal((8, 8)) * 0.3).astype(np.float32), "w1"),
               numpy_helper.from_array((rng.standard_normal((8, 4)) * 0.3).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Sinh", ["h"], ["s"], name="sinh"),
             helper.make_node("Erf" if erf else "Identity", ["s"], ["e"], name="erf" if erf else "id"),
             helper.make_node("MatMul", ["e", "w2"], ["y"], name="fc2")]
    graph = helper.make_graph(nodes, "sinh_erf", [x], [y], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture
def sinh_erf_path(tmp_path) -> Path:
    path = tmp_path / "sinh_erf.onnx"
    onnx.save(sinh_erf_model(), str(path))
    return path


@pytest.fixture
def erf_module():
    """A torch model whose standalone erf the QNN EP cannot take."""
    import torch

    class ErfHead(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = torch.nn.Linear(8, 4)

        def forward(self, x):
            return torch.erf(self.fc(x))

    torch.manual_seed(0)
    return ErfHead().eval(), (torch.randn(2, 8),)
