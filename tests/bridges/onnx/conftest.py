"""Shared, session-scoped exports: llama-tiny (small) is exported once per test run."""
import pytest


@pytest.fixture(scope="session")
def llama_small():
    """(Exported, torch module) of llama-tiny at the small size."""
    from bridges.onnx.export import export_zoo
    return export_zoo("llama-tiny", "small")


@pytest.fixture(scope="session")
def llama_small_opt(llama_small):
    """The homemade-optimized llama-tiny small, with its pass log."""
    from bridges.onnx.optimize import homemade
    return homemade(llama_small[0].model)
