"""Shared fixtures: the small zoo and PyTorch's outputs, built once per test run."""
import pytest


@pytest.fixture(scope="session")
def zoo_small():
    """``{name: (ModelSource, PyTorch's outputs)}`` for every zoo model at size small."""
    from minic import backends, models
    from minic.api import load
    from minic.compare import as_tuple

    out = {}
    for name in models.names():
        source = load(name, size="small")
        out[name] = (source, as_tuple(backends.get("torch")(source)(*source.example_inputs)))
    return out


@pytest.fixture(scope="session")
def torch_mlir_zoo(zoo_small):
    """``{(name, via): MLIR text}``: torch-mlir's import of every small zoo model in StableHLO and
    linalg, all in ONE child process (bridges/iree/child.py: starting one costs seconds)."""
    from bridges.iree.importers import torch_mlir_texts

    keys = [(name, via) for via in ("stablehlo", "linalg") for name in zoo_small]
    texts = torch_mlir_texts([(zoo_small[n][0].module, zoo_small[n][0].example_inputs, v) for n, v in keys])
    return dict(zip(keys, texts))
