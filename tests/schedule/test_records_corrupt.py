"""A bad line in the tuning records (a byte that is not UTF-8, broken JSON, a field
of another type, knobs the tuner never writes) is skipped with a warning naming
the file and line; the good lines still count and every compile still works."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

from minic.ir.interpret import interpret
from minic.runtime import CompileOptions, compile_graph
from minic.tune import records

from tests.runtime.test_runtime import mlp_graph

GOOD = {"signature": "s", "target": "t", "knobs": {"rows": 4, "lanes": 32}, "seconds": 1.0,
        "default_seconds": 2.0, "gflops": 1.0, "trials": 4, "gain": 0.5, "margin": 0.03}
BAD_LINES = [
    b'{"signature": "s\xff", "target": "t"}',                           # not UTF-8
    b"\xc3",                                                             # a UTF-8 sequence cut short
    b'{"signature": "s", "target": ',                                    # JSON cut short
    b"[1, 2]",                                                           # not an object
    json.dumps({**GOOD, "seconds": "fast"}).encode(),                    # a string for a number
    json.dumps({**GOOD, "trials": True}).encode(),                       # a bool for an int
    json.dumps({**GOOD, "knobs": 5}).encode(),                           # knobs not an object
    json.dumps({**GOOD, "knobs": {"rows": -3}}).encode(),                # a count below 1
    json.dumps({**GOOD, "knobs": {"pack": "yes"}}).encode(),             # a knob of another type
    json.dumps({**GOOD, "knobs": {"unroll": 2}}).encode(),               # a knob no template has
    json.dumps({**GOOD, "extra": 1}).encode(),                           # a field no record has
    json.dumps({k: v for k, v in GOOD.items() if k != "target"}).encode(),   # a field missing
]


@pytest.mark.parametrize("bad", BAD_LINES, ids=range(len(BAD_LINES)))
def test_a_bad_line_is_skipped_with_a_warning(tmp_path, bad):
    path = tmp_path / "tuning.jsonl"
    good = json.dumps(GOOD).encode()
    path.write_bytes(good + b"\n" + bad + b"\n" + good + b"\n")
    with pytest.warns(UserWarning, match=r"tuning\.jsonl:2: ignoring a bad tuning record"):
        got = records.read(path)
    assert got == [records.Record(**GOOD)] * 2


def test_a_compile_reads_a_corrupt_records_file(tmp_path):
    """Before: one byte that is not UTF-8 made every compile an internal error."""
    options = CompileOptions(cache_dir=tmp_path)
    options.cache.records.write_bytes(json.dumps(GOOD).encode() + b"\n\xff\xfe\n")
    with pytest.warns(UserWarning, match="bad tuning record"):
        model = compile_graph(mlp_graph(), options)
    x = np.ones((2, 16), np.float32)
    np.testing.assert_allclose(model(x), interpret(mlp_graph(), [x])[0], rtol=1e-4)
    with pytest.warns(UserWarning, match="bad tuning record"):
        records.append(options.cache.records, [records.Record(**GOOD)])     # a tuner still appends,
    with warnings.catch_warnings():                                          # and the bad line is gone
        warnings.simplefilter("error")
        assert len(records.read(options.cache.records)) == 2
