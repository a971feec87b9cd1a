"""tests/int8: a compile cache of their own."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")
