"""The reference engines of `minic bench` behind the backend protocol: OpenVINO
(f32 precision, thread count set) and tinygrad on the model's ONNX export, and
ONNX Runtime's thread option.  Outputs are checked against PyTorch eager."""
import numpy as np
import pytest
import torch

from bridges.engines import openvino, tinygrad
from bridges.onnx import backend as ort_backend
from minic import tools
from minic.api import load
from minic.errors import UserError


def eager(source):
    with torch.no_grad():
        return source.module(*(torch.from_numpy(x) for x in source.example_inputs)).numpy()


@pytest.fixture(scope="module")
def mlp():
    return load("mlp", size="small")


def test_openvino_runs_the_onnx_export_at_f32_on_the_threads_asked(mlp):
    run = openvino.compile(mlp, threads=1)
    out = run(*mlp.example_inputs)
    assert out.shape == (2, 10) and np.abs(out - eager(mlp)).max() < 1e-5
    assert run.settings == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 1}
    assert openvino.config("f32", 2) == {"INFERENCE_PRECISION_HINT": "f32", "INFERENCE_NUM_THREADS": 2}


@pytest.mark.parametrize("options, message", [({"precision": "f8"}, "precision must be one of f32, bf16"),
                                              ({"threads": 0}, "threads must be a positive integer"),
                                              ({"warp": 1}, "has no option 'warp'")])
def test_openvino_rejects_bad_options(mlp, options, message):
    with pytest.raises(UserError, match=message):
        openvino.compile(mlp, **options)


def test_tinygrad_runs_the_onnx_export(mlp):
    run = tinygrad.compile(mlp)
    out = run(*mlp.example_inputs)
    assert out.shape == (2, 10) and np.abs(out - eager(mlp)).max() < 1e-5
    x = mlp.example_inputs[0] * 2                       # the jitted kernels take new data
    with torch.no_grad():
        assert np.abs(run(x) - mlp.module(torch.from_numpy(x)).numpy()).max() < 1e-5


def test_tinygrad_without_clang_is_one_line_naming_the_package(mlp, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(tools.MissingToolError, match="apt-get install clang"):
        tinygrad.compile(mlp)


def test_onnxruntime_takes_a_thread_count(mlp):
    run = ort_backend.compile(mlp, threads=1)
    assert np.abs(run(*mlp.example_inputs) - eager(mlp)).max() < 1e-5
    with pytest.raises(UserError, match="threads must be a positive integer"):
        ort_backend.compile(mlp, threads="two")
