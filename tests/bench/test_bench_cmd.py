"""`minic bench`: each path in its own worker process, built once, checked against
PyTorch there, then timed in rounds of blocks.  Correctness of the plumbing only:
benchmark figures are never asserted (the machine is shared)."""
import json
import os
import statistics

import numpy as np
import pytest
from rich.console import Console

from minic import tools
from minic.bench.harness import Config, Result, Timing, run_config
from minic.bench.paths import BenchPath, parse, resolve
from minic.bench.report import markdown, print_config
from minic.bench.worker import batched
from minic.cli import main
from minic.errors import UserError

SMALL = Timing(rounds=1, calls=2, warmup=0)


def test_each_path_runs_in_its_own_process_and_is_checked_against_torch():
    results = run_config(Config("mlp", batch=2, threads=1, size="small"), parse("torch"), SMALL)
    assert [r.path for r in results] == ["torch", "minic"]
    pids = {r.pid for r in results}
    assert len(pids) == 2 and os.getpid() not in pids and 0 not in pids
    for r in results:
        assert r.status == "ok" and r.max_abs_err is not None and r.max_abs_err < 1e-4
        assert len(r.blocks) == 1 and len(r.blocks[0]) == 2 and r.median == statistics.median(r.blocks[0])
        assert len(r.cpu_blocks) == 1 and len(r.cpu_blocks[0]) == 2 and all(t >= 0 for t in r.cpu_blocks[0])
        assert r.cpu_median == statistics.median(r.cpu_blocks[0])
        assert 0 < r.rss_base_mb <= r.rss_peak_mb
    assert results[0].max_abs_err == 0.0            # eager against eager: the check ran


def test_a_path_whose_output_is_wrong_is_reported_and_not_timed():
    """minic at f16 with f16 accumulators misses the f32 tolerance: the worker's check says so."""
    rough = BenchPath("minic-f16", "minic", {"precision": "f16-acc"}, threads_option="num_threads")
    missing = BenchPath("no-such-backend", "no-such-backend")
    results = run_config(Config("mlp", size="small"), [rough, missing], SMALL)
    by = {r.path: r for r in results}
    assert by["minic-f16"].status == "mismatch" and by["minic-f16"].max_abs_err > 1e-4
    assert by["minic-f16"].blocks == [] and by["minic-f16"].detail
    assert by["no-such-backend"].status == "unsupported" and "unknown backend" in by["no-such-backend"].detail


def test_a_path_can_run_on_the_sources_of_another_folder(tmp_path):
    """benchmarks/ab.py times a base revision this way: its worker imports minic from there."""
    import shutil
    from pathlib import Path
    import minic
    root = Path(minic.__file__).resolve().parents[1]
    for package in ("minic", "bridges"):
        shutil.copytree(root / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    base = BenchPath("base", "minic", {"use_cache": False}, "num_threads", source_dir=str(tmp_path))
    results = run_config(Config("mlp", size="small"), [base, resolve("minic")], SMALL)
    assert [r.status for r in results] == ["ok", "ok"]
    assert results[0].source == str(tmp_path.resolve()) and results[1].source == str(root)


def test_bench_writes_json_markdown_and_a_plot(tmp_path, capsys):
    out, md, pic = tmp_path / "b.json", tmp_path / "b.md", tmp_path / "b.svg"
    rc = main(["bench", "mlp", "--size", "small", "--vs", "torch", "--threads", "1", "--batch", "1,2",
               "--rounds", "2", "--calls", "2", "--warmup", "0", "--json", str(out), "--markdown", str(md),
               "--plot", str(pic)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["rounds"] == 2 and len(data["load_before"]) == 3 and data["machine"]
    rows = {(r["path"], r["batch"]): r for r in data["rows"]}
    assert set(rows) == {(p, b) for p in ("torch", "minic") for b in (1, 2)}
    for r in rows.values():
        assert r["status"] == "ok" and r["threads"] == 1 and len(r["blocks_s"]) == 2
        assert r["median_s"] == statistics.median(r["block_medians_s"]) > 0
        assert r["spread_s"] == [min(r["block_medians_s"]), max(r["block_medians_s"])]
    text = md.read_text()
    assert "| mlp | 2 | 1 |" in text and "Peak RSS" in text and "load average" in text
    assert "<svg" in pic.read_text()
    assert "x eager" in capsys.readouterr().out


def test_plot_without_graphviz_is_one_line_naming_the_package(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))              # no programs at all
    rc = main(["bench", "mlp", "--size", "small", "--vs", "torch", "--rounds", "1", "--plot", str(tmp_path / "b.svg")])
    err = capsys.readouterr().err
    assert rc == 1 and "needs 'dot', which is not installed (Debian: apt-get install graphviz" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "b.svg").exists()
    assert tools.SETUP in err


@pytest.mark.parametrize("argv, message", [
    (["--rounds", "0"], "--rounds"),
    (["--threads", "0"], "--threads takes positive integers"),
    (["--batch", "two"], "--batch takes positive integers"),
    (["--vs", "no-such-path"], "unknown bench path 'no-such-path'"),
    (["--plot", "x.gif"], "unknown picture format"),
])
def test_bench_rejects_bad_arguments(argv, message, capsys):
    assert main(["bench", "mlp", "--size", "small", *argv]) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_paths_take_their_thread_count_from_their_own_option():
    assert resolve("minic").options_for(2) == {"use_cache": False, "num_threads": 2}
    assert resolve("onnxruntime").options_for(1) == {"threads": 1}
    assert resolve("openvino").options_for(2) == {"precision": "f32", "threads": 2}
    assert resolve("torch-compile").name == "inductor" and resolve("inductor").options_for(2) == {}
    assert resolve("mlir-tosa").options == {"via": "tosa"}          # a minic debug variant
    assert [p.name for p in parse("minic,onnxruntime,torch,onnxruntime")] == ["torch", "onnxruntime", "minic"]


def test_batched_repeats_the_batch_axis_only():
    ids = np.arange(6).reshape(1, 6)
    out, = batched((ids,), ({0: "B", 1: "T"},), 3)
    assert out.shape == (3, 6) and (out == ids).all() and out.flags.c_contiguous
    image = np.ones((1, 3, 4, 4), np.float32)
    assert batched((image,), ({},), 8)[0] is image                     # no batch axis: unchanged


def test_the_table_shows_small_ratios_and_the_best_rival():
    config = Config("tiny")
    results = [Result("torch", config, "ok", blocks=[[2e-3, 2e-3]]),
               Result("onnxruntime", config, "ok", blocks=[[4e-6]]),
               Result("openvino", config, "ok", blocks=[[8e-6]]),
               Result("minic", config, "ok", compile_s=0.5, blocks=[[5e-6, 5e-6]])]
    console = Console(record=True, width=250)
    print_config(console, config, results)
    text = console.export_text()
    assert "0.00250" in text and "1.25" in text         # x eager; x best rival (ONNX Runtime's 4 us)
    table = markdown(results, ["torch", "onnxruntime", "openvino", "minic"])
    assert "| tiny | 1 | 1 | 2.00 [2.00-2.00] | **0.00400 [0.00400-0.00400]** |" in table
    assert table.splitlines()[4].endswith("| 1.25 |")
    assert "CPU ms per call" not in table                # no CPU figures recorded: no such table


def test_one_thread_rows_get_a_cpu_time_table_with_the_best_rival_by_that_figure():
    config = Config("tiny", threads=1)
    two = Config("tiny", threads=2)
    results = [Result("onnxruntime", config, "ok", blocks=[[4e-3]], cpu_blocks=[[3e-3]]),
               Result("openvino", config, "ok", blocks=[[3e-3]], cpu_blocks=[[6e-3]]),
               Result("minic", config, "ok", blocks=[[5e-3]], cpu_blocks=[[1.5e-3]]),
               Result("minic", two, "ok", blocks=[[5e-3]], cpu_blocks=[[9e-3]])]
    table = markdown(results, ["onnxruntime", "openvino", "minic"])
    cpu = table[table.index("CPU ms per call"):].splitlines()
    assert "| tiny | 1 | 1 | **3.00** | 6.00 | 1.50 | 0.500 |" in cpu     # ONNX Runtime best by CPU time
    assert not any(line.startswith("| tiny | 1 | 2 |") for line in cpu)   # two threads: CPU time is no latency


def test_an_unknown_model_is_one_line(capsys):
    assert main(["bench", "no-such-model", "--vs", "torch"]) == 1
    assert "unknown model 'no-such-model'" in capsys.readouterr().err


def test_precisions_expand_each_path_to_the_modes_it_has():
    names = [p.name for p in parse("inductor,onnxruntime", ("f32", "bf16", "int8"))]
    assert names == ["torch", "inductor", "inductor:bf16", "onnxruntime", "onnxruntime:int8",
                     "minic", "minic:bf16", "minic:int8"]          # torch: the f32 reference only
    assert resolve("openvino:bf16").options == {"precision": "bf16"}
    assert resolve("minic:bf16").options_for(1) == {"use_cache": False, "precision": "bf16", "num_threads": 1}
    assert resolve("minic:int8-own").options == {"use_cache": False, "precision": "int8"}   # minic's own PTQ
    assert [p.name for p in parse("openvino:bf16", ("f32", "int8"))] == ["torch", "openvino:bf16", "minic", "minic:int8"]
    with pytest.raises(UserError, match="runs at f32, int8, int8-dynamic, not 'bf16'"):
        resolve("onnxruntime:bf16")
    with pytest.raises(UserError, match="--precision takes"):
        parse("torch", ("f8",))


def test_int8_paths_run_the_quantizers_file_within_the_int8_bound():
    """int8: the model quantized by ONNX Runtime's quantize_static (QDQ), the same file for
    every engine; int8-dynamic: quantize_dynamic's.  Each is judged against the f32
    reference by the 8-bit bound, and differs from it (the quantization is real)."""
    from minic.verify.tolerance import QDQ8
    paths = parse("onnxruntime", ("int8", "int8-dynamic"))
    results = run_config(Config("mlp", size="small"), paths, SMALL)
    by = {r.path: r for r in results}
    assert set(by) == {"torch", "onnxruntime:int8", "onnxruntime:int8-dynamic", "minic:int8", "minic:int8-dynamic"}
    for name in ("onnxruntime:int8", "minic:int8", "onnxruntime:int8-dynamic", "minic:int8-dynamic"):
        r = by[name]
        assert r.status == "ok" and r.blocks, (name, r.detail)
        assert 1e-4 < r.rel_err <= QDQ8, name
    # the same quantized file: minic's answer is ONNX Runtime's within f32 rounding and a quantum
    assert abs(by["minic:int8"].rel_err - by["onnxruntime:int8"].rel_err) < 1e-3


def test_the_static_int8_recipe_puts_the_matmuls_on_integers():
    from minic import backends
    from minic.api import load
    from minic.passes import optimize
    source = backends.recipe("int8")(load("mlp", size="small"), 0)
    assert source.onnx_path.exists() and source.name == "mlp-int8"
    graph = optimize(backends.graph_of(source))
    assert sum(n.op == "matmul_integer" for n in graph.nodes) >= 2
    assert backends.recipe("f32") is None


def test_engine_best_compares_each_engine_at_its_fastest_precision():
    from minic.bench.report import best_line
    config = Config("tiny", threads=1)
    results = [Result("onnxruntime", config, "ok", blocks=[[4e-3]]),
               Result("onnxruntime:int8", config, "ok", blocks=[[2e-3]]),
               Result("openvino:bf16", config, "mismatch"),           # outside its bound: never timed
               Result("minic", config, "ok", blocks=[[5e-3]]),
               Result("minic:int8", config, "ok", blocks=[[3e-3]])]
    assert best_line(results) == "at each engine's best: minic:int8 3.00 ms / onnxruntime:int8 2.00 ms = 1.50x"
    table = markdown(results, ["onnxruntime", "onnxruntime:int8", "openvino:bf16", "minic", "minic:int8"])
    assert table.splitlines()[4].endswith("| 1.50 |")


def test_isa_holds_each_engine_by_its_own_switch_and_names_those_it_cannot():
    """--isa avx2: minic compiles for this CPU's features less AVX-512 and AMX; oneDNN (OpenVINO,
    PyTorch) and ATen get their ceilings in every worker's environment; ONNX Runtime has no switch."""
    from minic.bench.paths import ISAS, held_to, isa, not_held
    paths = held_to(parse("openvino,onnxruntime"), ISAS["avx2"])
    assert [p.name for p in paths] == ["torch", "openvino", "onnxruntime", "minic"]
    for p in paths:
        assert p.env == {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
    features = paths[-1].options["features"].split(",")
    assert {"-avx512f", "-avx512vnni", "-amx-int8", "+avx2", "+fma"} <= set(features)
    assert not any(f.startswith("+avx512") or f.startswith("+amx") for f in features)
    assert "features" not in paths[1].options and not_held(paths) == ["onnxruntime"]
    with pytest.raises(UserError, match="--isa takes avx512-vnni, avx2, not 'sse2'"):
        isa("sse2")


def test_a_run_held_to_an_isa_says_so_and_its_workers_run_under_it(tmp_path, capsys):
    out = tmp_path / "b.json"
    rc = main(["bench", "mlp", "--size", "small", "--vs", "torch", "--isa", "avx2", "--threads", "1",
               "--rounds", "1", "--calls", "2", "--warmup", "0", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["isa"].startswith("avx2 (ONEDNN_MAX_CPU_ISA=AVX2, ATEN_CPU_CAPABILITY=avx2; minic compiled without")
    assert [r["status"] for r in data["rows"]] == ["ok", "ok"]
    assert "instruction set: avx2" in capsys.readouterr().out
