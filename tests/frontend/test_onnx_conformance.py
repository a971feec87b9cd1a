"""The ONNX backend node suite (shipped in the onnx wheel), every case, on both minic paths.

The whole suite runs once per path in a few worker processes (a native crash
costs one case, not the run); each case is then one test: a case the denylist
does not name must match ONNX's expected outputs with the case's own
tolerances; a denied case must be refused with a clear UserError — so a case
that starts to pass fails here until its denylist entry is removed, and a
regression fails at once.  Never a wrong number, never a crash.
"""
from __future__ import annotations

import pytest

from minic.conformance import DENYLIST, denied, load_cases, run_suite

CASES = load_cases()
PATHS = ("minic", "interp")


@pytest.fixture(scope="module")
def outcomes():
    cache: dict[str, dict] = {}

    def get(path: str) -> dict:
        if path not in cache:
            cache[path] = {r.name: r for r in run_suite(CASES, path, workers=2)}
        return cache[path]
    return get


def test_the_whole_suite_is_counted():
    assert len(CASES) >= 1800                      # every case with a model, no allowlist
    assert all(d.reason.strip() for d in DENYLIST)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_node_case(outcomes, name, path):
    result = outcomes(path)[name]
    entry = denied(name, path)
    if entry is None:
        assert result.outcome == "pass", f"{result.outcome} (not in the denylist): {result.detail}"
    else:
        assert result.outcome == entry.outcome, (f"{result.outcome}, the denylist says {entry.outcome} "
                                                 f"({entry.pattern!r}: {entry.reason}): {result.detail}")


def test_every_denylist_entry_names_a_case():
    names = [c.name for c in CASES]
    import re
    for d in DENYLIST:
        assert any(re.search(d.pattern, n) for n in names), f"{d.pattern!r} matches no case"
