"""A schedule put back into a model by hand: ``minic.compile(model, schedules={kernel: fn or knobs})``.
Before this option, swapping a hand-scheduled kernel into the scheduled program failed with a bare
``KeyError: 'linear_wt'``: the default schedule had pre-packed that weight into another constant."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic.errors import UserError
from minic.ir.loops import ForKind, walk_stmts
from minic.runtime import CompileOptions
from minic.schedule import primitives
from minic.schedule.templates import Knobs, signature


def by_hand(k):
    """The first matmul kernel of the mlp, scheduled by hand: columns in blocks of 8, rows in
    parallel; its weight stays as the graph has it (no packing)."""
    return primitives.parallel(primitives.split(k, "i1", 8), "i0")


@pytest.fixture(scope="module")
def mlp():
    source = minic.load("mlp", size="small")
    want = minic.compile(source, backend="torch")(*source.example_inputs)
    return source, want


def test_a_hand_schedule_goes_back_into_a_zoo_model(mlp, tmp_path):
    source, want = mlp
    seen = []

    def schedule(k):
        seen.append(k.name)
        return by_hand(k)
    model = minic.compile(source, schedules={"k0_gemm_relu": schedule}, cache_dir=tmp_path)
    np.testing.assert_allclose(model(*source.example_inputs), want, rtol=1e-5, atol=1e-5)
    assert seen == ["k0_gemm_relu"]
    assert not list(tmp_path.glob("*.mc.bin")), "a function's code is no part of the cache key: never cached"
    # What ran is the hand schedule: the kernel reads the weight as given, the other kernel is the default's.
    program = minic.pipeline.run(minic.api.graph_of(source), "scheduled",
                                 CompileOptions(schedules={"k0_gemm_relu": by_hand}, use_cache=False))
    k0, k1 = program.kernels
    assert "linear_wt" in {b.name for b in k0.params} and "linear_wt" in program.constants
    assert [t.kind for t in walk_stmts(k0.body) if hasattr(t, "kind")][:2] == [ForKind.PARALLEL, ForKind.SERIAL]
    assert any("pack" in b.name for b in k1.params), "the other kernel keeps the default (packed) schedule"


def test_knobs_by_signature(mlp):
    source, want = mlp
    loops = minic.pipeline.run(minic.api.graph_of(source), "loops", CompileOptions(use_cache=False))
    sig = signature(loops.kernels[1])
    for knobs in (Knobs(rows=2, lanes=16, pack=False), {"rows": 3, "lanes": 16}):
        model = minic.compile(source, schedules={sig: knobs}, use_cache=False)
        np.testing.assert_allclose(model(*source.example_inputs), want, rtol=1e-5, atol=1e-5)


def test_bad_put_backs_are_named(mlp):
    source, _ = mlp
    with pytest.raises(UserError, match=r"no kernel named or signed 'k9_gemm'; the kernels are k0_gemm_relu, k1_gemm"):
        minic.compile(source, schedules={"k9_gemm": by_hand}, use_cache=False)
    with pytest.raises(UserError, match=r"schedules\['k1_gemm'\]: bad knobs"):
        minic.compile(source, schedules={"k1_gemm": {"row": 2}}, use_cache=False)
    with pytest.raises(UserError, match=r"must return kernel k1_gemm"):
        minic.compile(source, schedules={"k1_gemm": lambda k: None}, use_cache=False)
