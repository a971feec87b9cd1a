"""The bf16 convolution on Intel AMX tiles (minic/schedule/conv_tiles.py with tdpbf16ps: the
image copied two channels a pixel side by side, 32 k a dot, f32 sums; an image still in f32 is
cast to bf16 by the copy itself): the schedule under the loop interpreter in every mode of the int8
one (a tap a dot, a kernel row folded into k, several rows a block), tdpbf16ps in the assembly
for a named amx-bf16 target, compiled kernels where this host may run tiles, and resnet50 at
``precision="bf16"`` with its convs on tiles within the bf16 bound."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic import backends, pipeline
from minic.api import graph_of
from minic.compare import as_tuple
from minic.ir.loops import TileDot, walk_stmts
from minic.ir.loops_interp import run_program
from minic.ir.text import parse_graph
from minic.ir.types import DType
from minic.options import CompileOptions
from minic.runtime import compile_graph
from minic.verify.precision import judge
from tests.f16.test_amx_bf16 import AMX_BF16, BF16_SPR, host_runs_bf16_tiles
from tests.int8.test_amx_conv import CASES, IDS


def conv_f32(c: int, h: int, w: int, o: int, k: int, stride: int, pad: int, batch: int = 1):
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    y = f"f32[{batch}, {o}, {oh}, {ow}]"
    return parse_graph(f"""graph @g(%x: f32[{batch}, {c}, {h}, {w}], %w: f32[{o}, {c}, {k}, {k}]) -> ({y}) {{
  %y = conv2d(%x, %w) {{stride = [{stride}, {stride}], padding = [{pad}, {pad}, {pad}, {pad}], dilation = [1, 1], groups = 1}} : {y}
  return %y
}}""")


def operands(c: int, h: int, w: int, o: int, k: int, stride: int, pad: int, batch: int = 1):
    """f32 operands that are bf16 values (``precision="bf16"`` rounds nothing then), and their conv
    in f64: products of bf16 are exact in f32, so only the f32 sums err."""
    import torch
    rng = np.random.default_rng(c * o)
    x = rng.standard_normal((batch, c, h, w)).astype(DType.bf16.numpy).astype(np.float32)
    wt = rng.standard_normal((o, c, k, k)).astype(DType.bf16.numpy).astype(np.float32)
    exact = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(wt, dtype=torch.float64),
                                       stride=stride, padding=pad).numpy()
    return x, wt, exact


def within_f32_sums(y: np.ndarray, exact: np.ndarray, k: int) -> bool:
    return np.max(np.abs(y - exact)) <= k * 2 ** -24 * np.max(np.abs(exact)) * 4


def tile_dots(program) -> int:
    return sum(isinstance(s, TileDot) for k in program.kernels for s in walk_stmts(k.body))


# an image's 3 channels (resnet50's stem): a kernel row folded into k, the copy pads a pair with a zero
BF16_CASES, BF16_IDS = CASES + [(3, 20, 19, 40, 7, 2, 3), (3, 9, 8, 16, 3, 1, 1)], IDS + ["stem-3", "three-3x3"]


@pytest.mark.parametrize("case", BF16_CASES, ids=BF16_IDS)
def test_the_bf16_conv_tile_schedule_under_the_loop_interpreter(case):
    """Padded, the pad's kernel stores the image in bf16; unpadded, the copy casts it."""
    c, _, _, _, k = case[:5]
    program = pipeline.run(conv_f32(*case), "scheduled", CompileOptions(features=AMX_BF16, use_cache=False,
                                                                        num_threads=1, precision="bf16"))
    assert tile_dots(program) > 0 and "f32 c_tiles" in str(program) and "bf16 x_quads" in str(program)
    x, w, exact = operands(*case)
    (y,) = run_program(program, [x, w])
    assert within_f32_sums(y, exact, c * k * k)


def test_tdpbf16ps_in_a_conv_only_where_the_target_has_amx_bf16():
    graph = conv_f32(64, 14, 14, 64, 3, 1, 1)
    text = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=AMX_BF16, use_cache=False,
                                                     precision="bf16"))
    assert text.count("tdpbf16ps") >= 4 and "ldtilecfg" in text
    int8 = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=BF16_SPR + ",+amx-tile,+amx-int8",
                                                     use_cache=False, precision="bf16"))
    assert "tdpbf16ps" not in int8


@pytest.mark.skipif(not host_runs_bf16_tiles(), reason="this host cannot run AMX bf16 tiles (no amx_bf16 in "
                    "/proc/cpuinfo, or Linux refused arch_prctl(ARCH_REQ_XCOMP_PERM)): assembly checked above")
@pytest.mark.parametrize("case", BF16_CASES, ids=BF16_IDS)
@pytest.mark.parametrize("threads", [1, 2])
def test_the_amx_bf16_conv_kernel_sums_exact_products_in_f32(case, threads):
    graph = conv_f32(*case, batch=2)
    options = CompileOptions(use_cache=False, num_threads=threads, precision="bf16")
    assert tile_dots(pipeline.run(graph, "scheduled", options)) > 0
    x, w, exact = operands(*case, batch=2)
    assert within_f32_sums(compile_graph(graph, options)(x, w), exact, case[0] * case[4] ** 2)


@pytest.mark.skipif(not host_runs_bf16_tiles(), reason="this host cannot run AMX bf16 tiles (see above)")
def test_resnet50_bf16_convs_on_tiles_within_the_bf16_bound():
    source = minic.load("resnet50", size="small")
    program = pipeline.run(graph_of(source), "scheduled", CompileOptions(precision="bf16", use_cache=False))
    convs = [k for k in program.kernels if "conv2d" in k.name]
    # all but the last 3x3, whose output is 1x1 (lowered without its unit loops: as lowered)
    on_tiles = [k for k in convs if any(isinstance(s, TileDot) for s in walk_stmts(k.body))]
    assert len(convs) == 17 and len(on_tiles) == 16, [k.name for k in convs if k not in on_tiles]
    reference = as_tuple(backends.get("torch")(source)(*source.example_inputs))
    got = as_tuple(minic.compile("resnet50", size="small", precision="bf16", use_cache=False)(*source.example_inputs))
    status, error, _ = judge(got, reference, "bf16")
    assert status == "ok", error
