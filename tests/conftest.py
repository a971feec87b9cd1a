"""Hypothesis profiles: CI runs a fixed, derandomized set of examples so a red
build always reproduces; local runs draw fresh examples each time."""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
