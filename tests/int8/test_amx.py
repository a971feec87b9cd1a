"""The int8 matmul on Intel AMX tiles (tdpbusd; minic/schedule/tiles.py, minic/codegen/tiles.py):
its Loop IR exact under the interpreter, tdpbusd in the assembly for a target with amx-int8
(compile only: any x86-64 host), the compiled kernel exact where this host may run tiles, and
VNNI where Linux refuses them."""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest

import minic
from minic import amx, backends, pipeline
from minic.ir.loops_interp import run_program
from minic.ir.text import parse_graph
from minic.options import CompileOptions, tiles_u8s8
from minic.runtime import compile_graph
from minic.verify.tolerance import F32, QDQ8

SPR = "+avx512f,+avx512vl,+avx512bw,+avx512vnni"
AMX = SPR + ",+amx-tile,+amx-int8"            # Sapphire Rapids with its tiles, named: any x86-64 host emits it
# (M, K, N): inside one tile, ragged along each axis (overlapping blocks, a zeroed k overlap), whole blocks
SHAPES = [(5, 12, 7), (17, 68, 17), (40, 100, 50), (33, 1028, 40), (64, 256, 96)]


def host_runs_tiles() -> bool:
    features = llvm.get_host_cpu_features()
    return bool(features.get("amx-int8", False) and features.get("amx-tile", False)) and amx.tile_data_granted()


def _first(out) -> np.ndarray:
    return np.asarray(out[0] if isinstance(out, tuple) else out)


def matmul_integer(m: int | str, k: int, n: int):
    return parse_graph(f"""graph @g(%x: u8[{m}, {k}], %w: i8[{k}, {n}]) -> (i32[{m}, {n}]) {{
  %y = matmul_integer(%x, %w) : i32[{m}, {n}]
  return %y
}}""")


def operands(m: int, k: int, n: int):
    rng = np.random.default_rng(m * k * n)
    x, w = rng.integers(0, 256, (m, k)).astype(np.uint8), rng.integers(-128, 128, (k, n)).astype(np.int8)
    x[0], w[:, 0] = 255, -128                                 # the extremes: 255 · -128 in every product
    return x, w


@pytest.mark.parametrize("m, k, n", SHAPES[:3])
def test_the_tile_schedule_is_exact_under_the_loop_interpreter(m, k, n):
    program = pipeline.run(matmul_integer(m, k, n), "scheduled", CompileOptions(features=AMX, use_cache=False,
                                                                                 num_threads=1))
    assert "tile_dot<" in str(program)
    x, w = operands(m, k, n)
    (y,) = run_program(program, [x, w])
    np.testing.assert_array_equal(y, x.astype(np.int64) @ w.astype(np.int64))


def test_tdpbusd_only_where_the_target_has_amx_int8():
    graph = matmul_integer(64, 256, 96)
    asm = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=AMX, use_cache=False))
    assert asm.count("tdpbusd") >= 4 and "ldtilecfg" in asm and "tilerelease" in asm
    assert "tilestored" in asm           # the sums leave the tile registers once, after the reduction
    vnni = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=SPR, use_cache=False))
    assert "tdpbusd" not in vnni and "vpdpbusd" in vnni
    scheduled = str(pipeline.run(graph, "scheduled", CompileOptions(features=SPR, use_cache=False)))
    assert "tile_" not in scheduled
    f32 = parse_graph("""graph @g(%x: f32[64, 256], %w: f32[256, 96]) -> (f32[64, 96]) {
  %y = matmul(%x, %w) : f32[64, 96]
  return %y
}""")
    assert "tdpbusd" not in pipeline.run(f32, "asm", CompileOptions(features=AMX, use_cache=False))


def test_tiles_refuse_what_they_cannot_take():
    # K not a multiple of 4 (the weights' groups of four): the VNNI template's code
    assert "tile_" not in str(pipeline.run(matmul_integer(32, 62, 32), "scheduled",
                                           CompileOptions(features=AMX, use_cache=False)))


@pytest.mark.skipif(not host_runs_tiles(), reason="this host cannot run AMX tiles (no amx-int8 in "
                    "/proc/cpuinfo, or Linux refused arch_prctl(ARCH_REQ_XCOMP_PERM)): assembly checked above")
@pytest.mark.parametrize("m, k, n", SHAPES)
@pytest.mark.parametrize("threads", [1, 2])
def test_the_amx_kernel_equals_the_integer_sums(m, k, n, threads):
    options = CompileOptions(use_cache=False, num_threads=threads)
    assert tiles_u8s8(options.target)
    x, w = operands(m, k, n)
    y = compile_graph(matmul_integer(m, k, n), options)(x, w)
    np.testing.assert_array_equal(y, x.astype(np.int64) @ w.astype(np.int64))


@pytest.mark.skipif(not host_runs_tiles(), reason="this host cannot run AMX tiles (see above)")
def test_rows_known_at_run_time_take_the_tiles_from_a_block_and_vnni_below():
    run = compile_graph(matmul_integer("M", 132, 40), CompileOptions(use_cache=False, num_threads=1))
    for m in (1, 31, 32, 77):
        x, w = operands(m, 132, 40)
        np.testing.assert_array_equal(run(x, w), x.astype(np.int64) @ w.astype(np.int64))


def test_a_refused_permission_gives_vnni_code_never_tiles(monkeypatch):
    monkeypatch.setattr(amx, "tile_data_granted", lambda: False)
    options = CompileOptions(use_cache=False, num_threads=1)
    assert not tiles_u8s8(options.target)
    graph = matmul_integer(40, 100, 50)
    assert "tile_" not in str(pipeline.run(graph, "scheduled", options))
    x, w = operands(40, 100, 50)
    np.testing.assert_array_equal(compile_graph(graph, options)(x, w), x.astype(np.int64) @ w.astype(np.int64))


def test_the_permission_request_says_false_when_linux_refuses(monkeypatch):
    class Refusing:
        def __init__(self, *args, **kwargs):
            self.syscall = lambda *args: -1

    monkeypatch.setattr(amx.ctypes, "CDLL", Refusing)
    assert amx.tile_data_granted.__wrapped__() is False


@pytest.mark.skipif(not host_runs_tiles(), reason="this host cannot run AMX tiles (see above)")
def test_bert_base_int8_on_tiles_is_within_the_8_bit_bound_and_equals_the_fake_quantization(cache):
    source = minic.load("bert-base", size="small")
    run = minic.compile("bert-base", size="small", precision="int8", cache_dir=cache)
    fake = backends.get("interp")(source, precision="int8")
    reference = backends.get("torch")(source)
    (ids,) = source.example_inputs
    longer = np.random.default_rng(1).integers(0, int(ids.max()) + 1, (2, 48)).astype(ids.dtype)   # T >= 32: tiles
    for x in (ids, longer):
        ref, got, want = (_first(f(x)) for f in (reference, run, fake))
        scale = np.abs(ref).max()
        assert 1e-4 < np.abs(got - ref).max() / scale <= QDQ8
        assert np.abs(got - want).max() / scale <= F32
