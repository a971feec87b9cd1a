"""ONNX's quantization ops, composed from minic's ops at import.

``DequantizeLinear``: ``y = (x - zero_point) · scale``; ``QuantizeLinear``:
``y = saturate(round_half_even(x / scale) + zero_point)``; the scale and zero
point are a scalar, one per slice along ``axis``, or one per ``block_size``
elements along it (blocked).  The integer contractions (``MatMulInteger``,
``ConvInteger``, ``QLinearMatMul``, ``QLinearConv``) run as minic's float
matmul and conv2d on the zero-point-shifted integers: exact while every sum
stays below 2^24 in magnitude (an 8-bit K-sum does up to K = 258); then the
result is cast (integer outputs) or requantized.  The pass
``fake-quantization-to-integer`` puts them on integers (``matmul_integer``,
``conv2d_integer``: exact i32 sums; docs/int8.md).
"""
from __future__ import annotations

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import onnx_windows
from minic.frontend.onnx_builder import ONNX_DTYPES, Builder, converter_table, optional
from minic.frontend.onnx_storage import STORAGE, Storage, narrow, widen
from minic.ir.graph import Value
from minic.ir.types import DType

CONVERTERS = converter_table()
converts = CONVERTERS.add


def _per_element(b: Builder, p: Value, x: Value, axis: int, block: int) -> Value:
    """A scale or zero point brought to broadcast against ``x``."""
    rank = x.type.rank
    if p.type.rank == 0 or (p.type.rank == 1 and p.type.shape[0] == 1 and block == 0 and rank != 1):
        return p
    axis %= rank
    if block == 0:                                  # per axis: one value per slice along axis
        shape = [1] * rank
        shape[axis] = p.type.shape[0]
        return b.one("reshape", p, shape=tuple(shape))
    n = x.type.shape[axis]                          # blocked: each value covers `block` elements along axis
    grown = list(p.type.shape)
    grown.insert(axis + 1, block)
    lifted = b.one("expand", b.one("unsqueeze", p, axes=(axis + 1,)), shape=tuple(grown))
    merged = list(p.type.shape)
    merged[axis] = p.type.shape[axis] * block
    out = b.one("reshape", lifted, shape=tuple(merged))
    if merged[axis] != n:
        out = b.one("slice", out, axes=(axis,), starts=(0,), ends=(n,), steps=(1,))
    return out


def dequantize(b: Builder, x: Value, scale: Value, zp: Value | None, axis: int = 1, block: int = 0,
               dtype: DType | None = None) -> Value:
    dtype = dtype or scale.type.dtype
    compute = DType.f32 if dtype.is_storage_float else dtype
    y = b.cast(x, compute)
    if zp is not None:
        y = b.one("sub", y, _per_element(b, b.cast(zp, compute), x, axis, block))
    y = b.one("mul", y, _per_element(b, b.cast(scale, compute), x, axis, block))
    return b.cast(y, dtype)


def quantize(b: Builder, x: Value, scale: Value, zp: Value | None, out: DType | Storage, axis: int = 1,
             block: int = 0, saturate: bool = True) -> Value:
    """``out`` an integer type, or a storage type (its carrier comes back): f8/f4 round
    ``x / scale + zero_point`` to nearest as a cast does, integers round then clip."""
    stored = out if isinstance(out, Storage) else None
    if stored is None and not out.is_int:
        raise UnsupportedError(f"{b.where}: quantizing to {out.value} is not supported")
    compute = DType.f32 if not x.type.dtype.is_float or x.type.dtype.is_storage_float else x.type.dtype
    q = b.one("div", b.cast(x, compute), _per_element(b, b.cast(scale, compute), x, axis, block))
    if stored is None or not stored.is_float:
        q = b.one("round", q)
    if zp is not None:
        q = b.one("add", q, _per_element(b, b.cast(zp, compute), x, axis, block))
    if stored is not None and stored.is_float:
        return narrow(b, q, stored, saturate)
    lo, hi = (stored.lo, stored.hi) if stored is not None else (np.iinfo(out.numpy).min, np.iinfo(out.numpy).max)
    q = b.one("min", b.one("max", q, b.const(lo, like=q)), b.const(hi, like=q))
    return b.one("cast", q, dtype=stored.carrier if stored is not None else out)


def _dtype_attr(b: Builder, a: dict, name: str = "output_dtype") -> DType | None:
    code = a.get(name, 0)
    if not code:
        return None
    if code not in ONNX_DTYPES:
        raise UnsupportedError(f"{b.where}: element type {code} is not supported")
    return ONNX_DTYPES[code]


@converts("DequantizeLinear")
def _dequantize(b: Builder, x: list[Value], a: dict) -> list[Value]:
    zp = optional(x, 2)
    v, zp = (_widened(b, u) for u in (x[0], zp))
    return [dequantize(b, v, x[1], zp, a.get("axis", 1), a.get("block_size", 0), _dtype_attr(b, a))]


def _widened(b: Builder, v: Value | None) -> Value | None:
    """A storage-typed (f8, int4, ...) value as f32; any other as it is."""
    st = b.storage.get(v) if v is not None else None
    return v if st is None else widen(b, v, st, DType.f32)


@converts("QuantizeLinear")
def _quantize(b: Builder, x: list[Value], a: dict) -> list[Value]:
    zp = optional(x, 2)
    code = a.get("output_dtype", 0)
    out = (b.storage.get(zp) or zp.type.dtype if zp is not None else
           STORAGE[code] if code in STORAGE else _dtype_attr(b, a) or DType.u8)
    y = quantize(b, x[0], x[1], _widened(b, zp), out, a.get("axis", 1), a.get("block_size", 0),
                 bool(a.get("saturate", 1)))
    if isinstance(out, Storage):
        b.storage[y] = out
    return [y]


def _shifted(b: Builder, v: Value, zp: Value | None, axis: int | None = None) -> Value:
    """An integer operand minus its zero point, in f32 (exact for 8- and 16-bit integers)."""
    f = b.cast(v, DType.f32)
    if zp is None:
        return f
    z = b.cast(zp, DType.f32)
    if axis is not None and z.type.rank == 1 and z.type.shape[0] != 1:
        shape = [1] * v.type.rank
        shape[axis % v.type.rank] = z.type.shape[0]
        z = b.one("reshape", z, shape=tuple(shape))
    return b.one("sub", f, z)


@converts("MatMulInteger")
def _matmul_integer(b: Builder, x: list[Value], a: dict) -> list[Value]:
    x = x + [None] * (4 - len(x))
    # a's zero point is per row (axis 0 of a 2-D a), b's per column (the last axis)
    product = b.one("matmul", _shifted(b, x[0], x[2], -2 if x[0].type.rank > 1 else None), _shifted(b, x[1], x[3], -1))
    return [b.one("cast", product, dtype=DType.i32)]


@converts("QLinearMatMul")
def _qlinear_matmul(b: Builder, x: list[Value], a: dict) -> list[Value]:
    av, a_scale, a_zp, bv, b_scale, b_zp, y_scale, y_zp = x
    left = dequantize(b, av, a_scale, a_zp, axis=-2 if av.type.rank > 1 else 0, dtype=DType.f32)
    right = dequantize(b, bv, b_scale, b_zp, axis=-1, dtype=DType.f32)
    y = b.one("matmul", left, right)
    return [quantize(b, y, y_scale, y_zp, y_zp.type.dtype if y_zp is not None else DType.u8, axis=-1)]


@converts("ConvInteger")
def _conv_integer(b: Builder, x: list[Value], a: dict) -> list[Value]:
    x = x + [None] * (4 - len(x))
    conv = onnx_windows.CONVERTERS["Conv"]
    inputs = [_shifted(b, x[0], x[2]), _shifted(b, x[1], x[3], 0)]
    return [b.one("cast", conv(b, inputs, a)[0], dtype=DType.i32)]


@converts("QLinearConv")
def _qlinear_conv(b: Builder, x: list[Value], a: dict) -> list[Value]:
    xv, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp = x[:8]
    bias = optional(x, 8)
    left = dequantize(b, xv, x_scale, x_zp, dtype=DType.f32)
    weight = dequantize(b, w, w_scale, w_zp, axis=0, dtype=DType.f32)
    inputs = [left, weight]
    if bias is not None:          # an i32 bias in units of x_scale · w_scale (a scalar, or one per output channel)
        inputs.append(b.one("mul", b.cast(bias, DType.f32),
                            b.one("mul", b.cast(x_scale, DType.f32), b.cast(w_scale, DType.f32))))
    y = onnx_windows.CONVERTERS["Conv"](b, inputs, a)[0]
    return [quantize(b, y, y_scale, y_zp, y_zp.type.dtype if y_zp is not None else DType.u8)]
