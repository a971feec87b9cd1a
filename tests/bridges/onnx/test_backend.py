"""``minic.compile(..., backend="onnxruntime")``."""
import numpy as np
import pytest
import torch

from minic import backends
from minic.api import compile as minic_compile
from minic.backends import ModelSource
from minic.errors import UnsupportedError, UserError


def test_backend_is_registered():
    assert "onnxruntime" in backends.names()


def test_zoo_model_matches_torch_at_several_shapes():
    run = minic_compile("llama-tiny", backend="onnxruntime", size="small")
    ref = minic_compile("llama-tiny", backend="torch", size="small")
    for shape in [(1, 3), (4, 20)]:
        ids = np.random.default_rng(0).integers(0, 256, size=shape)
        np.testing.assert_allclose(run(ids), ref(ids), atol=1e-4, rtol=0)


def test_onnx_file_runs_without_a_torch_module(tmp_path, llama_small):
    from bridges.onnx.backend import compile as ort_compile
    from bridges.onnx.export import save
    exported, module = llama_small
    path = save(exported.model, tmp_path / "llama.onnx")
    run = ort_compile(ModelSource("llama", exported.example_inputs, onnx_path=path),
                      optimize=False, level="basic")
    ids = exported.example_inputs[0]
    with torch.no_grad():
        np.testing.assert_allclose(run(ids), module(torch.from_numpy(ids)).numpy(), atol=1e-4)
    with pytest.raises(UserError, match="takes 1 input"):
        run(ids, ids)


def test_bad_options_and_sources_are_clear_errors():
    from bridges.onnx.backend import compile as ort_compile
    module = torch.nn.Linear(3, 2)
    source = ModelSource("lin", (np.ones((1, 3), np.float32),), module=module)
    with pytest.raises(UserError, match="no option 'speed'"):
        ort_compile(source, speed=3)
    with pytest.raises(UnsupportedError, match="provider 'NoSuchExecutionProvider'"):
        ort_compile(source, provider="NoSuchExecutionProvider")
    with pytest.raises(UnsupportedError, match="needs a torch model or an .onnx file"):
        ort_compile(ModelSource("g", (np.ones(1, np.float32),)))
