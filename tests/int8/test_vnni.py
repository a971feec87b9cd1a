"""The int8 matmul micro-kernel: four u8 × s8 products per i32 lane (AVX512-VNNI's vpdpbusd),
asserted from the assembly, and exact wherever it runs."""
from __future__ import annotations

import re
import llvmlite.binding as llvm
import numpy as np
import pytest

import minic
from minic import pipeline
from minic.ir.loops import print_function
from minic.ir.text import parse_graph
from minic.options import CompileOptions, tiles_u8s8
from minic.runtime import compile_graph
from minic.runtime.specialize import one_graph
from tests.int8.qdq_models import qdq_mlp

SPR = "+avx512f,+avx512vl,+avx512bw,+avx512vnni"      # Sapphire Rapids' features, named: any x86-64 host emits it


def host_has_avx512_vnni() -> bool:
    return bool(llvm.get_host_cpu_features().get("avx512vnni", False))


def matmul_integer(k: int, n: int = 48):
    return parse_graph(f"""graph @g(%x: u8[8, {k}], %w: i8[{k}, {n}]) -> (i32[8, {n}]) {{
  %y = matmul_integer(%x, %w) : i32[8, {n}]
  return %y
}}""")


@pytest.fixture(scope="module")
def qdq_source(tmp_path_factory):
    pytest.importorskip("onnxruntime", reason="ONNX Runtime's quantizer writes the QDQ model")
    return minic.load(str(qdq_mlp(tmp_path_factory.mktemp("qdq"), (64, 64), "QUInt8")))


@pytest.mark.skipif(not host_has_avx512_vnni(), reason="this CPU lacks avx512_vnni (see /proc/cpuinfo), so "
                    "minic multiplies widened i32 lanes instead of with vpdpbusd")
def test_host_code_of_an_onnxruntime_qdq_mlp_multiplies_with_vpdpbusd(qdq_source):
    options = CompileOptions(use_cache=False, num_threads=1)
    # where this host may run AMX tiles, its matmuls run on them instead (tests/int8/test_amx.py)
    text = pipeline.run(one_graph(qdq_source), "asm", options)
    assert text.count("tdpbusd" if tiles_u8s8(options.target) else "vpdpbusd") >= 2
    float_mlp = pipeline.run(one_graph(minic.load("mlp", size="small")), "asm", CompileOptions(use_cache=False))
    assert "vpdpbusd" not in float_mlp


def test_vpdpbusd_only_where_the_target_has_avx512_vnni(qdq_source):
    graph = one_graph(qdq_source)
    assert "vpdpbusd" in pipeline.run(graph, "asm", CompileOptions(cpu="sapphirerapids", features=SPR,
                                                                   use_cache=False))
    assert "vpdpbusd" not in pipeline.run(graph, "asm", CompileOptions(features="+avx2,+fma", use_cache=False))


def test_the_template_takes_an_8bit_reduction_four_terms_a_step():
    from minic.schedule.templates import Knobs, schedule_contraction
    (kernel,) = pipeline.run(matmul_integer(64), "loops", CompileOptions(use_cache=False)).kernels
    text = print_function(schedule_contraction(kernel, Knobs(), threads=1, u8s8_quads=True))
    assert "for (k0p = 0; k0p < 16; k0p++)" in text and "k0p * 4 + 3" in text
    assert "i8 w_pack" in text                                # the panel as stored: a quarter of the bytes
    assert "k0p" not in print_function(schedule_contraction(kernel, Knobs(), threads=1))
    (odd,) = pipeline.run(matmul_integer(62), "loops", CompileOptions(use_cache=False)).kernels
    assert "k0p" not in print_function(schedule_contraction(odd, Knobs(), threads=1, u8s8_quads=True))


@pytest.mark.parametrize("k", [64, 62, 1028])
@pytest.mark.parametrize("features", ["", "+avx2,+fma"])
@pytest.mark.parametrize("threads", [1, 2])
def test_integer_matmul_is_exact(k, features, threads):
    rng = np.random.default_rng(k)
    x, w = rng.integers(0, 256, (8, k)).astype(np.uint8), rng.integers(-128, 128, (k, 40)).astype(np.int8)
    x[0], w[:, 0] = 255, -128                                 # the extremes: 255 · -128 in every product
    y = compile_graph(matmul_integer(k, 40), CompileOptions(features=features, num_threads=threads,
                                                            use_cache=False))(x, w)
    np.testing.assert_array_equal(y, x.astype(np.int64) @ w.astype(np.int64))


@pytest.mark.parametrize("src, dst", [("i32", "f32"), ("f32", "i32"), ("u8", "i32"), ("i32", "i8"), ("i64", "f32"),
                                      ("f32", "u16"), ("i8", "i64"), ("f32", "f16"), ("bool", "f32"), ("f32", "bool")])
def test_every_cast_runs_on_whole_vectors(src, dst):
    """An int8 conv's i32 sums converted to f32 in its epilogue took a conversion and an insert
    per lane (half the kernel's time on AMX tiles): every cast is the scalar's instructions on
    the vector now, with the scalar's values."""
    g = parse_graph(f"""graph @g(%x: {src}[4, 64]) -> ({dst}[4, 64]) {{
  %y = cast(%x) {{dtype = {dst}}} : {dst}[4, 64]
  return %y
}}""")
    numpy = {"bool": np.bool_, "f16": np.float16, "f32": np.float32, "i8": np.int8, "u8": np.uint8,
             "u16": np.uint16, "i32": np.int32, "i64": np.int64}
    rng = np.random.default_rng(0)
    x = np.round(rng.uniform(-100, 100, (4, 64))) if src == "f32" else rng.integers(0, 100, (4, 64)) % (
        2 if src == "bool" else 100)
    x = x.astype(numpy[src])
    options = CompileOptions(use_cache=False, num_threads=1)
    wraps = src == "f32" and dst not in ("bool", "f16")        # to an integer through i64, as numpy on x86
    want = (x.astype(np.int64) if wraps else x).astype(numpy[dst])
    np.testing.assert_array_equal(compile_graph(g, options)(x), want)
    if host_has_avx512_vnni():
        asm = pipeline.run(g, "asm", options)
        assert not any(op in asm for op in ("vcvtsi2ss", "vcvttss2si", "vpinsrd", "vinsertps")), asm


@pytest.mark.parametrize("dtype", ["u8", "i8"])
def test_casts_between_f32_and_bytes_run_on_whole_vectors_and_wrap_as_numpy(dtype):
    # a QuantizeLinear's cast to bytes and a DequantizeLinear's back, in a kernel's epilogue:
    # one conversion per vector (Emitter.cast on the lanes), not one per lane; out of range wraps
    g = parse_graph(f"""graph @g(%x: f32[4, 64]) -> (f32[4, 64]) {{
  %q = cast(%x) {{dtype = {dtype}}} : {dtype}[4, 64]
  %y = cast(%q) {{dtype = f32}} : f32[4, 64]
  return %y
}}""")
    x = np.round(np.random.default_rng(0).uniform(-300, 300, (4, 64))).astype(np.float32)
    x[0, :4] = [-1.0, -0.5, 255.9, 127.5]
    options = CompileOptions(use_cache=False, num_threads=1)
    want = x.astype(np.int64).astype(getattr(np, "uint8" if dtype == "u8" else "int8")).astype(np.float32)
    np.testing.assert_array_equal(compile_graph(g, options)(x), want)
    if host_has_avx512_vnni():                    # AVX-512 (DQ): vcvttps2qq then vpmovqb, 8 lanes each
        assert "vcvttss2si" not in pipeline.run(g, "asm", options)


@pytest.mark.parametrize("dtype", ["u8", "i8"])
def test_a_clamped_cast_to_bytes_converts_through_i32(dtype):
    """A quantization's ``cast(min(max(round(x · r), lo), hi))``: the clamp bounds the value, so it
    converts through i32 (one conversion and one narrowing per 16 lanes) instead of i64 (two of
    each, and a shuffle), which out-of-range values need; and the rounding is the conversion's own
    (llvm.lrint: vcvtps2dq rounds to nearest even), not a vrndscaleps before a truncating one.
    The bytes are the same."""
    lo, hi = (0, 255) if dtype == "u8" else (-128, 127)
    g = parse_graph(f"""graph @g(%x: f32[4, 64]) -> ({dtype}[4, 64]) {{
  const @lo : f32[] = dense<{lo}.0>
  const @hi : f32[] = dense<{hi}.0>
  %r = round(%x) : f32[4, 64]
  %a = max(%r, @lo) : f32[4, 64]
  %c = min(%a, @hi) : f32[4, 64]
  %q = cast(%c) {{dtype = {dtype}}} : {dtype}[4, 64]
  return %q
}}""")
    x = np.random.default_rng(0).uniform(-400, 400, (4, 64)).astype(np.float32)
    x[0, :5] = [-0.5, 0.5, 254.5, 255.5, -128.5]
    options = CompileOptions(use_cache=False, num_threads=1)
    want = np.clip(np.round(x), lo, hi).astype(np.int64).astype(getattr(np, "uint8" if dtype == "u8" else "int8"))
    np.testing.assert_array_equal(compile_graph(g, options)(x), want)
    llvm_ir = str(pipeline.run(g, "llvm", options))
    assert re.search(r"llvm\.lrint\.v(\d+)i32\.v\1f32", llvm_ir) and "x i64>" not in llvm_ir, llvm_ir
    assert "roundeven" not in llvm_ir, llvm_ir
    if host_has_avx512_vnni():
        asm = pipeline.run(g, "asm", options)
        assert "vcvtps2dq" in asm and "vrndscaleps" not in asm, asm


def matmul_integer_of_rows(folder, k: int, n: int):
    """A matmul of B rows (a batch known at run time) by a constant weight, as a model's last layer is."""
    w = np.random.default_rng(k + n).integers(-128, 128, (k, n)).astype(np.int8)
    np.savez(folder / "w.npz", w=w)
    return parse_graph(f"""graph @g(%x: u8[B, {k}]) -> (i32[B, {n}]) {{
  const @w : i8[{k}, {n}] = file("w.npz", "w")
  %y = matmul_integer(%x, @w) : i32[B, {n}]
  return %y
}}""", folder / "g.mi"), w


def test_fewer_rows_than_a_tile_read_the_packed_panel(tmp_path):
    """At B = 1 (a model's classifier) the one-row-at-a-time code reads the panel packed for the tiles,
    four rows side by side, not the weight as stored (its 32 lanes of a row 1000 bytes apart): the
    unpacked weight is no kernel parameter any more (resnet50's int8 classifier at one thread, AVX512-VNNI
    without AMX: 0.37 -> 0.16 ms, in the model's call order)."""
    from minic.schedule.templates import Knobs, schedule_contraction
    graph, _ = matmul_integer_of_rows(tmp_path, 64, 64)
    (kernel,) = pipeline.run(graph, "loops", CompileOptions(use_cache=False)).kernels
    text = print_function(schedule_contraction(kernel, Knobs(), threads=1, u8s8_quads=True))
    few = text[text.index("} else {"):]                      # the code for fewer rows than a tile
    assert "(i32)w_pack[k0_sp, i1i_s, 3]" in few and "(i32)w[" not in few, few
    program = pipeline.run(graph, "scheduled", CompileOptions(cpu="sapphirerapids", features=SPR, use_cache=False))
    assert [p.name for p in program.kernels[0].params if p.role.name == "CONST"] == [program.kernels[0].name + "_w_pack"]


@pytest.mark.parametrize("rows", [1, 3, 8])
@pytest.mark.parametrize("features", ["", SPR, "+avx2,+fma"])
def test_a_batch_of_fewer_rows_than_a_tile_is_exact(rows, features, tmp_path):
    graph, w = matmul_integer_of_rows(tmp_path, 1028, 40)
    x = np.random.default_rng(rows).integers(0, 256, (rows, 1028)).astype(np.uint8)
    x[0] = 255
    cpu = "sapphirerapids" if features == SPR else ""
    y = compile_graph(graph, CompileOptions(features=features, cpu=cpu, num_threads=1, use_cache=False))
    if features == SPR and not host_has_avx512_vnni():
        return                                                   # compiled for it, not run here
    np.testing.assert_array_equal(y(x), x.astype(np.int64) @ w.astype(np.int64))


def test_48_lanes_of_quads_join_three_registers(tmp_path):
    """Hand knobs of 48 lanes: three vpdpbusd results of 16 lanes joined into one vector (no
    power of two: the joining shuffles widen the last)."""
    from minic.schedule.templates import Knobs
    graph, w = matmul_integer_of_rows(tmp_path, 64, 96)
    (kernel,) = pipeline.run(graph, "loops", CompileOptions(use_cache=False)).kernels
    x = np.random.default_rng(0).integers(0, 256, (12, 64)).astype(np.uint8)
    y = compile_graph(graph, CompileOptions(num_threads=1, use_cache=False,
                                            schedules={kernel.name: Knobs(rows=6, lanes=48)}))(x)
    np.testing.assert_array_equal(y, x.astype(np.int64) @ w.astype(np.int64))
