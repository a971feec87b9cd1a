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
