"""Checks of an ONNX node before its converter reads it: against ONNX's schema of its op, and
the attribute ranges the spec states in words (a wrong value would be read as something else).
The importer (onnx.py's _convert_nodes) runs them on every default-domain node."""
from __future__ import annotations

import math

from minic.frontend.onnx_builder import OnnxImportError


def check_schema(node, opset: int, where: str) -> None:
    """The node against ONNX's own schema of its op at this opset: input and
    output counts, required inputs and attributes, attribute types.  Converters
    can then read what the schema promises without guarding every access."""
    import onnx
    try:
        schema = onnx.defs.get_schema(node.op_type, opset)
    except (onnx.defs.SchemaError, TypeError):
        raise OnnxImportError(f"{where}: ONNX has no {node.op_type} at opset {opset}") from None
    for what, names, lo, hi in (("inputs", node.input, schema.min_input, schema.max_input),
                                ("outputs", node.output, schema.min_output, schema.max_output)):
        if not lo <= len(names) <= hi:
            raise OnnxImportError(f"{where}: has {len(names)} {what}; the schema allows {lo} to {hi}")
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    for name, param in zip(node.input, schema.inputs):
        if not name and param.option == single:
            raise OnnxImportError(f"{where}: required input '{param.name}' is missing")
    given = {a.name: a for a in node.attribute}
    for name, attr in schema.attributes.items():
        if attr.required and name not in given:
            raise OnnxImportError(f"{where}: required attribute '{name}' is missing")
    for name, a in given.items():
        if name not in schema.attributes:
            raise OnnxImportError(f"{where}: unknown attribute '{name}'")
        if a.type != schema.attributes[name].type:
            raise OnnxImportError(f"{where}: attribute '{name}' must be {schema.attributes[name].type.name}")


# Ops with a sliding window over the spatial axes (all after N and C) and the attributes that
# describe it: one entry per spatial axis (pads: two), each at least the given minimum.
WINDOW_OPS = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool", "MaxUnpool",
              "DeformConv"}
WINDOW_ATTRS = {"kernel_shape": (1, 1), "strides": (1, 1), "dilations": (1, 1), "pads": (2, 0),
                "output_padding": (1, 0), "output_shape": (1, 1)}


def check_window(node, spatial: int, where: str) -> None:
    """The window attributes of a conv or pool node against its input's spatial rank (the spec:
    one entry per spatial axis, kernel/strides/dilations >= 1, pads >= 0), before any converter
    reads them: a short list would be an IndexError, a zero stride a ZeroDivisionError."""
    from onnx import helper
    for a in node.attribute:
        if a.name not in WINDOW_ATTRS:
            continue
        per_axis, least = WINDOW_ATTRS[a.name]
        values = list(helper.get_attribute_value(a))
        if len(values) != per_axis * spatial:
            raise OnnxImportError(f"{where}: attribute '{a.name}' has {len(values)} entries; the input has "
                                  f"{spatial} spatial axes, so it needs {per_axis * spatial}")
        if any(v < least for v in values):
            raise OnnxImportError(f"{where}: attribute '{a.name}' is {values}; each entry must be >= {least}")


# The ops whose 'axis' attribute counts the axes of their output, one more than the input's
# (Flatten's also takes the end: axis = rank).  Every other 'axis' is an axis of input 0.
AXIS_OF_OUTPUT = {"OneHot", "Flatten"}


def check_axis(node, rank: int, where: str) -> None:
    """'axis' attributes in the range the spec gives, [-rank, rank - 1]: taken modulo the rank one
    would silently pick another axis (axis=1000 on a rank-3 input)."""
    if rank == 0:
        return
    for given in node.attribute:
        if given.name not in ("axis", "batch_axis", "time_axis") or given.type != given.INT:
            continue
        lo, hi = (-rank - 1, rank) if node.op_type in AXIS_OF_OUTPUT else (-rank, rank - 1)
        if node.op_type == "Flatten":
            lo, hi = -rank, rank
        if not lo <= given.i <= hi:
            raise OnnxImportError(f"{where}: attribute '{given.name}' is {given.i}; for an input of rank {rank} "
                                  f"it must lie in [{lo}, {hi}]")


# Int attributes that are flags in the spec ("whether ...", 0 or 1).  Any other value is refused:
# read as a bool it would silently mean 1, and ONNX Runtime reads some of them as == 1, others as != 0.
FLAGS = {"allowzero", "ceil_mode", "count_include_pad", "detect_negative", "detect_positive", "fmod", "inverse",
         "keepdims", "largest", "noop_with_empty_axes", "onesided", "saturate", "select_last_index", "sorted",
         "transA", "transB", "upper", "exclusive", "reverse", "interleaved", "new_axis", "is_causal",
         "linear_before_reset", "input_forget", "align_corners", "training_mode", "center_point_box", "layout",
         "antialias", "exclude_outside", "channels_last"}


# Numeric attributes whose range the spec states in words, where a value outside it would be
# read as something else (ONNX Runtime ignores a negative softcap; the spec's formula uses |softcap|.
# Attention scales Q and K by sqrt(scale); ONNX Runtime reads a NaN scale as "not given").
RANGES = {("Attention", "softcap"): (0, math.inf), ("Attention", "qk_matmul_output_mode"): (0, 3),
          ("Celu", "alpha"): (math.ulp(0), math.inf), ("Scan", "num_scan_inputs"): (1, math.inf),
          ("Attention", "scale"): (0, math.inf),
          ("LpPool", "p"): (1, math.inf), ("LpNormalization", "p"): (1, 2), ("LRN", "size"): (1, math.inf),
          ("RoiAlign", "output_height"): (1, math.inf), ("RoiAlign", "output_width"): (1, math.inf),
          ("RoiAlign", "sampling_ratio"): (0, math.inf)}


def check_flags(node, where: str) -> None:
    """Flag attributes 0 or 1, and the attributes of RANGES within theirs (finite, not NaN)."""
    from onnx import helper
    for a in node.attribute:
        if a.name in FLAGS and a.type == a.INT and a.i not in (0, 1):
            raise OnnxImportError(f"{where}: attribute '{a.name}' is {a.i}; it is a flag, 0 or 1")
        if (node.op_type, a.name) in RANGES:
            lo, hi = RANGES[node.op_type, a.name]
            value = helper.get_attribute_value(a)
            if not all(math.isfinite(v) and lo <= v <= hi for v in (value if isinstance(value, list) else [value])):
                shown = f"[{lo}, {hi}]" if hi != math.inf else f">= {lo:g}" if lo != math.ulp(0) else "> 0"
                raise OnnxImportError(f"{where}: attribute '{a.name}' is {value}; it must be finite and {shown}")
