"""Random graphs on every path, the CI sample: 200 graphs on interp, minic and
onnxruntime (8 chunks of 25), and smaller samples on mlir and tvm.

A failing graph is minimized and its .mc text printed in the assertion message:
save it under tests/verify/regressions/ (``python -m minic verify --random``
does that itself) so the suite runs it from then on.
"""
from __future__ import annotations

import pytest

from minic import backends
from minic.verify.fuzz import fuzz
from minic.ir.text import print_graph

CHUNKS, PER_CHUNK = 8, 25                      # 200 graphs on the CPU paths


def failures_text(report) -> str:
    return report.table() + "\n\n" + "\n".join(
        f"--- {f.backend}, graph seed {f.seed}\n{print_graph(f.graph)}" for f in report.failures)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_graphs_on_interp_minic_onnxruntime(chunk, tmp_path):
    report = fuzz(PER_CHUNK, seed=chunk, backends=["interp", "minic", "onnxruntime"], save_dir=tmp_path)
    assert not report.failures, failures_text(report)
    assert report.graphs == PER_CHUNK
    # Every op of these graphs is one minic supports: nothing may be "unsupported" on its own paths.
    assert report.stats["interp"].statuses["ok"] == PER_CHUNK, report.table()
    assert report.stats["minic"].statuses["ok"] == PER_CHUNK, report.table()
    ort = report.stats["onnxruntime"].statuses
    assert ort["ok"] + ort["known"] == PER_CHUNK, report.table()


@pytest.mark.parametrize("backend,n", [("mlir", 30), ("tvm", 20)])
def test_random_graphs_on_the_bridges(backend, n, tmp_path):
    backends.get(backend)                # tvm and mlir are hard dependencies: a broken import fails here
    report = fuzz(n, seed=100, backends=[backend], save_dir=tmp_path)
    assert not report.failures, failures_text(report)
    # Unsupported ops are allowed (and listed in the table), but most graphs must run.
    assert report.stats[backend].statuses["ok"] >= 0.7 * n, report.table()


def test_verify_random_on_the_command_line(capsys, tmp_path):
    from minic.cli import main
    code = main(["verify", "--random", "3", "--seed", "5", "--backends", "interp,minic", "--save", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "3 random graphs (seed 5" in out and "interp" in out and "minic" in out
    assert not list(tmp_path.iterdir())                               # nothing failed, nothing saved
    assert main(["verify", "--random", "0"]) == 1
    assert main(["verify", "mlp", "--random", "2"]) == 1
