"""Convolutions on integers: a small torch CNN quantized by ONNX Runtime (statically, QDQ, a scale
per tensor or per output channel; dynamically, ConvInteger), compiled by minic with every conv
as ``conv2d_integer`` (``fake-quantization-to-integer``), against ONNX Runtime on the same file;
the conv kernel's reduction in vpdpbusd (AVX512-VNNI), asserted from the assembly."""
from __future__ import annotations

import collections
import re
from collections import Counter

import numpy as np
import onnx
import pytest

import minic
from minic import pipeline
from minic.api import graph_of, load
from minic.ir.text import parse_graph
from minic.options import CompileOptions
from minic.passes import optimize
from minic.runtime import compile_graph
from minic.runtime.specialize import one_graph
from minic.verify.tolerance import F32, INT8_QUANTA_PER_LAYER, int8_quanta
from tests.int8.qdq_models import CNN_SHAPE, quantized_cnn
from tests.int8.test_qdq_onnxruntime import output_scale
from tests.int8.test_vnni import SPR, host_has_avx512_vnni

ort = pytest.importorskip("onnxruntime")

CONVS = 4                                   # the CNN's: 3 -> 16, 16 -> 32 stride 2, depthwise, 1x1


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cnn")
    return {mode: quantized_cnn(folder, mode) for mode in ("per-tensor", "per-channel", "dynamic")}


def session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("mode", ["per-tensor", "per-channel", "dynamic"])
def test_every_conv_of_a_quantized_cnn_runs_on_integers_and_matches_onnxruntime(models, cache, mode):
    f32, path = models[mode]
    ops = Counter(n.op for n in optimize(graph_of(load(str(path)))).nodes)
    assert ops["conv2d_integer"] == CONVS and not ops["conv2d"], ops
    assert ops["matmul_integer"] == 1 and not ops["matmul"] and not ops["gemm"], ops
    rng = np.random.default_rng(5)
    for spread in (1.0, 1.5):                                          # past the calibrated range too
        x = (spread * rng.standard_normal(CNN_SHAPE)).astype(np.float32)
        want = session(path).run(None, {"x": x})[0]
        compiled = minic.compile(str(path), [x], backend="minic", cache_dir=cache)(x)
        interpreted = minic.compile(str(path), [x], backend="interp")(x)    # the float form, as imported
        if mode == "dynamic":
            # the i32 sums are equal; the scaling after them is float code, as a dynamic model's is
            bound = F32 * np.max(np.abs(want))
            assert np.max(np.abs(compiled - want)) <= bound and np.max(np.abs(interpreted - want)) <= bound
            continue
        # five requantized layers; measured: 0 quanta (every output equal)
        scale = output_scale(path)
        assert int8_quanta(compiled, want, scale) <= 5 * INT8_QUANTA_PER_LAYER
        assert int8_quanta(interpreted, want, scale) <= 5 * INT8_QUANTA_PER_LAYER
        assert np.mean(compiled == want) > 0.99


def conv_integer_model(path, k: int, pads: tuple[int, int, int, int], zero: int) -> None:
    from onnx import TensorProto, helper, numpy_helper
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=list(pads), strides=[2, 1])
    graph = helper.make_graph([node], "convinteger",
                              [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, k, 9, 8]),
                               helper.make_tensor_value_info("w", TensorProto.INT8, [32, k, 3, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
                              [numpy_helper.from_array(np.array(zero, np.uint8), "xz")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def test_the_i32_sums_and_the_padding_equal_onnxruntimes_convinteger(tmp_path):
    # ONNX Runtime pads with x's zero point (a real 0); conv2d_integer's third input says so
    k, pads, zero = 116, (1, 2, 0, 1), 201                 # 9 · 116 · 255 · 128 > 2^24: a float sum could round
    conv_integer_model(tmp_path / "ci.onnx", k, pads, zero)
    rng = np.random.default_rng(0)
    x = rng.integers(200, 256, (2, k, 9, 8)).astype(np.uint8)
    w = rng.integers(100, 128, (32, k, 3, 3)).astype(np.int8)
    w[1::2] = -128
    want = session(tmp_path / "ci.onnx").run(None, {"x": x, "w": w})[0]
    top, left, bottom, right = pads
    g = parse_graph(f"""graph @g(%x: u8[2, {k}, 9, 8], %w: i8[32, {k}, 3, 3]) -> (i32[2, 32, 4, 9]) {{
  const @z : u8[] = dense<{zero}>
  %y = conv2d_integer(%x, %w, @z) {{stride = [2, 1], padding = [{top}, {left}, {bottom}, {right}], dilation = [1, 1], groups = 1}} : i32[2, 32, 4, 9]
  return %y
}}""")
    # ONNX Runtime's sums are of x - zero; conv2d_integer's of x, the correction after it
    correction = zero * w.astype(np.int64).sum(axis=(1, 2, 3)).reshape(-1, 1, 1)
    for threads in (1, 2):
        got = compile_graph(g, CompileOptions(use_cache=False, num_threads=threads))(x, w)
        assert got.dtype == np.int32 and np.abs(got).max() > 2 ** 24
        np.testing.assert_array_equal(got - correction, want)


def vnni_per_kernel(asm: str) -> dict[str, int]:
    """vpdpbusd instructions per kernel of an assembly listing."""
    kernel, found = None, collections.Counter()
    for line in asm.splitlines():
        if re.match(r"^k\d+\w*:", line):
            kernel = line[:-1]
            found[kernel] += 0
        if "vpdpbusd" in line:
            found[kernel] += 1
    return dict(found)


@pytest.mark.skipif(not host_has_avx512_vnni(), reason="this CPU lacks avx512_vnni (see /proc/cpuinfo), so "
                    "minic multiplies widened i32 lanes instead of with vpdpbusd")
@pytest.mark.parametrize("mode", ["per-channel", "dynamic"])
def test_the_conv_kernels_multiply_with_vpdpbusd(models, mode):
    # vpdpbusd takes four input channels a step, the same pixel on every lane (output channel):
    # the convs of groups = 1, their input channels a multiple of 4 (the image's 3 padded to 4
    # by explicit-padding, where its zero point is known now).  The depthwise conv multiplies
    # widened i32 lanes (exact too).
    graph = optimize(graph_of(load(str(models[mode][1]))))
    fits = [n for n in graph.nodes if n.op == "conv2d_integer" and n.attrs.groups == 1
            and n.inputs[1].type.shape[1] % 4 == 0]
    assert len(fits) == (3 if mode == "per-channel" else 2)
    # VNNI's features named, without AMX's tiles (on tiles: tests/int8/test_amx_conv.py)
    found = vnni_per_kernel(pipeline.run(one_graph(load(str(models[mode][1]))), "asm",
                                         CompileOptions(use_cache=False, num_threads=1, features=SPR)))
    conv_kernels = {k: n for k, n in found.items() if "conv2d_integer" in k}
    assert sum(n > 0 for n in conv_kernels.values()) == len(fits), found


def test_vpdpbusd_in_a_conv_only_where_the_target_has_avx512_vnni():
    g = parse_graph("""graph @g(%x: u8[1, 16, 8, 8]) -> (i32[1, 32, 8, 8]) {
  const @w : i8[32, 16, 3, 3] = dense<3>
  const @z : u8[] = dense<9>
  %y = conv2d_integer(%x, @w, @z) {stride = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1} : i32[1, 32, 8, 8]
  return %y
}""")
    assert "vpdpbusd" in pipeline.run(g, "asm", CompileOptions(cpu="sapphirerapids", features=SPR, use_cache=False))
    assert "vpdpbusd" not in pipeline.run(g, "asm", CompileOptions(features="+avx2,+fma", use_cache=False))


@pytest.mark.parametrize("threads", [1, 2])
def test_a_conv_reads_four_channels_of_a_pixel_and_four_weight_rows_in_one_load(threads):
    # channel_quads: the image copied with four channels side by side (x_quads), so a step's four
    # activation bytes are one broadcast load, not four byte loads a plane apart and three shifts;
    # two images (the copy is per image), and with two threads the copy runs in parallel too.
    rng = np.random.default_rng(7)
    x, w = rng.integers(0, 256, (2, 16, 9, 11)).astype(np.uint8), rng.integers(-128, 128, (32, 16, 3, 3))
    g = parse_graph(f"""graph @g(%x: u8[2, 16, 9, 11]) -> (i32[2, 32, 9, 11]) {{
  const @w : i8[32, 16, 3, 3] = dense<{w.ravel().tolist()}>
  const @z : u8[] = dense<9>
  %y = conv2d_integer(%x, @w, @z) {{stride = [1, 1], padding = [1, 1, 1, 1], dilation = [1, 1], groups = 1}} : i32[2, 32, 9, 11]
  return %y
}}""")
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=threads, use_cache=False)
    code = str(pipeline.run(g, "scheduled", options))
    assert re.search(r"x_quads\[[^,\]]+, c0p, ", code), code              # a row's channels together
    assert ("parallel for (h_q = 0; h_q < 11;" in code) == (threads > 1), code   # the copy's rows shared out
    asm = pipeline.run(g, "asm", options)
    assert "vpdpbusd" in asm and re.search(r"vpbroadcastd\s+-?\d*\(", asm), "the quads broadcast from memory"
    # weight_quads: the packed weights hold a step's four rows side by side, so no byte shuffle
    # interleaves them at every step (the copy's block, which interleaves the image, has one)
    steps = [block for block in re.split(r"\n[.\w]+:", asm) if "vpdpbusd" in block]
    assert steps and not any(re.search(r"vperm[it]2b", block) for block in steps)
    if host_has_avx512_vnni():
        from minic.ir import ops
        want = ops.get("conv2d_integer").reference(g.nodes[0].attrs, x, w.astype(np.int8), np.uint8(9))
        got = compile_graph(g, CompileOptions(num_threads=threads, use_cache=False))(x)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("features", ["", "+avx2,+fma"])
@pytest.mark.parametrize("case", [(16, 1, 1, 1), (12, 2, 0, 1), (8, 1, 1, 2), (3, 1, 1, 1)],
                         ids=["3x3-pad", "stride2", "grouped", "three-channels"])
def test_integer_conv_is_exact(features, case):
    c, stride, pad, groups = case
    rng = np.random.default_rng(c)
    x, w = rng.integers(0, 256, (2, c, 9, 11)).astype(np.uint8), rng.integers(-128, 128, (24, c // groups, 3, 3))
    x[0, :, 0], w[0] = 255, -128                              # the extremes: 255 · -128 in every product
    oh, ow = (9 + 2 * pad - 3) // stride + 1, (11 + 2 * pad - 3) // stride + 1
    g = parse_graph(f"""graph @g(%x: u8[2, {c}, 9, 11], %w: i8[24, {c // groups}, 3, 3]) -> (i32[2, 24, {oh}, {ow}]) {{
  const @z : u8[] = dense<130>
  %y = conv2d_integer(%x, %w, @z) {{stride = [{stride}, {stride}], padding = [{pad}, {pad}, {pad}, {pad}], dilation = [1, 1], groups = {groups}}} : i32[2, 24, {oh}, {ow}]
  return %y
}}""")
    from minic.ir import ops
    want = ops.get("conv2d_integer").reference(g.nodes[0].attrs, x, w.astype(np.int8), np.uint8(130))
    got = compile_graph(g, CompileOptions(features=features, num_threads=1, use_cache=False))(x, w.astype(np.int8))
    np.testing.assert_array_equal(got, want)


def test_qlinearconv_with_a_scale_per_channel_runs_on_integers_and_equals_onnxruntime(tmp_path, cache):
    # minic imports QLinearConv as dequantize · dequantize -> conv2d (+ the i32 bias) -> quantize: the rule's pattern
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    c, o = 16, 24
    consts = {"xs": np.float32(0.02), "xz": np.uint8(120), "w": rng.integers(-128, 128, (o, c, 3, 3)).astype(np.int8),
              "ws": (0.002 * (1 + np.arange(o) / o)).astype(np.float32), "wz": np.zeros(o, np.int8),
              "ys": np.float32(0.5), "yz": np.uint8(128), "b": rng.integers(-5000, 5000, o).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                            pads=[1, 1, 1, 1], strides=[2, 2])
    graph = helper.make_graph([node], "qlinearconv", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, c, 9, 9])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, o, 5, 5])],
                              [numpy_helper.from_array(np.asarray(v), name) for name, v in consts.items()])
    path = tmp_path / "qlinearconv.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    ops = Counter(n.op for n in optimize(graph_of(load(str(path)))).nodes)
    assert ops["conv2d_integer"] == 1 and not ops["conv2d"], ops
    x = rng.integers(0, 256, (2, c, 9, 9)).astype(np.uint8)
    want = session(path).run(None, {"x": x})[0]
    got = minic.compile(str(path), [x], backend="minic", cache_dir=cache)(x)
    assert np.abs(got.astype(np.int32) - want).max() <= INT8_QUANTA_PER_LAYER     # measured: equal


def test_the_i32_sums_of_a_tile_are_stored_down_its_columns_by_unpacking():
    """A conv's output is contiguous along its columns, its tile's lanes are channels: the epilogue
    reads the i32 tile down its columns, the same 8 x 8 transposes (unpack, shuffle, 128-bit
    halves) as an f32 tile's, not one permutation of 7 registers a channel (resnet50's int8 at one
    thread on AVX512-VNNI without AMX: 22.5 -> 20.6 ms)."""
    rng = np.random.default_rng(14)
    x, w = rng.integers(0, 256, (1, 64, 14, 14)).astype(np.uint8), rng.integers(-128, 128, (32, 64, 1, 1))
    g = parse_graph(f"""graph @g(%x: u8[1, 64, 14, 14]) -> (i32[1, 32, 14, 14]) {{
  const @w : i8[32, 64, 1, 1] = dense<{w.ravel().tolist()}>
  const @z : u8[] = dense<0>
  %y = conv2d_integer(%x, @w, @z) {{stride = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1}} : i32[1, 32, 14, 14]
  return %y
}}""")
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=1, use_cache=False)
    assert "i32 acc0[7, 32]" in str(pipeline.run(g, "scheduled", options))      # 7 rows of 32 lanes
    asm = pipeline.run(g, "asm", options)
    unpacks, permutes = len(re.findall(r"vpunpck[lh]dq", asm)), len(re.findall(r"vpermt2[dq]", asm))
    assert unpacks >= 16 and unpacks > 2 * permutes, (unpacks, permutes)
    from minic.ir import ops
    want = ops.get("conv2d_integer").reference(g.nodes[0].attrs, x, w.astype(np.int8), np.uint8(0))
    for features in ("", "+avx2,+fma"):
        got = compile_graph(g, CompileOptions(features=features, num_threads=1, use_cache=False))(x)
        np.testing.assert_array_equal(got, want)


def requantizing_conv(rng, n: int, c: int, o: int, h: int, w: int, residual: bool, stride: int = 1):
    """A 1x1 conv2d_integer of u8 [n, c, h, w] into o channels, requantized to bytes (scale and bias
    per channel, a residual input added or relu, round, clip): (graph, x, r, its exact output).
    The scales are powers of two and the biases quarters, so the products are exact and a build
    with fused multiply-adds rounds as one without."""
    x, wt = rng.integers(0, 256, (n, c, h, w)).astype(np.uint8), rng.integers(-128, 128, (o, c, 1, 1))
    ih, iw, h, w = h, w, (h - 1) // stride + 1, (w - 1) // stride + 1
    r = rng.integers(0, 256, (n, o, h, w)).astype(np.uint8)
    scale = (2.0 ** -rng.integers(8, 14, (o, 1, 1))).astype(np.float32)
    bias = (rng.integers(-400, 400, (o, 1, 1)) / 4).astype(np.float32)
    t = f"f32[{n}, {o}, {h}, {w}]"
    add = f"%t = cast(%r) {{dtype = f32}} : {t}\n  %c = add(%b, %t) : {t}" if residual else f"%c = relu(%b) : {t}"
    g = parse_graph(f"""graph @g(%x: u8[{n}, {c}, {ih}, {iw}], %r: u8[{n}, {o}, {h}, {w}]) -> (u8[{n}, {o}, {h}, {w}]) {{
  const @w : i8[{o}, {c}, 1, 1] = dense<{wt.ravel().tolist()}>
  const @z : u8[] = dense<0>
  const @scale : f32[{o}, 1, 1] = dense<{scale.ravel().tolist()}>
  const @bias : f32[{o}, 1, 1] = dense<{bias.ravel().tolist()}>
  const @lo : f32[] = dense<0.0>
  const @hi : f32[] = dense<255.0>
  %y = conv2d_integer(%x, @w, @z) {{stride = [{stride}, {stride}], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1}} : i32[{n}, {o}, {h}, {w}]
  %f = cast(%y) {{dtype = f32}} : {t}
  %m = mul(%f, @scale) : {t}
  %b = add(%m, @bias) : {t}
  {add}
  %q = round(%c) : {t}
  %l = max(%q, @lo) : {t}
  %h = min(%l, @hi) : {t}
  %o = cast(%h) {{dtype = u8}} : u8[{n}, {o}, {h}, {w}]
  return %o
}}""")
    from minic.ir import ops
    sums = ops.get("conv2d_integer").reference(g.nodes[0].attrs, x, wt.astype(np.int8), np.uint8(0))
    v = sums.astype(np.float32) * scale + bias
    v = v + r.astype(np.float32) if residual else np.maximum(v, 0)
    return g, x, r, np.clip(np.round(v), 0, 255).astype(np.uint8)


@pytest.mark.parametrize("residual", [False, True])
def test_the_requantization_runs_in_the_tiles_own_orientation_before_the_columns(residual):
    """A requantizing epilogue (scale and bias per channel, relu, round, clip, to bytes) reads only
    the tile and per-channel values: it runs on the tile's 14 registers of 16 channels, the
    columns (7 pixels each, 32 of them) only transposed and narrowed to bytes; with a residual
    input (read along the columns, the output's layout) only the scale and bias run there."""
    g, x, r, want = requantizing_conv(np.random.default_rng(15), 1, 64, 32, 14, 14, residual)
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=1, use_cache=False)
    code = str(pipeline.run(g, "scheduled", options))
    staged = re.search(r"acc0_g\[i3i, i1i\] = (.*);", code)
    assert staged, code
    tile = "f32 acc0_g[7, 32]" if residual else "i32 acc0_g[7, 32]"     # the bytes' i32 there, before narrowing
    assert tile in code and "bias" in staged.group(1), code
    assert ("round" in staged.group(1)) != residual, "the rest runs after the residual's add, on the columns"
    assert "%r" not in staged.group(1) and not re.search(r"\br\[", staged.group(1))
    for features in ((SPR,) if host_has_avx512_vnni() else ()) + ("+avx2,+fma",):
        got = compile_graph(g, CompileOptions(features=features, num_threads=1, use_cache=False))(x, r)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_1x1_conv_of_long_rows_runs_its_columns_as_lanes(threads):
    """A 1x1 conv of rows of 32 columns or more (resnet50's first stage: 56) runs the output
    columns as lanes and 8 channels as register rows: the epilogue stores each register as a piece
    of an NCHW row (no transpose), reading the residual the same way, and vpdpbusd takes a
    channel's four weights as a broadcast.  40 columns: two blocks of 32, overlapping; 20
    channels: three blocks of 8, overlapping."""
    g, x, r, want = requantizing_conv(np.random.default_rng(16), 2, 16, 20, 3, 40, residual=True)
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=threads, use_cache=False)
    code = str(pipeline.run(g, "scheduled", options))
    assert "i32 acc0[8, 32]" in code and "acc0_g" not in code, code      # channels as rows: no transpose
    asm = pipeline.run(g, "asm", options)
    assert "vpdpbusd" in asm and re.search(r"vpbroadcastd|\{1to16\}", asm), "a channel's weights broadcast"
    assert not re.search(r"vpunpck[lh]dq", asm), "no i32 tile transposed"
    for features in ((SPR,) if host_has_avx512_vnni() else ()) + ("+avx2,+fma",):
        got = compile_graph(g, CompileOptions(features=features, num_threads=threads, use_cache=False))(x, r)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("channels, outputs", [(24, 20), (16, 20)])
def test_a_narrowing_1x1_conv_of_long_rows_shares_its_rows_out_over_threads(channels, outputs):
    """Columns as lanes on two threads: a conv with fewer output channels than input ones runs a row
    at a time, its rows shared out as the copy's are, so a thread reads only its part of the larger
    input; one that widens shares out its blocks of channels, each over the whole image."""
    # 9 rows of 40 columns: as one row of 360 pixels, 12 tiles of 32 would waste 24 (flat_pixels: no)
    g, x, r, want = requantizing_conv(np.random.default_rng(17), 2, channels, outputs, 9, 40, residual=True)
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=2, use_cache=False)
    code = str(pipeline.run(g, "scheduled", options))
    narrows = outputs < channels
    assert "parallel for (h_q = 0; h_q < 9;" in code, code                  # the copy's rows, either way
    assert bool(re.search(r"parallel for \((i\w+) = 0; \1 < 9;", code)) == narrows, code   # the conv's rows
    for features in ((SPR,) if host_has_avx512_vnni() else ()) + ("+avx2,+fma",):
        got = compile_graph(g, CompileOptions(features=features, num_threads=2, use_cache=False))(x, r)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("channels, outputs", [(24, 20), (16, 20)])
def test_a_1x1_conv_whose_pixels_fill_whole_tiles_runs_them_as_one_row(channels, outputs, threads):
    """8 rows of 40 columns are 16 tiles of 32 columns, each row's two overlapping by 24; as one
    row of 320 pixels (the same NCHW bytes: flat_pixels) they are 10 whole tiles.  The input, the
    residual and the output are seen as [.., 1, 320]; on two threads a conv that narrows shares
    out its tiles of pixels, one that widens its blocks of channels (each over all the pixels)."""
    g, x, r, want = requantizing_conv(np.random.default_rng(18), 2, channels, outputs, 8, 40, residual=True)
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=threads, use_cache=False)
    code = str(pipeline.run(g, "scheduled", options))
    kernel = next(line for line in code.splitlines() if line.startswith("kernel"))
    for flat in (f"u8 x[2, {channels}, 1, 320]", "u8 vr[2, 20, 1, 320]", "u8 o[2, 20, 1, 320]"):
        assert flat in kernel, kernel
    assert f"u8 x_quads[1, {channels // 4}, 320, 4]" in code and "i32 acc0[8, 32]" in code, code
    tiles = ("for (i3o = 0; i3o < 10;" if threads == 1 else "parallel for (i3o = 0; i3o < 10;"
             if outputs < channels else "parallel for (i1oi2i3o = 0; i1oi2i3o < 30;")   # 3 blocks x 10 tiles
    assert tiles in code, code                                                        # whole tiles, none overlapping
    for features in ((SPR,) if host_has_avx512_vnni() else ()) + ("+avx2,+fma",):
        got = compile_graph(g, CompileOptions(features=features, num_threads=threads, use_cache=False))(x, r)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_strided_1x1_conv_copies_only_the_pixels_it_reads(threads):
    """A 1x1 conv of stride 2 (resnet50's projections) reads every other row and column: its copy
    with four channels side by side holds those only, a quarter of the image, read as a stride-1
    conv reads its own."""
    g, x, r, want = requantizing_conv(np.random.default_rng(19), 2, 16, 20, 10, 12, residual=False, stride=2)
    options = CompileOptions(cpu="sapphirerapids", features=SPR, num_threads=threads, use_cache=False)
    code = str(pipeline.run(g, "scheduled", options))
    assert "u8 x_quads[5, 4, 6, 4]" in code, code
    assert re.search(r"= x\[i0, [^\]]*\* 2, w_q \* 2\];", code), code                 # even rows, even columns
    assert re.search(r"x_quads\[i2, c0p, i3o \* 6 \+ i3i, 0\]", code), code              # read as stride 1
    for features in ((SPR,) if host_has_avx512_vnni() else ()) + ("+avx2,+fma",):
        got = compile_graph(g, CompileOptions(features=features, num_threads=threads, use_cache=False))(x, r)
        np.testing.assert_array_equal(got, want)


def test_an_f32_1x1_conv_of_long_rows_keeps_its_channels_as_lanes():
    # the 8-bit orientation is for vpdpbusd's quads only: an f32 conv on the same target keeps its own
    w = np.ones((20, 16, 1, 1), np.float32)
    g = parse_graph(f"""graph @g(%x: f32[1, 16, 3, 40]) -> (f32[1, 20, 3, 40]) {{
  const @w : f32[20, 16, 1, 1] = dense<{w.ravel().tolist()}>
  %y = conv2d(%x, @w) {{stride = [1, 1], padding = [0, 0, 0, 0], dilation = [1, 1], groups = 1}} : f32[1, 20, 3, 40]
  return %y
}}""")
    code = str(pipeline.run(g, "scheduled", CompileOptions(cpu="sapphirerapids", features=SPR, use_cache=False)))
    assert re.search(r"vectorized for \(i1i = 0; i1i < 16", code), code       # lanes over the 20 channels
