"""precision="bf16": the f16 mode's path with bf16 as the storage type (8 significant
bits, f32's range), f32 arithmetic and f32 accumulators; judged by the bf16 bound."""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest

import minic
from minic import backends, pipeline
from minic.cli import main
from minic.compare import as_tuple
from minic.ir.text import parse_graph
from minic.ir.types import DType
from minic.ir.verify import verify
from minic.lowering.precision import MODES
from minic.options import PRECISIONS, CompileOptions, tiles_bf16
from minic.passes import LEVELS, PASSES
from minic.passes.to_f16 import store_as, to_bf16
from minic.runtime import compile_graph
from minic.runtime.specialize import one_graph
from minic.verify.precision import TOLERANCE, judge, precision_table, source
from minic.verify.tolerance import BF16, F16, QDQ8


def test_every_precision_names_its_storage_and_accumulator():
    assert set(MODES) == set(PRECISIONS) == set(TOLERANCE) - {"int8"}    # int8 quantizes the graph, stores f32
    assert TOLERANCE["int8"] == QDQ8
    assert MODES["bf16"] == (DType.bf16, DType.f32)
    assert BF16 == F16 * 8                    # unit roundoff 2^-8 against f16's 2^-11


def test_to_bf16_keeps_the_signature_and_stores_floats_as_bf16():
    g = parse_graph("""graph @g(%x: f32[2, 4], %n: i64[2, 4]) -> (f32[2, 3], f32[2, 4]) {
  const @w : f32[4, 3] = dense<[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1e30]>
  %m = matmul(%x, @w) : f32[2, 3]
  %f = cast(%n) {dtype = f32} : f32[2, 4]
  return %m, %f
}""")
    h = verify(to_bf16(g))
    assert PASSES["to-bf16"] is to_bf16 and all("to-bf16" not in names for names in LEVELS.values())
    assert [str(v.type) for v in h.inputs + h.outputs] == [str(v.type) for v in g.inputs + g.outputs]
    (w,) = h.constants
    assert w.type.dtype == DType.bf16 and w.data.dtype == DType.bf16.numpy
    assert np.isfinite(w.data.astype(np.float32)).all()          # 1e30 is past f16's range, not bf16's
    assert float(w.data[0, 0]) == 0.10009765625                  # 0.1 to the nearest bf16 (8 bits)
    assert [n.attrs.dtype for n in h.nodes if n.op == "cast"].count(DType.bf16) == 2   # %x enters, %f made
    with pytest.raises(ValueError, match="f16 or bf16"):
        store_as(g, DType.i32)


@pytest.mark.parametrize("name", ["mlp", "cnn", "llama-tiny"])
def test_bf16_storage_matches_the_f32_reference(name, cache):
    src = minic.load(name, size="small")
    reference = as_tuple(backends.get("torch")(src)(*src.example_inputs))
    errors = {}
    for precision in ("f16", "bf16"):
        outputs = as_tuple(backends.get("minic")(src, precision=precision, cache_dir=cache)(*src.example_inputs))
        assert all(y.dtype == np.float32 for y in outputs)      # callers see f32, as before
        status, errors[precision], _ = judge(outputs, reference, precision)
        assert status == "ok", (precision, errors[precision])
    # bf16 really ran: three bits fewer than f16, so several times its error (measured 8-17x)
    assert errors["bf16"].rel > 3 * errors["f16"].rel, errors


def test_bf16_accumulates_in_f32_and_does_not_overflow(run):
    # A sum of 16384 terms near 0.1 in f32: far better than the storage bound ...
    src = source("long-sum")
    exact = src.example_inputs[0].astype(np.float64).sum(axis=1)
    rel = np.max(np.abs(run("long-sum", "bf16")[0] - exact)) / np.max(exact)
    assert 1e-6 < rel < 1e-3, rel
    # ... and a row sum of ~82000 (inf in f16's accumulator) is finite: bf16 has f32's range.
    assert np.isfinite(run("layer-norm-offset", "bf16")[0]).all()


def test_table_and_command(capsys):
    cells = precision_table(["softmax-wide", "softmax-large-logits"], ["bf16"], ["minic", "interp"])
    # A logit near 1000 stored in bf16 moves by up to 2: the storage itself drifts, as in f16 but more.
    assert [(c.model, c.backend, c.status) for c in cells] == [
        ("softmax-wide", "minic", "ok"), ("softmax-wide", "interp", "ok"),
        ("softmax-large-logits", "minic", "drift"), ("softmax-large-logits", "interp", "drift")]
    assert main(["verify", "--precision", "f16,bf16", "long-sum"]) == 0
    assert "| model | backend | f16 | bf16 |" in capsys.readouterr().out


# --- the code: bf16 conversions as instructions where the CPU has them ------------------

def asm(options: CompileOptions) -> str:
    return pipeline.run(one_graph(source("mlp")), "asm", options)


def host_has_avx512_bf16() -> bool:
    return bool(llvm.get_host_cpu_features().get("avx512bf16", False))


def target_features(features: str) -> str:
    return features or llvm.get_host_cpu_features().flatten()


@pytest.mark.skipif(not host_has_avx512_bf16(), reason="this CPU lacks avx512_bf16 (see /proc/cpuinfo), so "
                    "minic rounds f32 to bf16 on the bits instead of with vcvtneps2bf16")
def test_host_code_rounds_to_bf16_with_vcvtneps2bf16_and_multiplies_with_vdpbf16ps():
    # with tdpbf16ps where this host may run AMX tiles (tests/f16/test_amx_bf16.py)
    text = asm(CompileOptions(precision="bf16", use_cache=False))
    product = "tdpbf16ps" if tiles_bf16(CompileOptions().target) else "vdpbf16ps"
    assert "vcvtneps2bf16" in text and product in text
    text = asm(CompileOptions(precision="f16", use_cache=False))
    assert "vcvtneps2bf16" not in text and "vdpbf16ps" not in text


def test_bf16_instructions_only_where_the_target_has_them(cache, run):
    # Sapphire Rapids' features, named: any x86-64 host emits its assembly.
    spr = asm(CompileOptions(precision="bf16", cpu="sapphirerapids", use_cache=False,
                             features="+avx512f,+avx512vl,+avx512bw,+avx512bf16"))
    assert "vcvtneps2bf16" in spr and "vdpbf16ps" in spr and "__truncsfbf2" not in spr
    # Without AVX512-BF16, LLVM's fptrunc to bfloat would be a call the JIT cannot make: bits instead.
    avx2 = CompileOptions(precision="bf16", features="+avx2,+fma,+f16c", cache_dir=cache)
    text = asm(avx2)
    assert "vcvtneps2bf16" not in text and "vdpbf16ps" not in text and "__truncsfbf2" not in text
    src = source("mlp")
    want = run("mlp", "bf16")
    got = as_tuple(backends.get("minic")(src, precision="bf16", features=avx2.features, cache_dir=cache)(
        *src.example_inputs))
    for w, g in zip(want, got):     # the same roundings; vdpbf16ps adds a pair's two products in turn
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-5 * np.max(np.abs(w)))


@pytest.mark.parametrize("features", ["", "+avx2,+fma,+f16c"])
def test_rounding_to_bf16_is_to_nearest_even_with_and_without_the_instruction(features):
    g = parse_graph("""graph @g(%x: f32[64]) -> (f32[64]) {
  %b = cast(%x) {dtype = bf16} : bf16[64]
  %y = cast(%b) {dtype = f32} : f32[64]
  return %y
}""")
    special = [1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -7 + 2 ** -20,      # ties to even, above a tie
               -3.14159, np.inf, -np.inf, np.nan, 3.4e38, 0.0, -0.0, 1e-39, -1e-40, 1e-38]
    x = np.array(special + list(np.random.default_rng(0).standard_normal(64 - len(special))), np.float32)
    want = x.astype(DType.bf16.numpy).astype(np.float32)
    y = compile_graph(g, CompileOptions(features=features, use_cache=False))(x)
    same = (y == want) & (np.signbit(y) == np.signbit(want)) | np.isnan(y) & np.isnan(want)
    # f32 denormals (below 1.18e-38): vcvtneps2bf16 reads them as zero (AVX512-BF16's rule, which
    # oneDNN and OpenVINO have too); the bit rounding keeps them as ml_dtypes and PyTorch do.
    tiny = np.abs(x) < np.finfo(np.float32).tiny
    flushed = tiny & (y == 0) & (np.signbit(y) == np.signbit(x))
    assert (same | flushed).all(), (x[~same], y[~same], want[~same])
    assert same[~tiny].all() and (same[tiny].all() or "avx512bf16" in target_features(features))


# --- the matmul micro-kernel: two bf16 products per f32 lane (vdpbf16ps) -------------------

def matmul(k: int):
    return parse_graph(f"""graph @g(%x: f32[8, {k}], %w: f32[{k}, 48]) -> (f32[8, 48]) {{
  %y = matmul(%x, %w) : f32[8, 48]
  return %y
}}""")


def scheduled_kernel(k: int, pairs: bool):
    from minic.schedule.templates import Knobs, schedule_contraction
    program = pipeline.run(matmul(k), "loops", CompileOptions(precision="bf16", use_cache=False))
    (kernel,) = program.kernels
    return schedule_contraction(kernel, Knobs(), threads=1, bf16_pairs=pairs)


def test_the_template_pairs_the_terms_of_a_bf16_reduction():
    from minic.ir.loops import Store, print_function, walk_stmts
    paired = scheduled_kernel(64, pairs=True)
    text = print_function(paired)
    assert "for (k0p = 0; k0p < 32; k0p++)" in text and "k0p * 2 + 1" in text
    assert "bf16 w_pack" in text                              # the panel as stored: half the bytes
    updates = [s for s in walk_stmts(paired.body) if isinstance(s, Store) and s.buffer.name.startswith("acc")]
    assert len(updates) == 3                                  # the init and the two terms
    assert "k0p" not in print_function(scheduled_kernel(64, pairs=False))
    assert "k0p" not in print_function(scheduled_kernel(63, pairs=True))   # odd: one term a step


@pytest.mark.parametrize("k", [64, 63])
@pytest.mark.parametrize("features", ["", "+avx2,+fma,+f16c"])
def test_bf16_matmul_sums_exact_products_in_f32(k, features):
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((8, k)).astype(np.float32), rng.standard_normal((k, 48)).astype(np.float32)
    exact = x.astype(DType.bf16.numpy).astype(np.float64) @ w.astype(DType.bf16.numpy).astype(np.float64)
    y = compile_graph(matmul(k), CompileOptions(precision="bf16", features=features, num_threads=1,
                                                use_cache=False))(x, w)
    # Products of bf16 are exact in f32; only the f32 sums (and the output's bf16 rounding) err.
    rounded = exact.astype(np.float32).astype(DType.bf16.numpy).astype(np.float64)
    assert np.max(np.abs(y - rounded)) <= np.max(np.abs(exact)) * 2 ** -8
    assert np.max(np.abs(y.astype(np.float64) - exact)) <= 2 ** -8 * np.max(np.abs(exact))
