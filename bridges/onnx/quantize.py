"""The seed's extension: INT8 quantization in QDQ form with ONNX Runtime.

Static quantization needs *calibration*: run the float model on representative
inputs, record each activation's range, and pick a scale and zero point per
tensor.  Our representative inputs are windows of the shipped English text.

QDQ format keeps every float op and brackets it with QuantizeLinear ->
DequantizeLinear pairs; ONNX Runtime then fuses DQ -> op -> Q into integer
kernels where it has them (MatMul -> MatMulInteger / QLinearMatMul).
INT8 does not meet the fp32 tolerance of 1e-4: the error is reported, and
tested against a looser bound.
"""
from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import numpy as np
import onnx

from minic.errors import UserError
from bridges.onnx.inputs import byte_tokens, load_text


def text_calibration(input_name: str, batches: int = 16, seq: int = 32,
                     seed: int = 1) -> list[dict[str, np.ndarray]]:
    """Feeds of one text window each, for the calibration reader."""
    rng = np.random.default_rng(seed)
    tokens = byte_tokens(load_text())
    starts = rng.integers(0, len(tokens) - seq, size=batches)
    return [{input_name: tokens[s:s + seq][None, :]} for s in starts]


def feed_reader(feeds: list[dict[str, np.ndarray]]):
    """ONNX Runtime's calibration reader over ``feeds`` (each read once, in order)."""
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(feeds)

        def get_next(self):
            return next(self.feeds, None)

    return Reader()


def quantize_int8(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]],
                  per_channel: bool = False) -> onnx.ModelProto:
    """INT8 QDQ copy of ``model``, calibrated (min-max) on ``feeds``.

    Only MatMul, the ops that dominate the time, are quantized; quantizing the
    norms and softmax too loses accuracy for little speed.
    """
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory() as tmp:
        fp32, prepared, int8 = (Path(tmp) / n for n in ("fp32.onnx", "pre.onnx", "int8.onnx"))
        onnx.save(model, str(fp32))
        # ORT's recommended pre-processing: symbolic shape inference + its own cleanup.
        # Run from the temporary folder: when symbolic inference is incomplete, ORT
        # saves a debugging copy of the model into the *current* directory
        # (docs/production-bugs.md#ort-shape-inference-writes-into-cwd).
        with contextlib.chdir(tmp):
            try:
                quant_pre_process(str(fp32), str(prepared), skip_symbolic_shape=False, auto_merge=True)
            except Exception as e:  # ORT raises a bare Exception here
                raise UserError(f"INT8 quantization: ONNX Runtime's pre-processing failed: {e}") from None
        quantize_static(str(prepared), str(int8), feed_reader(feeds), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                        op_types_to_quantize=["MatMul"], per_channel=per_channel,
                        calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"ActivationSymmetric": True})
        return onnx.load(str(int8))
