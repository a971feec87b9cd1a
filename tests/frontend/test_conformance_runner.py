"""The conformance runner itself: a worker's native crash or a hang costs one case, not the run."""
from __future__ import annotations

import json
import os
import signal
import time
from types import SimpleNamespace

from minic.conformance import run_suite
from minic.conformance.cases import Result, compare, refusal_reason
from tests.cli_helpers import cli


def _runner(case, path):
    if case.name == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    if case.name == "hang":
        time.sleep(60)
    return Result(case.name, "pass")


def test_a_dead_or_hung_worker_counts_as_one_crash():
    cases = [SimpleNamespace(name=n) for n in ("a", "segfault", "b", "hang", "c", "d")]
    results = run_suite(cases, "interp", workers=2, timeout=3, runner=_runner)
    assert [r.name for r in results] == [c.name for c in cases]
    assert {r.name: r.outcome for r in results} == {"a": "pass", "segfault": "crash", "b": "pass",
                                                    "hang": "crash", "c": "pass", "d": "pass"}
    assert "died" in results[1].detail and "timed out" in results[3].detail


def test_compare_is_strict_about_shape_dtype_and_values():
    import numpy as np
    x = np.arange(4, dtype=np.float32)
    assert compare([x], [x.copy()], 1e-3, 1e-7) == ""
    assert "dtype" in compare([x.astype(np.float64)], [x], 1e-3, 1e-7)
    assert "shape" in compare([x.reshape(2, 2)], [x], 1e-3, 1e-7)
    assert "Not equal" in compare([x + 1], [x], 1e-3, 1e-7)
    assert "differ" in compare([np.arange(4)], [np.arange(4) + 1], 0, 0)
    assert refusal_reason("node #0 (Foo, opset 21): op is not supported; supported ops: Abs") == "op not supported"


def test_cli_prints_counts_and_json(capsys):
    code, out, err = cli(capsys, "conformance", "--path", "interp", "-k", "^test_(abs|string_split_basic)$", "--json", "-")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["counts"]["pass"] == 1 and sum(doc["counts"].values()) == 2
    assert {c["name"]: c["outcome"] for c in doc["cases"]}["test_abs"] == "pass"
    code, out, err = cli(capsys, "conformance", "-k", "(")
    assert code == 1 and "bad regular expression" in err
