"""`minic tune` (records with a verdict, re-runs skip recorded kernels, the model-level
check) and the number formats and timing loops `minic bench` uses.  Timings are never asserted."""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import pytest

from minic.timing import fmt_ratio, interleaved

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import cli  # noqa: E402


def test_tune_records_a_verdict_per_kernel_and_checks_the_model(tmp_path, capsys):
    path = tmp_path / "r.jsonl"
    code, out, err = cli(capsys, "tune", "mlp", "--size", "small", "--trials", "2", "--records", str(path),
                         "--model-repeat", "4")
    assert code == 0, err
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 2 and all(r["trials"] == 2 and r["margin"] >= 0.03 for r in lines)
    for r in lines:                    # a kept default records the default's knobs and a speed-up of 1
        assert r["kept_default"] == (r["seconds"] == r["default_seconds"])
    assert "default GFLOPS" in out and "tuned GFLOPS" in out
    assert "whole model" in out and "max |tuned - untuned|" in out
    assert_verdict_follows_the_figures(out)

    # Tuned already with as many trials: nothing is tuned again, the table shows the records.
    code, out, err = cli(capsys, "tune", "mlp", "--size", "small", "--trials", "2", "--records", str(path),
                         "--model-repeat", "0")
    assert code == 0, err
    assert "0 kernels tuned" in out and out.count("2 (record)") == 2 and "whole model" not in out
    assert len(path.read_text().splitlines()) == 2
    # More trials than recorded, or --retune: tuned again.
    code, out, err = cli(capsys, "tune", "mlp", "--size", "small", "--trials", "2", "--records", str(path),
                         "--model-repeat", "0", "--retune")
    assert code == 0, err
    assert "2 kernels tuned" in out and len(path.read_text().splitlines()) == 4


def assert_verdict_follows_the_figures(out: str) -> None:
    """The whole-model row's verdict is the one its own speed-up and margin call for."""
    import re
    row = next(line for line in out.splitlines() if line.startswith("│ mlp"))
    speedup, margin = re.search(r"([\d.]+)x\s*│\s*±([\d.]+)%", row).groups()
    gain, margin = float(speedup) - 1, float(margin) / 100
    expected = ("tuned is faster" if gain > margin else "SLOWER" if gain < -margin else "same within the noise")
    assert expected in row, row


def test_a_slower_tuned_model_is_reported(tmp_path, capsys, monkeypatch):
    import minic.tune.confirm as confirm
    slower = confirm.Comparison(gain=1 / 1.25 - 1, noise=0.01, margin=0.03, base_seconds=1e-3, other_seconds=1.25e-3)
    monkeypatch.setattr(confirm, "compare", lambda base, other: slower)
    code, out, err = cli(capsys, "tune", "mlp", "--size", "small", "--trials", "1", "--records",
                         str(tmp_path / "r.jsonl"), "--model-repeat", "2")
    assert code == 0, err
    assert "SLOWER" in out and "25.0% slower than untuned" in out


def test_tune_rejects_bad_arguments(capsys):
    code, _, err = cli(capsys, "tune", "mlp", "--size", "small", "--model-repeat", "-1")
    assert code == 1 and "--model-repeat" in err


@pytest.mark.parametrize("x, text", [(0.003123, "0.00312"), (0.03123, "0.0312"), (0.3123, "0.312"),
                                     (1.0, "1.00"), (31.24, "31.2"), (312.4, "312"), (3124.0, "3124"),
                                     (0.0, "0"), (float("inf"), "inf")])
def test_fmt_ratio_keeps_three_significant_digits(x, text):
    assert fmt_ratio(x) == text


def test_interleaved_runs_blocks_in_rounds():
    order = []
    blocks = interleaved([lambda: (order.append("a"), time.sleep(0.002)), lambda: order.append("b")],
                         repeat=5, block=2)
    assert [len(b) for b in blocks[0].blocks] == [2, 2, 1] and len(blocks[1].times) == 5
    # Each block is one untimed call, then its timed calls; the paths take turns, in an
    # order that turns round every round.
    assert "".join(order) == "aaabbb" + "bbbaaa" + "aabb"
    medians = blocks[0].block_medians()
    assert medians == [statistics.median(b) for b in blocks[0].blocks] and len(medians) == 3
    assert blocks[0].median == statistics.median(blocks[0].times) >= 0.002    # the times are of the calls
    assert blocks[1].median < 0.002


def test_interleaved_lets_a_call_over_its_budget_sit_out():
    """A seconds-long path (untuned TVM) stops after two timed calls once its budget
    is spent; the others keep their rounds."""
    order = []
    blocks = interleaved([lambda: order.append("a"), lambda: (order.append("s"), time.sleep(0.01))],
                         repeat=6, block=1, budget_s=0.015)
    assert len(blocks[0].times) == 6 and len(blocks[1].times) == 2
    assert "".join(order) == "aa" + "ssss" + "aa" * 5     # s in rounds 0 and 1 (reversed), then out


def test_median_latency_times_by_the_clock_it_is_given():
    """kernel_profile --cpu-time passes time.thread_time: a call that sleeps costs
    wall time but next to no CPU time."""
    from minic.timing import median_latency
    wall = median_latency(time.sleep, (0.01,), repeat=3, warmup=0)
    cpu = median_latency(time.sleep, (0.01,), repeat=3, warmup=0, clock=time.thread_time)
    assert wall >= 0.01 > 10 * cpu
