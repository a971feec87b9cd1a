"""ONNX files written by PyTorch's dynamo exporter (``torch.onnx.export(..., dynamo=True)``)
with dynamic dims, as users download them: a CNN over (N, H, W), an LSTM over (B, T) and a
Transformer encoder layer over (B, T) compile from the file and match ONNX Runtime at two
shapes each.  The exporter writes views as Shape -> Squeeze -> Mul -> Concat chains (minic
specializes them on sizes, never on data) and declares an LSTM's output at the export's
time length (a warning at another length, as ONNX Runtime gives)."""
from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import onnxscript  # noqa: F401  (torch's dynamo exporter writes with it)
import pytest
import torch

import minic


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        return torch.softmax(self.fc(torch.relu(self.conv(x)).mean((2, 3))), -1)


def _dims(*names):
    return {axis: torch.export.Dim(name, min=1, max=64) for axis, name in names}


CASES = {
    "cnn": (CNN, (2, 3, 16, 16), _dims((0, "N"), (2, "H"), (3, "W")), [(2, 3, 16, 16), (1, 3, 20, 24)]),
    "lstm": (lambda: torch.nn.LSTM(8, 6, batch_first=True), (2, 5, 8), _dims((0, "B"), (1, "T")),
             [(2, 5, 8), (1, 9, 8)]),
    "encoder": (lambda: torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), (2, 5, 16),
                _dims((0, "B"), (1, "T")), [(2, 5, 16), (3, 7, 16)]),
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dynamo")

    def export(name):
        make, shape, dims, _ = CASES[name]
        torch.manual_seed(0)
        path = folder / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(make().eval(), (torch.randn(*shape),), str(path), dynamo=True,
                              dynamic_shapes=(dims,), verbose=False)
        return path
    return export


@pytest.mark.parametrize("name", CASES)
def test_a_dynamo_exported_file_matches_onnx_runtime_at_two_shapes(exported, name):
    path = exported(name)
    first, *_ = CASES[name][3]
    model = minic.compile(path, [np.zeros(first, np.float32)])
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    for shape in CASES[name][3]:
        x = rng.standard_normal(shape).astype(np.float32)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")               # the LSTM's declared output length
            got = model(x)
        want = session.run(None, {session.get_inputs()[0].name: x})
        for g, w in zip(got if isinstance(got, tuple) else (got,), want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert not getattr(model, "values", None)         # specialized on sizes only, never on data
