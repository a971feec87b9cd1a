"""ONNX's GridSample (2-D and volumetric): the attributes checked here, the sampling
composed by ``minic.frontend.compose.grid_sample`` (shared with torch's grid_sample)."""
from __future__ import annotations

from minic.frontend import compose
from minic.frontend.onnx_builder import Builder, OnnxImportError, converter_table
from minic.ir.graph import Value

CONVERTERS = converter_table()
converts = CONVERTERS.add


@converts("GridSample")
def _grid_sample(b: Builder, x: list[Value], a: dict) -> list[Value]:
    data, grid = x
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(a.get("mode", "linear"), a.get("mode", "linear"))
    padding = a.get("padding_mode", "zeros")
    if mode not in compose.GRID_TAPS or padding not in ("zeros", "border", "reflection"):
        raise OnnxImportError(f"{b.where}: mode '{mode}' / padding_mode '{padding}' is not ONNX's")
    return [compose.grid_sample(b, data, grid, mode, padding, a.get("align_corners", 0))]
