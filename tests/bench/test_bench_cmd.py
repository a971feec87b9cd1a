"""The bench and tune commands on the small MLP (correctness of the plumbing only:
benchmark figures are never asserted)."""
import json

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
    assert len(rows["minic"]["times_s"]) == 2 and rows["torch"]["vs_eager"] == 1.0
    assert rows["no-such-path"]["status"] == "unsupported"
    assert "<svg" in pic.read_text()
    assert "x eager" in capsys.readouterr().out


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
