"""From a float ONNX model to the graph the HTP gets, for one set of input shapes.

The HTP compiles static graphs (a QNN context binary is made for fixed shapes),
so every dynamic axis is fixed first; then the ONNX bridge's homemade passes
fold the shape chains that have become constant, the QNN rewrites run
(``rewrites.py``), and, for a QDQ mode, the model is quantized the way the QNN
EP documents it:

    qnn_preprocess_model  (fuses Erf-GELU into Gelu, LayerNorm patterns, ...)
    -> get_qnn_qdq_config (which tensors get Q/DQ, their types, QNN's overrides)
    -> quantize           (calibrates min-max ranges on the feeds)

Calibration feeds: the model's own example inputs plus ``calibration`` seeded
random ones of the same shapes, drawn like the examples (floats with their
mean and spread, integers within their range: token ids stay in the vocabulary
the examples use).
"""
from __future__ import annotations

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from minic.errors import UserError

# mode -> (activation type, weight type) defaults; "fp16" runs the fp32 graph as fp16.
MODES: dict[str, tuple[str, str] | None] = {"fp16": None, "int8": ("uint8", "uint8"),
                                            "int16": ("uint16", "uint8")}
QUANT_TYPES = ("uint8", "int8", "uint16", "int16")


@dataclass(frozen=True)
class QnnConfig:
    """How a model is prepared for and run on the HTP."""

    mode: str = "fp16"
    activation_type: str | None = None      # QDQ only; default from MODES
    weight_type: str | None = None
    fallback: bool = True                   # CPU fallback for nodes QNN cannot take
    io_quant: str = "htp"                   # where graph-input Q / graph-output DQ run
    rewrites: bool = True                   # the QNN rewrites of rewrites.py
    calibration: int = 8                    # random calibration inputs beside the examples
    calibration_seed: int = 0
    per_channel: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UserError(f"qnn mode must be one of {', '.join(MODES)}, not '{self.mode}'")
        for label, value in (("activation_type", self.activation_type), ("weight_type", self.weight_type)):
            if value is not None and value not in QUANT_TYPES:
                raise UserError(f"qnn {label} must be one of {', '.join(QUANT_TYPES)}, not '{value}'")
            if value is not None and self.mode == "fp16":
                raise UserError(f"qnn {label} applies to the QDQ modes (int8, int16), not fp16")
        if self.calibration < 0:
            raise UserError(f"qnn calibration must be >= 0, not {self.calibration}")

    @property
    def family(self) -> str:
        return "fp16" if self.mode == "fp16" else "qdq"

    @property
    def types(self) -> tuple[str, str]:
        default = MODES[self.mode] or ("", "")
        return (self.activation_type or default[0], self.weight_type or default[1])

    def label(self) -> str:
        if self.family == "fp16":
            return "fp16"
        act, weight = self.types
        return f"{self.mode} (a:{act} w:{weight})"


@dataclass
class Prepared:
    """The graph the HTP session gets, and what was done to make it."""

    model: onnx.ModelProto
    shapes: dict[str, tuple[int, ...]]
    rewrites: dict[str, int] = field(default_factory=dict)
    preprocessed: bool = False              # qnn_preprocess_model changed the graph


def fix_shapes(model: onnx.ModelProto, shapes: dict[str, tuple[int, ...]]) -> onnx.ModelProto:
    """A copy with each named input fixed to its shape (dim_params fixed graph-wide)."""
    from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

    from bridges.onnx.graph_tools import copy_model

    out = copy_model(model)
    for name, shape in shapes.items():
        try:
            make_input_shape_fixed(out.graph, name, list(shape))
        except ValueError as e:
            raise UserError(f"input '{name}': shape {list(shape)} does not fit the model ({e})") from None
    return out


def name_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every unnamed node a name (``Op_index``): placement is reported by name."""
    taken = {n.name for n in model.graph.node}
    for i, node in enumerate(model.graph.node):
        if not node.name:
            node.name = f"{node.op_type}_{i}"
            while node.name in taken:
                node.name += "_"
            taken.add(node.name)
    return model


def fix_output_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Write the inferred static shapes into the graph outputs (QNN wants them)."""
    from onnxruntime.tools.onnx_model_utils import fix_output_shapes as ort_fix

    ort_fix(model)
    return model


def random_like(example: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One random array shaped and drawn like ``example``."""
    if np.issubdtype(example.dtype, np.integer):
        return rng.integers(int(example.min()), int(example.max()) + 1,
                            size=example.shape).astype(example.dtype)
    if example.dtype == np.bool_:
        return rng.integers(0, 2, size=example.shape).astype(np.bool_)
    spread = float(example.std()) or 1.0
    return (rng.standard_normal(example.shape) * spread + float(example.mean())).astype(example.dtype)


def calibration_feeds(names: tuple[str, ...], examples: tuple[np.ndarray, ...], count: int,
                      seed: int, include_examples: bool = True) -> list[dict[str, np.ndarray]]:
    """The examples (unless told not to), then seeded random feeds drawn like them
    (``count`` of them; one more when the examples are left out)."""
    rng = np.random.default_rng(seed)
    feeds = [dict(zip(names, examples))] if include_examples else []
    for _ in range(count + (0 if include_examples else 1)):
        feeds.append({n: random_like(x, rng) for n, x in zip(names, examples)})
    return feeds


_DROPPED = ("pre-processing",             # advised even after qnn_preprocess_model ran
            "does not support 16-bit integer quantization natively")   # it then moves to opset 21


@contextlib.contextmanager
def _quiet_root_logger():
    """ORT's quantizer warns through the root logger; two notes that do not
    apply (or are expected: 16-bit Q/DQ needs opset 21, which ORT converts the
    model to) are dropped here."""
    import logging

    def drop(record: logging.LogRecord) -> bool:
        return not any(text in record.getMessage() for text in _DROPPED)

    root = logging.getLogger()
    root.addFilter(drop)
    try:
        yield
    finally:
        root.removeFilter(drop)


def quantize_qdq(model: onnx.ModelProto, feeds: list[dict[str, np.ndarray]],
                 config: QnnConfig) -> tuple[onnx.ModelProto, bool]:
    """The QNN QDQ model of ``model`` (preprocess -> QNN QDQ config -> quantize)."""
    from onnxruntime.quantization import QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import (get_qnn_qdq_config,
                                                                  qnn_preprocess_model)

    from bridges.onnx.quantize import feed_reader

    quant_types = {"uint8": QuantType.QUInt8, "int8": QuantType.QInt8,
                   "uint16": QuantType.QUInt16, "int16": QuantType.QInt16}
    act, weight = config.types
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        # From the temporary folder: ORT's shape inference saves debugging copies into
        # the current directory (docs/production-bugs.md#ort-shape-inference-writes-into-cwd).
        fp32, pre, qdq = (Path(tmp) / n for n in ("fp32.onnx", "pre.onnx", "qdq.onnx"))
        onnx.save(model, str(fp32))
        changed = bool(qnn_preprocess_model(str(fp32), str(pre)))
        source = pre if changed else fp32
        try:
            with _quiet_root_logger():
                qconfig = get_qnn_qdq_config(str(source), feed_reader(feeds),
                                             activation_type=quant_types[act],
                                             weight_type=quant_types[weight],
                                             per_channel=config.per_channel)
                quantize(str(source), str(qdq), qconfig)
        except ValueError as e:    # e.g. "doesn't support data format: activation_type=..."
            raise UserError(f"QDQ quantization ({act} activations, {weight} weights): {e}") from None
        return onnx.load(str(qdq)), changed


def prepare(model: onnx.ModelProto, names: tuple[str, ...], inputs: tuple[np.ndarray, ...],
            config: QnnConfig, calibrate_on: tuple[np.ndarray, ...] | None = None) -> Prepared:
    """The HTP graph of float ``model`` for the shapes of ``inputs``.

    ``calibrate_on``: the model's example inputs, calibrated on (with random ones)
    when their shapes are those of ``inputs``; else the feeds are random ones drawn
    like ``inputs``.
    """
    from bridges.onnx.optimize import homemade
    from bridges.qnn import rewrites

    graph_inputs = {i.name for i in model.graph.input}
    shapes = {n: tuple(x.shape) for n, x in zip(names, inputs) if n in graph_inputs}
    fixed, _ = homemade(name_nodes(fix_shapes(model, shapes)))
    log: dict[str, int] = {}
    if config.rewrites:
        fixed, log = rewrites.apply(fixed, config.family)
    fixed = fix_output_shapes(fixed)
    if config.family == "fp16":
        return Prepared(fixed, shapes, log)
    used = tuple(n for n in names if n in graph_inputs)
    same = calibrate_on is not None and all(tuple(x.shape) == tuple(y.shape)
                                            for x, y in zip(calibrate_on, inputs))
    # Other shapes than the examples': random feeds drawn like the inputs, never the inputs.
    by_name = dict(zip(names, calibrate_on if same else inputs))
    feeds = calibration_feeds(used, tuple(by_name[n] for n in used), config.calibration,
                              config.calibration_seed, include_examples=same)
    qdq, changed = quantize_qdq(fixed, feeds, config)
    return Prepared(qdq, shapes, log, changed)
