"""Every zoo model, compiled by minic through the ``minic`` backend, against PyTorch
(1e-4, abs or rel); dynamic axes run at other sizes without recompiling."""
import numpy as np
import pytest
import torch

import minic.models as zoo
from minic import backends
from minic.backends import ModelSource


_SMALL: dict = {}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Small models compiled once per test module (the llama tests share one)."""
    def get(name):
        if name not in _SMALL:
            _SMALL[name] = compiled(name, "small", tmp_path_factory.mktemp(name))
        return _SMALL[name]
    return get


def compiled(name: str, size: str, tmp_path):
    module, inputs = zoo.get(name, size=size)
    arrays = tuple(i.numpy() for i in inputs)
    source = ModelSource(name, arrays, module=module, dynamic_axes=zoo.info(name).dynamic_axes)
    return module, inputs, backends.get("minic")(source, cache_dir=tmp_path)


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    # 1e-4 absolute or relative to the output's scale
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


@pytest.mark.parametrize("name", zoo.names())
def test_small_model_matches_torch(name, small):
    module, inputs, model = small(name)
    with torch.no_grad():
        want = module(*inputs).numpy()
    assert_close(model(*(i.numpy() for i in inputs)), want)


def test_llama_other_batch_and_length_without_recompiling(small):
    module, inputs, model = small("llama-tiny")
    for batch, length in [(1, 5), (3, 9), (1, 1)]:
        ids = torch.randint(0, 256, (batch, length), generator=torch.Generator().manual_seed(length))
        with torch.no_grad():
            want = module(ids).numpy()
        assert_close(model(ids.numpy()), want)


@pytest.mark.slow
@pytest.mark.parametrize("name", zoo.names())
def test_full_model_matches_torch(name, tmp_path):
    module, inputs, model = compiled(name, "full", tmp_path)
    with torch.no_grad():
        want = module(*inputs).numpy()
    assert_close(model(*(i.numpy() for i in inputs)), want)
