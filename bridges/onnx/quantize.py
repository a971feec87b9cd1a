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

from minic.backends import ModelSource
from minic.errors import UserError
from minic.inputs import calibration_inputs
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
                  per_channel: bool = False, op_types: tuple[str, ...] = ("MatMul",),
                  unsigned_activations: bool = False) -> onnx.ModelProto:
    """INT8 QDQ copy of ``model``, calibrated (min-max) on ``feeds``.

    By default only MatMul, the ops that dominate a transformer's time, is quantized,
    with symmetric s8 activations (the QNN leg's recipe); quantizing the norms and
    softmax too loses accuracy for little speed.  ``unsigned_activations``: u8
    activations with a zero point from the calibrated range, the pair x86's VNNI
    multiplies (u8 x s8) and ONNX Runtime's own default on x86.
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
                        activation_type=QuantType.QUInt8 if unsigned_activations else QuantType.QInt8,
                        weight_type=QuantType.QInt8, op_types_to_quantize=list(op_types),
                        per_channel=per_channel, calibrate_method=CalibrationMethod.MinMax,
                        extra_options={"ActivationSymmetric": not unsigned_activations})
        return onnx.load(str(int8))


def quantize_dynamic_int8(model: onnx.ModelProto) -> onnx.ModelProto:
    """``quantize_dynamic``'s copy of ``model`` (its defaults: s8 weights, per tensor): the
    activations are quantized at run time (DynamicQuantizeLinear), the matmuls and convs
    become MatMulInteger and ConvInteger.  No calibration."""
    from onnxruntime.quantization import quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        fp32, int8 = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        onnx.save(model, str(fp32))
        with contextlib.chdir(tmp):
            quantize_dynamic(str(fp32), str(int8))
        return onnx.load(str(int8))


# The precisions that change the model rather than an engine's option (the ``minic.recipes``
# entry points, ``minic.backends.recipe``): every engine that reads ONNX runs the same file.

def static_int8(source: ModelSource, seed: int = 0) -> ModelSource:
    """``source`` quantized statically in QDQ format: every MatMul, Gemm and Conv, u8
    activations calibrated (min-max) on the example inputs and seeded random ones, s8
    weights per output channel."""
    from bridges.onnx.backend import model_input_names, to_onnx

    model = to_onnx(source)
    names = model_input_names(source, model)
    used = {i.name for i in model.graph.input}
    feeds = [{n: x for n, x in zip(names, inputs) if n in used}
             for inputs in calibration_inputs(source.example_inputs, seed)]
    return _saved(source, "int8", names, quantize_int8(model, feeds, per_channel=True,
                                                         op_types=("MatMul", "Gemm", "Conv"),
                                                         unsigned_activations=True))


def dynamic_int8(source: ModelSource, seed: int = 0) -> ModelSource:
    """``source`` quantized by ``quantize_dynamic`` (``seed`` unused: nothing is calibrated)."""
    from bridges.onnx.backend import model_input_names, to_onnx

    model = to_onnx(source)
    return _saved(source, "int8-dynamic", model_input_names(source, model), quantize_dynamic_int8(model))


def _saved(source: ModelSource, recipe: str, names: tuple[str, ...], quantized: onnx.ModelProto) -> ModelSource:
    """The quantized model as a file source; the file lives as long as the source."""
    folder = tempfile.TemporaryDirectory(prefix="minic-int8-")
    path = Path(folder.name) / f"{source.name}-{recipe}.onnx"
    onnx.save(quantized, str(path))
    return ModelSource(f"{source.name}-{recipe}", source.example_inputs, onnx_path=path,
                       dynamic_axes=source.dynamic_axes, input_names=names, extra={"folder": folder})
