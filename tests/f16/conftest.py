"""What the compiled-precision tests share: a compile cache of their own, and ``run``."""
from __future__ import annotations

import pytest

from minic import backends
from minic.compare import as_tuple
from minic.verify.precision import source


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def run(cache):
    """run(name, precision, backend="minic"): the outputs of a zoo model or a precision stress
    graph (minic.verify.precision.source) at ``precision`` on ``backend``."""
    def outputs(name: str, precision: str, backend: str = "minic"):
        src = source(name)
        options = {"cache_dir": cache} if backend == "minic" else {}
        return as_tuple(backends.get(backend)(src, precision=precision, **options)(*src.example_inputs))
    return outputs
