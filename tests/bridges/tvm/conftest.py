"""Shared fixtures: the tiny model that gets tuned is tuned once per test run."""
import pytest


def _zoo_arrays(name: str, size: str):
    """(torch module, numpy inputs, PyTorch's output) of a zoo model."""
    import torch

    from minic import models
    module, inputs = models.get(name, size)
    with torch.no_grad():
        reference = module(*inputs).numpy()
    return module, tuple(t.numpy() for t in inputs), reference


@pytest.fixture(scope="session")
def zoo_arrays():
    """The function ``zoo_arrays(name, size) -> (module, numpy inputs, PyTorch output)``."""
    return _zoo_arrays


@pytest.fixture(scope="session")
def mlp():
    """The zoo MLP at full size (8x784 -> 512 -> 10): two kernels, small enough to
    tune in about a minute, big enough that naive loops are clearly slow."""
    from bridges.tvm.importer import from_torch
    from bridges.tvm.passes import optimize

    module, inputs, reference = _zoo_arrays("mlp", "full")
    imported = from_torch(module, inputs, "mlp")
    mod, steps = optimize(imported.mod)
    return {"module": module, "inputs": inputs, "reference": reference, "imported": imported,
            "mod": mod, "steps": steps}


@pytest.fixture(scope="session")
def mlp_tuned(mlp, tmp_path_factory):
    """(work_dir, reports): the MLP tuned with 8 trials per kernel (population 64)."""
    from bridges.tvm.build import as_target
    from bridges.tvm.tune import tune

    work_dir = tmp_path_factory.mktemp("tvm-tuning") / "mlp"
    reports = tune(mlp["mod"], as_target(None), work_dir, trials_per_task=8, population=64, out=None)
    return work_dir, reports
