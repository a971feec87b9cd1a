"""Fixtures of the runtime tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def compilations(monkeypatch):
    """How many graphs minic's pipeline compiles (each part, each branch, each loop body)."""
    from minic import pipeline
    count = [0]

    class Counting(pipeline.Compilation):
        def __init__(self, *args, **kwargs):
            count[0] += 1
            super().__init__(*args, **kwargs)
    monkeypatch.setattr(pipeline, "Compilation", Counting)
    return count
