"""Hypothesis profiles: CI runs a fixed, derandomized set of examples so a red
build always reproduces; local runs draw fresh examples each time."""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def pytest_addoption(parser):
    parser.addoption("--all-layers", action="store_true",
                     help="tests/frontend/test_torch_nn_layers.py: compile every torch.nn layer, not a sample")
