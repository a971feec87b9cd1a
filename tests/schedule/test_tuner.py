"""The tuner (tiny budgets), its records file, and compilation picking records up."""
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from minic.ir.loops import print_function
from minic.runtime import CompileOptions, compile_graph, prepare
from minic.tune import records
from minic.schedule.nest import ScheduleError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value
from minic.ir.types import DType, TensorType
from minic.tune import tuner
from minic.tune.measure import ready, weight_copies
from minic.schedule.templates import Knobs, default_knobs, signature
from minic.tune.tuner import CostModel, all_points, as_record, neighbours, tune_kernel

sys.path.insert(0, str(Path(__file__).parent))
from schedule_helpers import graph_of, kernel_of, matmul_kernel  # noqa: E402


@pytest.mark.parametrize("strategy", ["anneal", "random"])
def test_tune_measures_the_default_first_and_confirms_the_best(strategy):
    f = matmul_kernel(9, 8, 40)
    result = tune_kernel(f, {}, CompileOptions(use_cache=False), trials=3, strategy=strategy, repeat=2, rounds=3)
    assert len(result.trials) == 3 and result.trials[0].knobs == default_knobs(f) == result.default.knobs
    c = result.comparison
    assert c is not None and c.margin >= 0.03
    # The best is the default unless a point beat it beyond the margin in the confirmation.
    assert result.kept_default == (not c.faster)
    if result.kept_default:
        assert result.best is result.default
    else:
        assert result.best.knobs in {t.knobs for t in result.trials[1:]}
    assert result.flops == 2 * 9 * 8 * 40 and result.gflops(result.best) > 0


def _fake_confirmation(monkeypatch, *passes):
    """Replace the confirmation's timing: the default takes 1.0 s per call, contender i of
    pass p ``passes[p][i]``, in every round (no noise: the margin is MIN_GAIN)."""
    left = list(passes)

    def time_together(calls, rounds, block):
        seconds = left.pop(0)
        assert len(calls) == 1 + len(seconds)
        return [[1.0] * rounds] + [[s] * rounds for s in seconds]
    monkeypatch.setattr(tuner, "time_together", time_together)


def test_a_point_replaces_the_default_only_beyond_the_margin_twice(monkeypatch):
    f, options = matmul_kernel(9, 8, 40), CompileOptions(use_cache=False)
    _fake_confirmation(monkeypatch, [1.0, 0.9], [0.92])   # the second-fastest point wins, then wins again
    result = tune_kernel(f, {}, options, trials=3, repeat=1, rounds=3)
    second = sorted(result.trials[1:], key=lambda t: t.seconds)[1]
    assert not result.kept_default and result.best.knobs == second.knobs and result.best.seconds == 0.92
    assert result.default.seconds == 1.0 and result.comparison.gain == pytest.approx(1 / 0.92 - 1)
    rec = as_record(result, options)
    assert not rec.kept_default and rec.confirmed and rec.speedup == pytest.approx(1 / 0.92)

    _fake_confirmation(monkeypatch, [1.0, 0.9], [0.99])   # a win that does not repeat: the default stays
    result = tune_kernel(f, {}, options, trials=3, repeat=1, rounds=3)
    assert result.kept_default and result.comparison.gain == pytest.approx(1 / 0.99 - 1)

    _fake_confirmation(monkeypatch, [0.99, 0.985])        # 1.5 % faster: within MIN_GAIN, no second pass
    result = tune_kernel(f, {}, options, trials=3, repeat=1, rounds=3)
    assert result.kept_default and result.best is result.default and result.default.knobs == default_knobs(f)
    rec = as_record(result, options)
    assert rec.kept_default and rec.knobs == default_knobs(f).to_json() and rec.speedup == 1.0
    assert rec.gain == pytest.approx(1 / 0.985 - 1) and rec.margin == 0.03


def test_one_trial_keeps_the_default_unconfirmed():
    f = matmul_kernel(9, 8, 40)
    result = tune_kernel(f, {}, CompileOptions(use_cache=False), trials=1, repeat=1)
    assert result.comparison is None and result.kept_default and len(result.trials) == 1


def _weight_matmul(m=13, k=64, n=48) -> Graph:
    x, y = Value("x", TensorType((m, k), DType.f32)), Value("y", TensorType((m, n), DType.f32))
    w = Value("w", TensorType((k, n), DType.f32), np.ones((k, n), np.float32))
    return Graph("mm", [x], [y], [Node("matmul", [x, w], [y], ops.get("matmul").make_attrs())], [w])


def test_weights_are_rotated_over_copies_that_cover_the_cold_bytes():
    arrays = {"x": np.ones(4, np.float32), "w": np.arange(256, dtype=np.float32)}     # w: 1 KiB
    sets = weight_copies(arrays, ["w"], cold_bytes=4096)
    assert len(sets) == 4 and all(s["x"] is arrays["x"] for s in sets)
    assert len({id(s["w"]) for s in sets}) == 4 and all(np.array_equal(s["w"], arrays["w"]) for s in sets)
    assert len(weight_copies(arrays, ["w"], 0)) == len(weight_copies(arrays, [], 1 << 20)) == 1
    f = kernel_of(_weight_matmul())
    assert any(b.role.name == "CONST" for b in f.params)
    call, compile_s = ready(f, {}, CompileOptions(use_cache=False), cold_bytes=1 << 20)
    for _ in range(3):                                   # runs on each copy in turn
        call()
    assert compile_s > 0


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


def test_a_kept_default_record_follows_todays_default(tmp_path):
    """A record saying "the default won" must not pin the knobs the default had then."""
    graph = graph_of("matmul", [(13, 7), (7, 50)])
    options = CompileOptions(use_cache=False, records=tmp_path / "tuning.jsonl")
    f = kernel_of(graph)
    then = Knobs(rows=3, lanes=16, pack=False, parallel="rows")      # not today's default
    assert then != default_knobs(f)
    records.append(options.records, [records.Record(signature(f), records.target_of(options), then.to_json(),
                                                    1e-6, 1e-6, 1.0, 4, "k0", kept_default=True)])
    assert "acc0[3, 16]" not in print_function(prepare(graph, options).kernels[0])
    assert print_function(prepare(graph, options).kernels[0]) == \
        print_function(prepare(graph, CompileOptions(use_cache=False, records=tmp_path / "none.jsonl")).kernels[0])


def test_the_schedules_get_the_knobs_of_this_target_that_beat_the_default():
    """The records are read by the caller; the schedule is handed signature -> knobs for its target."""
    won = records.Record("s", "t", {"rows": 4}, 1.0, 2.0, 1.0, 8, gain=0.5, margin=0.03)
    lost = records.Record("u", "t", {"rows": 6}, 2.0, 2.0, 1.0, 8, kept_default=True, margin=0.03)
    elsewhere = records.Record("v", "other", {"rows": 2}, 1.0, 2.0, 1.0, 8, gain=0.5, margin=0.03)
    tuning = records.Tuning(b"", records.best([won, lost, elsewhere]))
    assert tuning.knobs("t") == {"s": {"rows": 4}} and tuning.knobs("other") == {"v": {"rows": 2}}


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
    assert rec.kept_default and not rec.confirmed


def test_best_record_prefers_confirmed_then_the_larger_speedup(tmp_path):
    base = records.Record("s", "t", {"rows": 1}, 1.0, 1.5, 1.0, 8)           # an older tuner's: unconfirmed
    kept = records.Record("s", "t", {"rows": 6}, 2.0, 2.0, 1.0, 8, kept_default=True, gain=0.01, margin=0.03)
    tuned = records.Record("s", "t", {"rows": 4}, 1.8, 2.0, 1.0, 8, gain=0.11, margin=0.03)
    assert records.best([base, kept])[("s", "t")] == kept     # 1.5x unconfirmed loses to a confirmed 1.0x
    assert records.best([tuned, kept, base])[("s", "t")] == tuned
    path = tmp_path / "r.jsonl"
    path.write_text('{"signature": "s", "target": "t", "knobs": {}, "seconds": 1, "default_seconds": 2, '
                    '"gflops": 1, "trials": 4}\n')                  # a line without the newer fields
    (old,) = records.read(path)
    assert not old.confirmed and not old.kept_default and old.speedup == 2.0
