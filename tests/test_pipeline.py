"""The one pipeline: its stages run in order, each once per compile, and every tool goes through it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from minic import pipeline
from minic.api import graph_of, load
from minic.errors import UserError
from minic.passes import manager
from minic.runtime import CompileOptions

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import cli  # noqa: E402


@pytest.fixture
def calls(monkeypatch):
    """Every stage and every pass that runs, in order."""
    seen: list[str] = []

    def recorded(name, fn):
        def run(*args):
            seen.append(name)
            return fn(*args)
        return run
    monkeypatch.setattr(pipeline, "_STEPS", {stage: (recorded(stage, make), source)
                                             for stage, (make, source) in pipeline._STEPS.items()})
    for name, fn in list(manager.PASSES.items()):
        monkeypatch.setitem(manager.PASSES, name, recorded("pass " + name, fn))
    return seen


def test_run_visits_each_stage_once_in_order(calls, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))           # a cold cache: everything compiles
    code, out, err = cli(capsys, "run", "llama-tiny", "--size", "small", "--repeat", "1")
    assert code == 0, err
    stages = [c for c in calls if not c.startswith("pass ")]
    assert stages == ["opt", "fused", "loops", "scheduled", "llvm", "optimized", "object"]   # LLVM's optimizer once
    passes = [c[5:] for c in calls if c.startswith("pass ")]
    assert passes == manager.LEVELS[2]                           # each pass of -O2 once, fuse-groups last


def test_a_stage_is_computed_once_and_shared(calls):
    c = pipeline.Compilation(graph_of(load("mlp", size="small")), CompileOptions(use_cache=False))
    loops = c.run("loops")
    assert c.run("loops") is loops and c.run("asm") and c.run("object")
    assert c.trace == ["opt", "fused", "loops", "scheduled", "llvm", "asm", "object"]
    assert calls.count("fused") == 1 and calls.count("pass fuse-groups") == 1


def test_a_compilation_keeps_only_the_stages_it_is_told_to(calls):
    """compile_graph keeps the scheduled program and the object: the graphs, Loop IR and LLVM
    modules before them go as soon as the next stage exists; one asked for later is made again."""
    c = pipeline.Compilation(graph_of(load("mlp", size="small")), CompileOptions(use_cache=False),
                             keep=("scheduled",))
    program, obj = c.run("scheduled"), c.run("object")
    assert sorted(c._ir) == ["graph", "object", "scheduled"]
    assert c.run("scheduled") is program and c.run("object") is obj
    assert "minic_entry" in str(c.run("llvm")) and c.trace == ["opt", "fused", "loops", "scheduled", "llvm",
                                                               "object", "llvm"]


def test_a_compilation_may_start_at_a_later_stage():
    options = CompileOptions(use_cache=False)
    program = pipeline.run(graph_of(load("mlp", size="small")), "scheduled", options)
    c = pipeline.Compilation(program, options, start="scheduled")
    assert "minic_entry" in c.run("asm") and c.run("object")[:4] == b"\x7fELF"
    assert c.trace == ["llvm", "asm", "object"]
    with pytest.raises(UserError, match="stage 'loops' comes before 'scheduled'"):
        c.run("loops")


def test_each_stage_is_handed_its_part_of_the_options(monkeypatch):
    from minic.options import GraphOptions, Target
    seen, lower, schedule, build = [], pipeline.lower_graph, pipeline.default_schedule, pipeline.build_module
    monkeypatch.setattr(pipeline, "level_passes", lambda level, passes: seen.append(level) or manager.LEVELS[level])
    monkeypatch.setattr(pipeline, "lower_graph", lambda graph, round_inlined: seen.append(round_inlined)
                        or lower(graph, round_inlined))
    monkeypatch.setattr(pipeline, "build_module", lambda program, target: seen.append(target) or build(program, target))
    monkeypatch.setattr(pipeline, "default_schedule",
                        lambda program, target, tuning, hand: seen.append(target) or schedule(program, target, tuning, hand))
    options = CompileOptions(use_cache=False, num_threads=3, graph_opt_level=1, precision="f16")
    c = pipeline.Compilation(graph_of(load("mlp", size="small")), options)
    c.run("llvm")
    assert c.graph_options == GraphOptions(level=1, precision="f16")
    assert seen == [1, False] + [Target(opt_level=2, threads=3)] * 2


def test_the_stages_options_are_derived_from_the_compile_options(tmp_path):
    from minic.options import CacheOptions, GraphOptions, Target
    o = CompileOptions(cache_dir=tmp_path, num_threads=3, graph_opt_level=1, precision="f16", cpu="znver4")
    assert o.graph == GraphOptions(level=1, precision="f16")
    assert o.target == Target(cpu="znver4", opt_level=2, threads=3)
    assert o.cache == CacheOptions(tmp_path, tmp_path / "tuning.jsonl", use=True)
    assert CompileOptions(records=tmp_path / "r.jsonl", use_cache=False).cache.records == tmp_path / "r.jsonl"
    with pytest.raises(UserError, match="unknown precision 'f8'"):
        CompileOptions(precision="f8").graph


def test_unknown_stage_and_precision_are_user_errors():
    graph = graph_of(load("mlp", size="small"))
    with pytest.raises(UserError, match="unknown stage 'lops'"):
        pipeline.run(graph, "lops")
    with pytest.raises(UserError, match="unknown precision 'f8'"):
        pipeline.run(graph, "loops", CompileOptions(precision="f8"))


def test_show_prints_loops_before_and_after_scheduling(capsys):
    code, loops, _ = cli(capsys, "show", "mlp", "--size", "small", "--emit", "loops")
    assert code == 0 and "kernel k0_" in loops and "parallel for" not in loops
    code, scheduled, _ = cli(capsys, "show", "mlp", "--size", "small", "--emit", "scheduled")
    assert code == 0 and "vectorized for" in scheduled


def test_tuning_records_are_read_once_per_compile(tmp_path, monkeypatch):
    from minic.runtime import compile_graph
    from minic.tune import records
    loads = []
    real = records.load
    monkeypatch.setattr(records, "load", lambda options: loads.append(options) or real(options))
    monkeypatch.setattr(records, "read", lambda path: pytest.fail("records read again"))
    compile_graph(graph_of(load("mlp", size="small")), CompileOptions(cache_dir=tmp_path))
    assert len(loads) == 1


def test_lowered_loop_ir_is_verified_and_a_bad_rule_is_located():
    """A compute rule that calls a scalar function Loop IR lacks (log1p is not in CALLS) is an
    error at lowering naming the node, not a bare ``KeyError: 'log1p'`` from codegen (before)."""
    import numpy as np
    from minic.ir import ops
    from minic.ir.graph import Graph, Node, Value
    from minic.ir.loops import CALLS, Call
    from minic.ir.loops_verify import LoopVerifyError
    from minic.ir.ops import OpKind, define
    from minic.ir.ops.elementwise import arg
    from minic.ir.types import DType, TensorType
    from minic.runtime import compile_graph
    assert "log1p" not in CALLS
    define("log1p_demo", OpKind.ELEMENTWISE, lambda attrs, types: [types[0]], lambda attrs, x: np.log1p(x),
           lambda site, index: Call("log1p", (arg(site.inputs[0], index),)), doc="log1p(x)")
    try:
        x, y = Value("x", TensorType((4,), DType.f32)), Value("y", TensorType((4,), DType.f32))
        graph = Graph("g", [x], [y], [Node("log1p_demo", [x], [y], ops.get("log1p_demo").make_attrs())], [])
        with pytest.raises(LoopVerifyError, match=r"^lowering %y = log1p_demo\(%x\): kernel k0_log1p_demo: "
                                                  r"unknown call log1p/1$"):
            compile_graph(graph, CompileOptions(use_cache=False))
    finally:
        del ops.REGISTRY["log1p_demo"]
