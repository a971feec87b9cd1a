"""Benchmark helpers and tables."""
from bridges.onnx.compare import AccuracyRow, time_interleaved
from bridges.onnx.report import accuracy_table, format_table, latency_table


def test_interleaved_timing_ranks_more_work_slower():
    def work(n):
        return lambda: sum(i * i for i in range(n))
    medians = time_interleaved({"small": work(2_000), "large": work(200_000)}, repeats=5,
                               warmup=1)
    assert set(medians) == {"small", "large"}
    assert medians["large"] > 3 * medians["small"]     # 100x the work; a wide margin


def test_tables_align_and_explain_missing_rows():
    table = format_table(["a", "bb"], [["xyz", 1]])
    assert table.splitlines() == ["| a   | bb |", "|-----|----|", "| xyz | 1  |"]
    text = latency_table({"pytorch-eager": 2.0, "ort-cpu homemade": 1.0,
                          "ort-cuda homemade": "no GPU here", "_shape": "input (1, 8)"})
    assert "2.00x" in text and "missing" in text and "no GPU here" in text
    row = AccuracyRow("int8", inputs=2, max_abs_error=0.5, by_kind={"text": 0.5})
    assert "| no " in accuracy_table([row])
