"""QDQ models written by ONNX Runtime's own quantizer (``quantize_static``, QDQ format) from
small torch MLPs and a small CNN (also ``quantize_dynamic``'s ConvInteger), for tests/int8:
calibrated (min-max) on seeded random batches."""
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


CNN_SHAPE = (2, 3, 16, 16)


def quantized_cnn(folder: Path, mode: str) -> tuple[Path, Path]:
    """(the f32 file, the quantized file) of a small torch CNN: conv 3x3 (3 -> 16, padding 1), ReLU,
    conv 3x3 stride 2 (16 -> 32), ReLU, max pool, a depthwise conv 3x3 (32 groups), ReLU, a 1x1
    conv (32 -> 32), ReLU, global average pool, Linear(32, 10).  ``mode``: "per-tensor" or
    "per-channel" (``quantize_static``, QDQ, u8 activations, s8 weights), or "dynamic"
    (``quantize_dynamic``: DynamicQuantizeLinear + ConvInteger, s8 weights)."""
    import logging

    import torch
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)

    torch.manual_seed(0)
    nn = torch.nn
    cnn = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, stride=2, padding=1),
                        nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 32, 3, padding=1, groups=32), nn.ReLU(),
                        nn.Conv2d(32, 32, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(32, 10)).eval()
    f32, out = folder / "cnn.onnx", folder / f"cnn_{mode}.onnx"
    if not f32.exists():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.onnx.export(cnn, (torch.randn(*CNN_SHAPE),), str(f32), input_names=["x"], dynamo=False,
                              opset_version=17)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(calibration(CNN_SHAPE))

        def get_next(self):
            return next(self.feeds, None)

    logging.disable(logging.WARNING)              # the quantizer's advice to pre-process first
    try:
        if mode == "dynamic":
            quantize_dynamic(str(f32), str(out), weight_type=QuantType.QInt8)
        else:
            quantize_static(str(f32), str(out), Reader(), quant_format=QuantFormat.QDQ,
                            per_channel=mode == "per-channel", activation_type=QuantType.QUInt8,
                            weight_type=QuantType.QInt8)
    finally:
        logging.disable(logging.NOTSET)
    return f32, out
