"""The bf16 matmul on Intel AMX tiles (tdpbf16ps: f32 sums of bf16 rows and columns of 32;
minic/schedule/tiles.py, its panel two k of a column side by side): the tile schedule under the
interpreter, tdpbf16ps in the assembly for a named amx-bf16 target (compile only: any x86-64
host), compiled kernels within f32's sums of exact products where this host may run tiles, and
bert-base at ``precision="bf16"`` within the bf16 bound."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic import amx, backends, pipeline
from minic.api import graph_of
from minic.compare import as_tuple
from minic.ir.loops import TileDot, walk_stmts
from minic.ir.loops_interp import run_program
from minic.ir.text import parse_graph
from minic.ir.types import DType
from minic.options import CompileOptions, tiles_bf16
from minic.runtime import compile_graph
from minic.verify.precision import judge

BF16_SPR = "+avx512f,+avx512vl,+avx512bw,+avx512bf16"
AMX_BF16 = BF16_SPR + ",+amx-tile,+amx-bf16"
# (M, K, N): inside one tile, ragged along each axis (overlapping blocks, a zeroed k overlap), whole blocks
SHAPES = [(5, 12, 7), (17, 68, 17), (40, 100, 50), (33, 1030, 40), (64, 256, 96)]


def host_runs_bf16_tiles() -> bool:
    return tiles_bf16(CompileOptions().target) and amx.tile_data_granted()


def matmul_bf16(m: int | str, k: int, n: int):
    return parse_graph(f"""graph @g(%x: bf16[{m}, {k}], %w: bf16[{k}, {n}]) -> (f32[{m}, {n}]) {{
  %a = cast(%x) {{dtype = f32}} : f32[{m}, {k}]
  %b = cast(%w) {{dtype = f32}} : f32[{k}, {n}]
  %y = matmul(%a, %b) : f32[{m}, {n}]
  return %y
}}""")


def operands(m: int, k: int, n: int):
    rng = np.random.default_rng(m * k * n)
    x, w = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    x, w = x.astype(DType.bf16.numpy), w.astype(DType.bf16.numpy)
    return x, w, x.astype(np.float64) @ w.astype(np.float64)         # products of bf16 are exact in f32


def within_f32_sums(y: np.ndarray, exact: np.ndarray, k: int) -> bool:
    """Only the f32 sums err: k roundings of 2^-24 each, at most, of the largest partial sum."""
    return np.max(np.abs(y - exact)) <= k * 2 ** -24 * np.max(np.abs(exact)) * 4


@pytest.mark.parametrize("m, k, n", SHAPES[:3])
def test_the_bf16_tile_schedule_under_the_loop_interpreter(m, k, n):
    program = pipeline.run(matmul_bf16(m, k, n), "scheduled", CompileOptions(features=AMX_BF16, use_cache=False,
                                                                              num_threads=1))
    assert "tile_dot<" in str(program) and "f32 c_tiles" in str(program) and "bf16 w_tiles" in str(program)
    x, w, exact = operands(m, k, n)
    (y,) = run_program(program, [x, w])
    assert within_f32_sums(y, exact, k)


def test_tdpbf16ps_only_where_the_target_has_amx_bf16():
    graph = matmul_bf16(64, 256, 96)
    text = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=AMX_BF16, use_cache=False))
    assert text.count("tdpbf16ps") >= 4 and "ldtilecfg" in text and "vdpbf16ps" not in text
    # amx-int8 without amx-bf16: the int8 tiles only, the bf16 matmul on vdpbf16ps
    int8 = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=BF16_SPR + ",+amx-tile,+amx-int8",
                                                     use_cache=False))
    assert "tdpbf16ps" not in int8 and "vdpbf16ps" in int8


@pytest.mark.skipif(not host_runs_bf16_tiles(), reason="this host cannot run AMX bf16 tiles (no amx_bf16 in "
                    "/proc/cpuinfo, or Linux refused arch_prctl(ARCH_REQ_XCOMP_PERM)): assembly checked above")
@pytest.mark.parametrize("m, k, n", SHAPES + [("M", 132, 40)])
@pytest.mark.parametrize("threads", [1, 2])
def test_the_amx_bf16_kernel_sums_exact_products_in_f32(m, k, n, threads):
    options = CompileOptions(use_cache=False, num_threads=threads)
    run = compile_graph(matmul_bf16(m, k, n), options)
    for rows in ([m] if isinstance(m, int) else [1, 31, 32, 77]):      # run-time rows: tiles from 32
        x, w, exact = operands(rows, k, n)
        assert within_f32_sums(run(x, w), exact, k)


@pytest.mark.skipif(not host_runs_bf16_tiles(), reason="this host cannot run AMX bf16 tiles (see above)")
def test_bert_base_bf16_on_tiles_is_within_the_bf16_bound():
    source = minic.load("bert-base", size="small")
    program = pipeline.run(graph_of(source), "scheduled",
                           CompileOptions(precision="bf16", use_cache=False))
    assert sum(isinstance(s, TileDot) for k in program.kernels for s in walk_stmts(k.body)) > 0
    reference = as_tuple(backends.get("torch")(source)(*source.example_inputs))
    got = as_tuple(minic.compile("bert-base", size="small", precision="bf16", use_cache=False)(*source.example_inputs))
    status, error, _ = judge(got, reference, "bf16")
    assert status == "ok", error
