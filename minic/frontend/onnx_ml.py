"""The ops of ONNX's ``ai.onnx.ml`` domain that are tensor arithmetic (the classic
scikit-learn converters' vocabulary), composed from minic's ops:

- ``Binarizer``: ``x > threshold`` as 1 or 0, in x's type.
- ``ArrayFeatureExtractor``: the columns ``y`` of x's last axis (a 1-D x is one row).

The rest of the domain (label encoders over strings, tree ensembles, SVMs) is refused by name.
"""
from __future__ import annotations

from minic.frontend.onnx_builder import Builder, OnnxImportError
from minic.ir.graph import Value
from minic.ir.types import DType, dim_prod

DOMAIN = "ai.onnx.ml"


def _binarizer(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v = x[0]
    above = b.one("gt", v, b.const(a.get("threshold", 0.0), like=v))
    return [b.one("where", above, b.const(1, like=v), b.const(0, like=v))]


def _array_feature_extractor(b: Builder, x: list[Value], a: dict) -> list[Value]:
    v, columns = x
    if columns.type.dtype != DType.i64:
        raise OnnxImportError(f"{b.where}: the indices must be int64, got {columns.type.dtype.value}")
    if v.type.rank == 1:
        v = b.one("reshape", v, shape=(1, v.type.shape[0]))
    flat = b.one("reshape", columns, shape=(dim_prod(columns.type.shape),)) if columns.type.rank != 1 else columns
    return [b.one("gather", v, flat, axis=v.type.rank - 1)]


ML = {"Binarizer": _binarizer, "ArrayFeatureExtractor": _array_feature_extractor}
