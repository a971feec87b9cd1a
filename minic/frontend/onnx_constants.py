"""Converters of ONNX's constants and shape ops: values the import computes (Constant,
ConstantOfShape, Range: arrays made now, each size checked before it is allocated) and the
shape of a value (Shape: a ``shape`` node, folded where the dims are static; Size: a constant)."""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UnsupportedError, UserError
from minic.frontend.onnx_builder import Builder, OnnxImportError, converter_table, ints
from minic.ir.graph import Value
from minic.ir.ops.layout import END
from minic.limits import ensure_array_fits

CONVERTERS = converter_table()
converts = CONVERTERS.add

@converts("Constant")
def _constant(b: Builder, x: list[Value], a: dict) -> list[Value]:
    if "value" in a:
        return [b.const(a["value"])]
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32),
                       ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return [b.const(np.asarray(a[key], dtype=dtype))]
    raise UnsupportedError(f"{b.where}: constant attribute {sorted(a)} is not supported")


@converts("ConstantOfShape")
def _constant_of_shape(b: Builder, x: list[Value], a: dict) -> list[Value]:
    fill = np.asarray(a.get("value", np.zeros(1, np.float32))).reshape(-1)[:1]
    if fill.size != 1:
        raise OnnxImportError(f"{b.where}: attribute 'value' must hold one element, got {a['value'].size}")
    if b.known(x[0]) is None:          # read off symbolic dims (an RNN's zero state over a batch B): an expand
        dims = b.entries(x[0], "the shape")
        return [b.one("expand", b.const(fill.reshape(())), shape=dims)]
    shape = ints(b.need_known(x[0], "the shape"))
    if min(shape, default=0) < 0:
        raise OnnxImportError(f"{b.where}: the shape {list(shape)} has a negative dim")
    ensure_array_fits(shape, fill.dtype, f"{b.where}: the constant ConstantOfShape makes")
    return [b.const(np.full(shape, fill[0], dtype=fill.dtype))]


@converts("Range")
def _range(b: Builder, x: list[Value], a: dict) -> list[Value]:
    bounds = [b.need_known(v, "range bounds") for v in x]
    if any(np.size(v) != 1 for v in bounds):
        raise OnnxImportError(f"{b.where}: Range takes scalars, got shapes {[list(np.shape(v)) for v in bounds]}")
    start, limit, delta = (np.asarray(v).reshape(()) for v in bounds)     # a 1-element array counts, as in numpy
    if not all(np.isfinite(v) for v in (start, limit, delta)):
        raise OnnxImportError(f"{b.where}: Range needs finite start, limit and delta, got {start}, {limit}, {delta}")
    if delta == 0:
        raise UserError(f"{b.where}: Range with delta 0 never reaches its limit")
    ensure_array_fits((max(0, math.ceil((limit - start) / delta)),), start.dtype, f"{b.where}: the constant Range makes")
    return [b.const(np.arange(start, limit, delta).astype(start.dtype))]


@converts("Shape")
def _shape(b: Builder, x: list[Value], a: dict) -> list[Value]:
    out = b.one("shape", x[0])
    start, end = a.get("start", 0), a.get("end", END)
    if (start, end) != (0, END):
        out = b.one("slice", out, axes=(0,), starts=(start,), ends=(min(end, END),), steps=(1,))
    return [out]


@converts("Size")
def _size(b: Builder, x: list[Value], a: dict) -> list[Value]:
    shape = x[0].type.shape
    if not all(isinstance(d, int) for d in shape):
        raise UnsupportedError(f"{b.where}: the shape of {x[0].type} is not static")
    return [b.const(np.asarray(int(np.prod(shape)), np.int64))]
