"""The tuner (tiny budgets), its records file, and compilation picking records up."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from minic.ir.loops import print_function
from minic.runtime import CompileOptions, compile_graph, prepare
from minic.schedule import records
from minic.schedule.nest import ScheduleError
from minic.schedule.templates import Knobs, signature
from minic.schedule.tuner import CostModel, all_points, as_record, neighbours, tune_kernel

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import graph_of, kernel_of, matmul_kernel  # noqa: E402


@pytest.mark.parametrize("strategy", ["anneal", "random"])
def test_tune_measures_the_default_first_and_keeps_the_best(strategy):
    f = matmul_kernel(9, 8, 40)
    result = tune_kernel(f, {}, CompileOptions(use_cache=False), trials=3, strategy=strategy, repeat=2)
    assert len(result.trials) == 3 and result.trials[0] is result.default
    assert result.best.seconds == min(t.seconds for t in result.trials)
    assert result.flops == 2 * 9 * 8 * 40 and result.gflops(result.best) > 0


def test_tune_refuses_what_it_cannot_tune():
    with pytest.raises(ScheduleError, match="no contraction"):
        tune_kernel(kernel_of(graph_of("relu", [(3, 4)])), {}, CompileOptions(), trials=2)
    with pytest.raises(ScheduleError, match="strategy"):
        tune_kernel(matmul_kernel(), {}, CompileOptions(), trials=2, strategy="magic")


def test_search_space_and_cost_model():
    points = all_points()
    assert len(points) == len(set(points)) == 96
    k = Knobs(rows=6, lanes=32)
    assert all(sum(getattr(n, a) != getattr(k, a) for a in ("rows", "lanes", "pack", "parallel")) == 1
               for n in neighbours(k))
    model = CostModel(rows=64, lanes=256)
    for p in points[:12]:                     # a made-up cost: more accumulators are faster
        model.add(p, 1.0 / (p.rows * p.lanes))
    assert model.predict(Knobs(rows=8, lanes=64)) < model.predict(Knobs(rows=1, lanes=16))


def test_records_round_trip_and_compilation_uses_them(tmp_path):
    graph = graph_of("matmul", [(13, 7), (7, 50)])
    options = CompileOptions(use_cache=False, records=tmp_path / "tuning.jsonl")
    f = kernel_of(graph)
    tuned = Knobs(rows=3, lanes=16, pack=False, parallel="rows")
    rec = records.Record(signature(f), records.target_of(options), tuned.to_json(), 1e-6, 2e-6, 1.0, 4, "k0")
    records.append(options.records, [rec])
    records.append(options.records, [records.Record(**{**rec.__dict__, "seconds": 5e-6, "knobs": Knobs().to_json()})])
    lines = options.records.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[0])["signature"] == signature(f)
    assert records.best(records.read(options.records))[(rec.signature, rec.target)].knobs == tuned.to_json()
    assert "acc0[3, 16]" in print_function(prepare(graph, options).kernels[0])
    x, w = np.ones((13, 7), np.float32), np.arange(350, dtype=np.float32).reshape(7, 50)
    np.testing.assert_allclose(compile_graph(graph, options)(x, w), x @ w, rtol=1e-5)


def test_bad_record_lines_are_skipped(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"not": "a record"}\nnot json\n')
    with pytest.warns(UserWarning, match="bad tuning record"):
        assert records.read(path) == []


def test_as_record():
    f = matmul_kernel(9, 8, 40)
    options = CompileOptions(use_cache=False)
    result = tune_kernel(f, {}, options, trials=1, repeat=1)
    rec = as_record(result, options)
    assert rec.signature == signature(f) and rec.trials == 1 and rec.knobs == result.best.knobs.to_json()
