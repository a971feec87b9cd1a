"""The verify matrix on the whole zoo (small sizes): every model on every path
is ok against PyTorch within the tolerance policy (f32: 1e-4)."""
from __future__ import annotations

import pytest

from minic import models
from minic.cli.verify_cmd import markdown, verify_models

BACKENDS = ["interp", "minic", "onnxruntime", "tvm", "mlir"]


@pytest.mark.parametrize("name", models.names())
def test_every_path_matches_pytorch(name):
    cells = verify_models([name], BACKENDS, "small", seed=0)
    assert [c.backend for c in cells] == BACKENDS
    bad = [f"{c.backend}: {c.status} {c.detail}" for c in cells if c.status != "ok"]
    assert not bad, bad
    table = markdown(cells)
    assert table.count("| ok ") == len(BACKENDS)
