"""ONNX's storage-only element types (f8, f4, int4/uint4, int2/uint2) through minic's carriers.

Each conversion is checked against ONNX's own reference (onnx.reference, which
uses ml_dtypes) on inputs that reach every code: all f16 values, every
threshold between two codes and its neighbours (the ties), the overflow edge,
infinities, NaN and signed zeros — on the interpreter, and on the compiled path
for one float and one integer type (each compile costs seconds).
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from minic.errors import UnsupportedError
from minic.frontend.onnx_backend import MinicBackend
from minic.frontend.onnx_storage import STORAGE

FLOATS = [s for s in STORAGE.values() if s.is_float]
INTS = [s for s in STORAGE.values() if not s.is_float]


def _model(op: str, inputs: list[tuple[str, int]], out: int, shape=(None,), **attrs) -> onnx.ModelProto:
    """One node; every input of ``shape`` but a scale or zero point (s, z: scalars)."""
    node = helper.make_node(op, [n for n, _ in inputs], ["y"], **attrs)
    graph = helper.make_graph([node], "storage", [helper.make_tensor_value_info(n, t, () if n in "sz" else shape)
                                                  for n, t in inputs],
                              [helper.make_tensor_value_info("y", out, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _probe(st) -> np.ndarray:
    """f32 inputs hitting every code of ``st``, each rounding boundary from both sides, and the specials."""
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    v = st.values[np.isfinite(st.values)].astype(np.float64)
    v = np.unique(np.abs(v))
    mids = np.concatenate([(v[:-1] + v[1:]) / 2, [v[-1] * 1.0625, v[-1] * 1.125, v[-1] * 1.2]]).astype(np.float32)
    near = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))])
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 3e38, -3e38], np.float32)
    x = np.concatenate([halves, near, -near, specials])
    return x


def _same(got: np.ndarray, want: np.ndarray, signed_zero: bool) -> None:
    assert got.dtype == want.dtype
    g, w = got.astype(np.float64), want.astype(np.float64)
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    ok = ~np.isnan(w)
    np.testing.assert_array_equal(g[ok], w[ok])
    if signed_zero:
        np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


@pytest.mark.parametrize("st", FLOATS, ids=lambda s: s.name)
@pytest.mark.parametrize("saturate", [1, 0])
def test_narrowing_a_float_rounds_to_nearest_even_as_onnx_does(st, saturate):
    model = _model("Cast", [("x", TensorProto.FLOAT)], st.code, to=st.code, saturate=saturate)
    x = _probe(st)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = MinicBackend.prepare(model, backend="interp").run([x])[0]
    _same(got, want, signed_zero=not st.unsigned_zero and st.name != "FLOAT4E2M1")


@pytest.mark.parametrize("st", FLOATS, ids=lambda s: s.name)
@pytest.mark.parametrize("to", [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16])
def test_widening_every_code(st, to):
    model = _model("Cast", [("x", st.code)], to, to=to)
    x = np.arange(1 << st.bits, dtype=np.uint8).view(st.numpy)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = MinicBackend.prepare(model, backend="interp").run([x])[0]
    _same(got, want, signed_zero=True)


@pytest.mark.parametrize("st", INTS, ids=lambda s: s.name)
def test_small_integers_from_floats_and_integers(st):
    x = np.array([-9.5, -8.5, -3.0, -2.5, -1.5, -1.0, -0.5, 0.0, 0.5, 1.5, 2.5, 3.5, 7.5, 8.0, 15.5, 16.0,
                  100.0, np.nan, np.inf, -np.inf], np.float32)
    model = _model("Cast", [("x", TensorProto.FLOAT)], st.code, to=st.code)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(MinicBackend.prepare(model, backend="interp").run([x])[0], want)
    i = np.arange(-40, 40, dtype=np.int32)                 # an integer keeps its low bits
    model = _model("Cast", [("x", TensorProto.INT32)], st.code, to=st.code)
    got = MinicBackend.prepare(model, backend="interp").run([i])[0]
    assert got.dtype == st.numpy
    np.testing.assert_array_equal(got, i.astype(st.numpy))
    back = _model("Cast", [("x", st.code)], TensorProto.INT32, to=TensorProto.INT32)
    np.testing.assert_array_equal(MinicBackend.prepare(back, backend="interp").run([got])[0], got.astype(np.int32))


@pytest.mark.parametrize("code", [TensorProto.FLOAT8E4M3FN, TensorProto.INT4])
def test_the_compiled_path_agrees(code):
    st = STORAGE[code]
    x = _probe(st) if st.is_float else np.linspace(-10, 10, 81, dtype=np.float32)
    model = _model("Cast", [("x", TensorProto.FLOAT)], code, to=code, saturate=0) if st.is_float else \
        _model("Cast", [("x", TensorProto.FLOAT)], code, to=code)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    _same(MinicBackend.prepare(model, backend="minic").run([x])[0], want, signed_zero=True)


def test_quantize_and_dequantize_through_f8():
    x = np.array([0.0, 0.3, -1.7, 500.0, -1e6, 3.1], np.float32)
    scale = np.array(2.0, np.float32)
    zp = np.zeros((), np.uint8).view(STORAGE[TensorProto.FLOAT8E5M2].numpy)
    q = _model("QuantizeLinear", [("x", TensorProto.FLOAT), ("s", TensorProto.FLOAT), ("z", TensorProto.FLOAT8E5M2)],
               TensorProto.FLOAT8E5M2)
    want = ReferenceEvaluator(q).run(None, {"x": x, "s": scale, "z": zp})[0]
    got = MinicBackend.prepare(q, backend="interp").run([x, scale, zp])[0]
    _same(got, want, signed_zero=True)
    d = _model("DequantizeLinear", [("x", TensorProto.FLOAT8E5M2), ("s", TensorProto.FLOAT)], TensorProto.FLOAT)
    np.testing.assert_array_equal(MinicBackend.prepare(d, backend="interp").run([got, scale])[0],
                                  ReferenceEvaluator(d).run(None, {"x": got, "s": scale})[0])


def test_arithmetic_on_a_storage_type_is_refused_by_name():
    model = _model("Add", [("x", TensorProto.FLOAT8E4M3FN), ("z", TensorProto.FLOAT8E4M3FN)], TensorProto.FLOAT8E4M3FN)
    with pytest.raises(UnsupportedError, match="FLOAT8E4M3FN is a storage type"):
        MinicBackend.prepare(model, backend="interp")
