"""QDQ models written by ONNX Runtime's own quantizer (``quantize_static``, QDQ format) from
small torch MLPs, for tests/int8: calibrated (min-max) on seeded random batches."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np


def calibration(shape: tuple[int, ...], batches: int = 8, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(shape).astype(np.float32)} for _ in range(batches)]


def qdq_mlp(folder: Path, shape: tuple[int, ...], activations: str = "QUInt8", per_channel: bool = False) -> Path:
    """Linear(64, 128), ReLU, Linear(128, 32) on ``x`` of ``shape`` (last axis 64), exported by
    torch (a 2-D x makes Gemm nodes, a 3-D one MatMul + Add), quantized by ONNX Runtime: weights
    QInt8 (symmetric, zero point 0), activations ``activations`` (QUInt8: u8, the operand
    vpdpbusd takes; QInt8: s8, which minic feeds as x + 128)."""
    import torch
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32)).eval()
    name = f"mlp_{len(shape)}d_{activations}{'_pc' if per_channel else ''}"
    f32, qdq = folder / f"{name}.onnx", folder / f"{name}_qdq.onnx"
    with warnings.catch_warnings():                 # the TorchScript exporter says it is deprecated
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.onnx.export(mlp, (torch.randn(*shape),), str(f32), input_names=["x"], dynamo=False, opset_version=17)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(calibration(shape))

        def get_next(self):
            return next(self.feeds, None)

    quantize_static(str(f32), str(qdq), Reader(), quant_format=QuantFormat.QDQ, per_channel=per_channel,
                    activation_type=getattr(QuantType, activations), weight_type=QuantType.QInt8)
    return qdq
