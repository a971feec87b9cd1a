"""The rule ``fake-quantization-to-integer`` (minic/passes/quantized.py) at the graph level:
what it rewrites, what it refuses and the words it refuses with, and what it leaves alone."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import minic
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph
from minic.ir.verify import verify
from minic.passes import PASSES, optimize
from minic.passes.quantized import IntegerContraction, Refusal, plan
from minic.passes.rewrite import Match

RNG = np.random.default_rng(0)


def dense(a: np.ndarray) -> str:
    return "[" + ", ".join(str(v) for v in np.asarray(a).reshape(-1).tolist()) + "]"


def qdq_matmul(w: np.ndarray, zw, sw, x_type: str = "u8", zx: int = 7) -> str:
    """y = matmul((f32(x) - zx) · sx, (f32(@w) - @zw) · @sw), as minic imports DequantizeLinear."""
    k, n = w.shape
    wt = "u8" if w.dtype == np.uint8 else "i8"
    zw, sw = np.asarray(zw), np.asarray(sw, np.float32)
    shape = lambda a: ", ".join(map(str, a.shape))
    return f"""graph @g(%x: {x_type}[4, {k}]) -> (f32[4, {n}]) {{
  const @w : {wt}[{k}, {n}] = dense<{dense(w)}>
  const @zw : {wt}[{shape(zw)}] = dense<{dense(zw)}>
  const @sw : f32[{shape(sw)}] = dense<{dense(sw)}>
  const @zx : {x_type}[] = dense<{zx}>
  const @sx : f32[] = dense<0.05>
  %xf = cast(%x) {{dtype = f32}} : f32[4, {k}]
  %zxf = cast(@zx) {{dtype = f32}} : f32[]
  %xs = sub(%xf, %zxf) : f32[4, {k}]
  %xd = mul(%xs, @sx) : f32[4, {k}]
  %wf = cast(@w) {{dtype = f32}} : f32[{k}, {n}]
  %zwf = cast(@zw) {{dtype = f32}} : f32[{shape(zw)}]
  %ws = sub(%wf, %zwf) : f32[{k}, {n}]
  %wd = mul(%ws, @sw) : f32[{k}, {n}]
  %y = matmul(%xd, %wd) : f32[4, {n}]
  return %y
}}"""


def planned(text: str) -> IntegerContraction | Refusal | None:
    g = verify(parse_graph(text))
    node = next(n for n in g.nodes if n.op in ("matmul", "gemm"))
    return plan(Match(g, node, g.producers()))


def inputs(x_type: str, k: int = 16) -> np.ndarray:
    info = np.iinfo(np.uint8 if x_type == "u8" else np.int8)
    return RNG.integers(info.min, info.max + 1, (4, k)).astype(info.dtype)


@pytest.mark.parametrize("x_type", ["u8", "i8"])
def test_per_channel_scales_and_nonzero_zero_points_are_handled(x_type):
    w = RNG.integers(-100, 100, (16, 3)).astype(np.int8)
    text = qdq_matmul(w, zw=[3, -5, 0], sw=[0.02, 0.5, 0.001], x_type=x_type, zx=-9 if x_type == "i8" else 200)
    p = planned(text)
    assert isinstance(p, IntegerContraction) and p.flip == (x_type == "i8")
    np.testing.assert_array_equal(p.w, w.astype(np.int32) - [3, -5, 0])          # zero points out at compile time
    g = parse_graph(text)
    h = verify(PASSES["fake-quantization-to-integer"](g))
    ops = Counter(n.op for n in h.nodes)
    assert ops["matmul_integer"] == 1 and not ops["matmul"] and ops["xor"] == (x_type == "i8"), ops
    x = inputs(x_type)
    exact = (x.astype(np.float64) - (-9 if x_type == "i8" else 200)) * np.float32(0.05) @ (
        (w.astype(np.float64) - [3, -5, 0]) * np.array([0.02, 0.5, 0.001], np.float32))
    (before,), (after,) = interpret(g, [x]), interpret(h, [x])
    # the integers are exact: only the final f32 scaling rounds (the float form rounds every sum)
    assert np.max(np.abs(after - exact)) <= 2 ** -23 * np.max(np.abs(exact))
    np.testing.assert_allclose(before, exact, rtol=1e-5, atol=1e-5 * np.max(np.abs(exact)))


def test_u8_weights_with_their_zero_point_become_s8():
    w = RNG.integers(0, 256, (16, 3)).astype(np.uint8)
    p = planned(qdq_matmul(w, zw=128, sw=0.01))
    assert isinstance(p, IntegerContraction) and p.w.dtype == np.int8
    np.testing.assert_array_equal(p.w, w.astype(np.int32) - 128)


@pytest.mark.parametrize("change, reason", [
    (dict(zw=[100, 0, 0]), "the weights minus their zero point leave i8's range"),
    (dict(w_type="u8", zw=0), "the weights minus their zero point leave i8's range"),
    (dict(k_axis_scale=True), "the weights' scale varies along the contracted axis"),
])
def test_what_the_rule_refuses_it_names(change, reason):
    w = RNG.integers(-100, 100, (16, 3)).astype(np.int8)
    w[0, 0] = -100
    if change.pop("w_type", None) == "u8":
        w = RNG.integers(200, 256, (16, 3)).astype(np.uint8)
    sw = np.full((16, 3) if change.pop("k_axis_scale", False) else (3,), 0.01, np.float32)
    sw.reshape(-1)[0] = 0.02
    text = qdq_matmul(w, **{"zw": 0, "sw": sw, **change})
    p = planned(text)
    assert isinstance(p, Refusal) and p.reason.startswith(reason), p
    g = parse_graph(text)
    assert Counter(n.op for n in PASSES["fake-quantization-to-integer"](g).nodes)["matmul"] == 1   # stays float


def test_per_channel_activations_are_refused_by_name():
    w = RNG.integers(-100, 100, (16, 3)).astype(np.int8)
    text = qdq_matmul(w, zw=0, sw=0.01).replace("const @sx : f32[] = dense<0.05>",
                                                  "const @sx : f32[16] = dense<[" + ", ".join(["0.05"] * 16) + "]>")
    p = planned(text)
    assert isinstance(p, Refusal) and "activations' scale and zero point are not one number" in p.reason


@pytest.mark.parametrize("name", ["mlp", "bert-base"])
def test_float_models_are_left_alone(name):
    g = minic.api.graph_of(minic.load(name, size="small"))
    assert all(plan(Match(g, n, g.producers())) is None for n in g.nodes if n.op in ("matmul", "gemm"))
    out = PASSES["fake-quantization-to-integer"](g)
    assert [n.op for n in out.nodes] == [n.op for n in g.nodes]
    assert "matmul_integer" not in {n.op for n in optimize(g).nodes}


def matmul_integer_form(w: np.ndarray, x_type: str, runtime_zero: bool) -> str:
    """ONNX's MatMulInteger as minic imports it: a float matmul of shifted integers, cast to i32;
    the activations' zero point a constant, or an 8-bit input (DynamicQuantizeLinear's, known at
    run time) widened to f32."""
    k, n = w.shape
    zx = "%zx" if runtime_zero else "@zx"
    return f"""graph @g(%x: {x_type}[4, {k}]{f", %zp: {x_type}[]" if runtime_zero else ""}) -> (i32[4, {n}]) {{
  const @w : i8[{k}, {n}] = dense<{dense(w)}>
  const @zw : i8[] = dense<-3>
  {"%zx = cast(%zp) {dtype = f32} : f32[]" if runtime_zero else "const @zx : f32[] = dense<7.0>"}
  %xf = cast(%x) {{dtype = f32}} : f32[4, {k}]
  %xs = sub(%xf, {zx}) : f32[4, {k}]
  %wf = cast(@w) {{dtype = f32}} : f32[{k}, {n}]
  %zwf = cast(@zw) {{dtype = f32}} : f32[]
  %ws = sub(%wf, %zwf) : f32[{k}, {n}]
  %p = matmul(%xs, %ws) : f32[4, {n}]
  %y = cast(%p) {{dtype = i32}} : i32[4, {n}]
  return %y
}}"""


@pytest.mark.parametrize("x_type", ["u8", "i8"])
@pytest.mark.parametrize("runtime_zero", [False, True])
def test_matmulintegers_form_runs_on_integers_with_a_zero_point_known_now_or_at_run_time(x_type, runtime_zero):
    w = RNG.integers(-100, 100, (16, 5)).astype(np.int8)
    g = verify(parse_graph(matmul_integer_form(w, x_type, runtime_zero)))
    h = verify(PASSES["fake-quantization-to-integer"](g))
    ops = Counter(n.op for n in h.nodes)
    assert ops["matmul_integer"] == 1 and not ops["matmul"] and ops["xor"] == (x_type == "i8"), ops
    x = inputs(x_type)
    args = [x, np.array(-11 if x_type == "i8" else 130, x.dtype)] if runtime_zero else [x]
    zx = args[1] if runtime_zero else 7
    exact = (x.astype(np.int64) - int(zx)) @ (w.astype(np.int64) + 3)
    np.testing.assert_array_equal(interpret(h, args)[0], exact)
    np.testing.assert_array_equal(interpret(g, args)[0], exact)          # the float form: exact at this size


def test_a_run_time_zero_point_that_may_not_be_an_integer_is_left_alone():
    w = RNG.integers(-100, 100, (16, 5)).astype(np.int8)
    text = matmul_integer_form(w, "u8", runtime_zero=True)
    text = text.replace("%zp: u8[]", "%zx: f32[]").replace("  %zx = cast(%zp) {dtype = f32} : f32[]\n", "")
    g = verify(parse_graph(text))
    assert Counter(n.op for n in PASSES["fake-quantization-to-integer"](g).nodes)["matmul"] == 1
