"""The int8 convolution on Intel AMX tiles (minic/schedule/conv_tiles.py: one tdpbsud per tap,
weights as A, the image copied with four channels interleaved as B): its Loop IR exact under
the interpreter, tdpbsud in the assembly for a named amx-int8 target (compile only: any x86-64
host), grouped convs left to VNNI, compiled kernels exact where this host may run tiles, and
resnet50 at ``precision="int8"`` with every conv on tiles within the 8-bit bound."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic import backends, pipeline
from minic.ir import ops
from minic.ir.loops import Const, For, TileDot, walk_stmts
from minic.ir.loops_interp import run_program
from minic.ir.text import parse_graph
from minic.options import CompileOptions
from minic.runtime import compile_graph
from minic.schedule.tiles import AHEAD
from minic.verify.tolerance import F32, QDQ8
from tests.int8.test_amx import AMX, SPR, _first, host_runs_tiles

# (C, H, W, O, k, stride, pad): few channels, a kernel row folded into k (k · C <= 64): 3x3 padded,
# stride 2, the image's 4 channels in a 7x7 stride-2 window, outputs below one tile (5 columns, 8
# channels); a tap a dot: ragged input channels (68: an overlapping chunk of 64), output channels (33)
# and columns, stride 2 (two phases of pixels), a 1x1 over 132 channels; outputs narrower than a
# tile, several rows a block (``flattened``): 7x7 as resnet50's last stage has them (3x3 padded, 1x1,
# a 1x1 of stride 2), 11 rows of 5 in blocks of 2 (the last block overlapping)
CASES = [(16, 9, 11, 24, 3, 1, 1), (12, 9, 11, 24, 3, 2, 0), (4, 20, 19, 40, 7, 2, 3), (8, 5, 10, 8, 3, 2, 1),
         (68, 9, 35, 33, 3, 1, 1), (72, 9, 13, 32, 3, 2, 1), (132, 6, 35, 70, 1, 1, 0),
         (64, 7, 7, 48, 3, 1, 1), (132, 7, 7, 40, 1, 1, 0), (64, 14, 14, 32, 1, 2, 0), (20, 11, 5, 24, 3, 1, 1)]
IDS = ["folded-3x3-pad", "folded-stride2", "stem-7x7", "small", "ragged", "stride2", "1x1",
       "rows-3x3", "rows-1x1", "rows-stride2", "rows-overlap"]


def conv_integer(c: int, h: int, w: int, o: int, k: int, stride: int, pad: int, groups: int = 1, batch: int = 1):
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    return parse_graph(f"""graph @g(%x: u8[{batch}, {c}, {h}, {w}], %w: i8[{o}, {c // groups}, {k}, {k}]) -> (i32[{batch}, {o}, {oh}, {ow}]) {{
  const @z : u8[] = dense<130>
  %y = conv2d_integer(%x, %w, @z) {{stride = [{stride}, {stride}], padding = [{pad}, {pad}, {pad}, {pad}], dilation = [1, 1], groups = {groups}}} : i32[{batch}, {o}, {oh}, {ow}]
  return %y
}}""")


def operands_and_sums(graph, c: int, h: int, w: int, o: int, k: int, groups: int = 1, batch: int = 1):
    rng = np.random.default_rng(c * o)
    x = rng.integers(0, 256, (batch, c, h, w)).astype(np.uint8)
    wt = rng.integers(-128, 128, (o, c // groups, k, k)).astype(np.int8)
    x[0, :, 0], wt[0] = 255, -128                              # the extremes: 255 · -128 in every product
    return x, wt, ops.get("conv2d_integer").reference(graph.nodes[0].attrs, x, wt, np.uint8(130))


def tile_dots(*kernels) -> int:
    return sum(isinstance(s, TileDot) for k in kernels for s in walk_stmts(k.body))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_conv_tile_schedule_is_exact_under_the_loop_interpreter(case):
    graph = conv_integer(*case)
    program = pipeline.run(graph, "scheduled", CompileOptions(features=AMX, use_cache=False, num_threads=1))
    assert tile_dots(*program.kernels) > 0
    x, w, want = operands_and_sums(graph, *case[:5])
    (y,) = run_program(program, [x, w])
    np.testing.assert_array_equal(y, want)


def test_tdpbsud_in_a_conv_only_where_the_target_has_amx_int8():
    graph = conv_integer(64, 14, 14, 64, 3, 1, 1)
    asm = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=AMX, use_cache=False))
    assert asm.count("tdpbsud") >= 4 and "ldtilecfg" in asm and "tilestored" in asm and "vpdpbusd" not in asm
    vnni = pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=SPR, use_cache=False))
    assert "tdpb" not in vnni and "vpdpbusd" in vnni


def executed_dots(s, times: int = 1) -> int:
    """How many tile dots the statement runs (for the batch's one image)."""
    if isinstance(s, TileDot):
        return times
    if isinstance(s, For):
        return executed_dots(s.body, times * (s.extent.value if isinstance(s.extent, Const) else 1))
    return sum(executed_dots(t, times) for t in getattr(s, "stmts", ())) + (
        executed_dots(s.body, times) if hasattr(s, "body") and not isinstance(s, For) else 0)


@pytest.mark.parametrize("case, dots", [((64, 7, 7, 48, 3, 1, 1), 3 * 9 * 4), ((64, 14, 14, 32, 1, 2, 0), 2 * 4)])
def test_outputs_narrower_than_a_tile_take_several_rows_a_block(case, dots):
    """A 7x7 output's row fills 7 of a tile's 16 columns; its 7 rows, 9 padded pixels apart (the 3x3
    conv's) or 7 (the 1x1 of stride 2's), fill 4 tiles of 16 (63 or 49 columns of 64): 4 dots a tap
    and a block of 16 output channels (48: 3 blocks, 9 taps; 32: 2 blocks, 1 tap), where one row a
    block took 7 dots (of 7 columns) for every 32 channels and tap."""
    options = CompileOptions(features=AMX, use_cache=False, num_threads=1)
    program = pipeline.run(conv_integer(*case), "scheduled", options)
    found = [s for k in program.kernels for s in walk_stmts(k.body) if isinstance(s, TileDot)]
    assert {(d.rows, d.cols) for d in found} == {(16, 16)}
    assert sum(executed_dots(k.body) for k in program.kernels) == dots


def test_the_stem_takes_two_kernel_rows_a_dot():
    """The image's 4 channels in a 7-wide window are 28 bytes of k a kernel row; two rows fill 56
    of a dot's 64 (the folded copy's rows h and h + 1 lie one after the other), so the 7 rows take
    4 dots a tile, the last pair's second row weighing zero: 2 x 10 blocks (40 channels in 2 row
    tiles; 10 rows of 10 columns), 2 tiles each, 4 dots a tile = 160 (one row a dot: 280)."""
    options = CompileOptions(features=AMX, use_cache=False, num_threads=1)
    program = pipeline.run(conv_integer(4, 20, 19, 40, 7, 2, 3), "scheduled", options)
    dots = [s for k in program.kernels for s in walk_stmts(k.body) if isinstance(s, TileDot)]
    assert {d.depth for d in dots} == {56}
    assert sum(executed_dots(k.body) for k in program.kernels) == 160


def test_weights_read_once_are_prefetched_as_the_tiles_load_them():
    """A 7x7 output is one block of rows: each weight tile is read once, from memory, so the dots
    prefetch the panel AHEAD bytes on (prefetcht1); one row a block rereads its panel from cache
    for every row, and prefetches nothing."""
    options = CompileOptions(cpu="sapphirerapids", features=AMX, use_cache=False, num_threads=1)
    once, rows = conv_integer(64, 7, 7, 48, 3, 1, 1), conv_integer(64, 14, 14, 64, 3, 1, 1)
    dots = [s for k in pipeline.run(once, "scheduled", options).kernels for s in walk_stmts(k.body)
            if isinstance(s, TileDot)]
    assert dots and all(d.ahead == (AHEAD, 0) for d in dots)
    assert "prefetcht1" in pipeline.run(once, "asm", options)
    assert "prefetch" not in pipeline.run(rows, "asm", options)


def test_grouped_convs_stay_on_vnni():
    # a depthwise conv reads one input channel per output channel: no matmul for the tiles
    graph = conv_integer(32, 8, 8, 32, 3, 1, 1, groups=32)
    assert tile_dots(*pipeline.run(graph, "scheduled", CompileOptions(features=AMX, use_cache=False)).kernels) == 0


@pytest.mark.skipif(not host_runs_tiles(), reason="this host cannot run AMX tiles (no amx-int8 in "
                    "/proc/cpuinfo, or Linux refused arch_prctl(ARCH_REQ_XCOMP_PERM)): assembly checked above")
@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("threads", [1, 2])
def test_the_amx_conv_kernel_equals_the_integer_sums(case, threads):
    graph = conv_integer(*case, batch=2)
    x, w, want = operands_and_sums(graph, *case[:5], batch=2)
    options = CompileOptions(use_cache=False, num_threads=threads)
    assert tile_dots(*pipeline.run(graph, "scheduled", options).kernels) > 0
    np.testing.assert_array_equal(compile_graph(graph, options)(x, w), want)


@pytest.mark.skipif(not host_runs_tiles(), reason="this host cannot run AMX tiles (see above)")
def test_resnet50_int8_on_tiles_is_within_the_8_bit_bound_and_equals_the_fake_quantization(cache):
    source = minic.load("resnet50", size="small")
    program = pipeline.run(backends.quantized_int8(source).graph, "scheduled", CompileOptions(use_cache=False))
    convs = [k for k in program.kernels if "conv2d_integer" in k.name]
    # every conv but the last 3x3, whose output is 1x1 (lowered without its unit loops: as lowered)
    assert len(convs) == 17 and sum(tile_dots(k) > 0 for k in convs) == 16
    run = minic.compile("resnet50", size="small", precision="int8", cache_dir=cache)
    (x,) = source.example_inputs
    ref, got = _first(backends.get("torch")(source)(x)), _first(run(x))
    want = _first(backends.get("interp")(source, precision="int8")(x))
    scale = np.abs(ref).max()
    assert 1e-4 < np.abs(got - ref).max() / scale <= QDQ8
    assert np.abs(got - want).max() / scale <= F32
