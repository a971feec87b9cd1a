"""The bench and tune commands on the small MLP (correctness of the plumbing only:
benchmark figures are never asserted)."""
import json
import statistics

import pytest

from minic import tools
from minic.cli import main


def test_bench_writes_json_and_a_plot(tmp_path, capsys):
    out, pic = tmp_path / "b.json", tmp_path / "b.svg"
    rc = main(["bench", "mlp", "--size", "small", "--vs", "torch,no-such-path", "--repeat", "2", "--warmup", "0",
               "--json", str(out), "--plot", str(pic)])
    assert rc == 0
    data = json.loads(out.read_text())
    rows = {r["path"]: r for r in data["rows"]}
    assert set(rows) == {"torch", "no-such-path", "minic"}
    assert rows["minic"]["status"] == "ok" and rows["minic"]["max_abs_err"] < 1e-4
    assert len(rows["minic"]["times_s"]) == 2 == len(rows["torch"]["times_s"])
    for path in ("torch", "minic"):              # each median is the median of its own times
        assert rows[path]["median_s"] == statistics.median(rows[path]["times_s"]) > 0
    assert rows["minic"]["vs_eager"] == pytest.approx(rows["minic"]["median_s"] / rows["torch"]["median_s"])
    assert rows["no-such-path"]["status"] == "unsupported"
    assert "<svg" in pic.read_text()
    assert "x eager" in capsys.readouterr().out


def test_plot_without_graphviz_is_one_line_naming_the_package(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))              # no programs at all
    rc = main(["bench", "mlp", "--size", "small", "--vs", "torch", "--repeat", "1", "--warmup", "0",
               "--plot", str(tmp_path / "b.svg")])
    err = capsys.readouterr().err
    assert rc == 1 and "needs 'dot', which is not installed (Debian: apt-get install graphviz" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "b.svg").exists()
    assert tools.SETUP in err


def test_bench_rejects_bad_arguments(tmp_path, capsys):
    assert main(["bench", "mlp", "--size", "small", "--repeat", "0"]) == 1
    assert main(["bench", "mlp", "--size", "small", "--vs", "torch", "--repeat", "1", "--plot",
                 str(tmp_path / "x.gif")]) == 1
    assert "unknown picture format" in capsys.readouterr().err


def test_tune_writes_records_that_compilation_reads(tmp_path, capsys):
    path = tmp_path / "tuning.jsonl"
    assert main(["tune", "mlp", "--size", "small", "--trials", "2", "--records", str(path)]) == 0
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines and all(r["trials"] == 2 and r["target"] for r in lines)
    assert "tuned GFLOPS" in capsys.readouterr().out
