"""``verify --random`` on every installed path (``verify_cmd.fuzz_backends``: all but
the reference and the paths that are lower-precision by design), a few fixed seeds
with a graph or two each: the CI sample.  The whole sweep is a command:
``python -m minic verify --random 200 --seed S``.

Seed 40964 is the run that found the openvino bridge feeding no input and the
tinygrad bridge replaying one input shape's kernels for another; its regressions
are in tests/verify/regressions/.  Paths slower than a few seconds a graph (IREE
compiles in a child process, inductor's first compile) run the first seed's first
graph only, to keep this file well under a minute on 2 cores.
"""
from __future__ import annotations

import pytest

from minic.cli.verify_cmd import fuzz_backends
from minic.ir.text import print_graph
from minic.verify.fuzz import fuzz

SEEDS = ((40964, 2), (3, 2))             # (seed, graphs)
PER_GRAPH_SLOW = {"iree": 1, "inductor": 1, "tvm": 1, "tinygrad": 1}   # graphs of the first seed only


def sample(backend: str) -> tuple[tuple[int, int], ...]:
    if backend in PER_GRAPH_SLOW:
        return ((SEEDS[0][0], PER_GRAPH_SLOW[backend]),)
    return SEEDS


@pytest.mark.parametrize("backend", fuzz_backends())
def test_random_graphs_on_every_path(backend, tmp_path):
    for seed, n in sample(backend):
        report = fuzz(n, seed, [backend], save_dir=tmp_path)
        assert not report.failures, report.table() + "\n" + "\n".join(
            f"--- graph seed {f.seed}\n{print_graph(f.graph)}" for f in report.failures)
        statuses = report.stats[backend].statuses
        assert statuses["ok"] + statuses["known"] + statuses["unsupported"] == n, report.table()


def test_every_installed_path_is_sampled():
    from minic import backends
    assert set(fuzz_backends()) >= {"interp", "minic", "onnxruntime", "openvino", "tinygrad", "tvm", "mlir"} \
        & set(backends.names())
