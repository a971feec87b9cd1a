"""The ONNX backend node tests (shipped in the onnx wheel) run against minic.

Every test case whose ops are all in ALLOWLIST runs on the compiled minic path
and on the interpreter; it must match ONNX's expected outputs with the case's
own tolerances.  A case matching one of EXCLUDED must instead be refused with a
clear minic.UserError — never a crash and never a wrong number.  Grow ALLOWLIST
as minic learns ops.
"""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from minic.errors import UserError
from minic.frontend.onnx_backend import MinicBackend

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.case.node import collect_testcases
    CASES = collect_testcases(None)

ALLOWLIST = {
    "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat",
    "ConstantOfShape", "Conv", "Cos", "Div", "Dropout", "Elu", "Equal", "Erf", "Exp", "Expand", "Flatten",
    "Floor", "Gather", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool", "Greater", "GreaterOrEqual",
    "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log",
    "LogSoftmax", "MatMul", "Max", "MaxPool", "Mean", "Min", "Mish", "Mul", "Neg", "PRelu", "Pad", "Pow",
    "Range", "Reciprocal", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
    "ReduceMean", "ReduceMin", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Round", "Selu", "Shape",
    "Sigmoid", "Sign", "Sin", "Size", "Slice", "Softmax", "Softplus", "Softsign", "Split", "Sqrt", "Squeeze",
    "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Tile", "Transpose", "Unsqueeze", "Where",
    "And", "Or", "Xor", "Not", "LayerNormalization",
}

# Integer pow runs in the interpreter; the compiler has no integer pow (only
# float pow, via LLVM's intrinsic).
COMPILER_ONLY_EXCLUSIONS = [(r"test_pow_types_int(32|64)_(int|float)", "integer pow is not compiled")]

# (pattern on the case name, the one-line reason minic refuses it)
EXCLUDED = [
    (r"_u?int(8|16)\b|_u?int(8|16)_|uint(32|64)|_int4|_uint4|_int2|_uint2", "integer types minic lacks (i8/i16/u*)"),
    (r"float64|_double|bfloat16|FLOAT8|FLOAT4|_string", "element types minic lacks (f64, bf16, f8, f4, string)"),
    (r"pool_(1d|3d)|pool_3d", "only 2-D (NCHW) pooling windows"),
    (r"causal_conv_with_state", "only 2-D (NCHW) convolutions"),
    (r"training_mode|training_dropout|dropout_default_mask|dropout_default_mask_ratio", "training-mode ops (inference only)"),
    (r"maxpool_with_argmax", "MaxPool's Indices output"),
    (r"center_crop_pad|flexattention_relative_positional|rotary_embedding|rms_normalization_4d_axis0",
     "shapes or split sizes computed from data at run time"),
    (r"(blackman|hamming|hann)window|rms_normalization.*_expanded|flexattention_causal_mask",
     "ranges whose bounds are computed at run time"),
    (r"test_cast_|test_castlike_", "Cast cases feed string-encoded data or types minic lacks"),
    (r"reduce_log_sum_exp_(do_not|keepdims|default|negative|empty_set_expanded)", "the cases use float64"),
    (r"test_(constant|wrap)_pad", "a pad value fed at run time, or the wrap mode"),
    (r"test_range_float", "float ranges computed at run time"),
    (r"reduce_m(ax|in)_.*bool", "reductions over bool"),
    (r"identity_(sequence|opt)", "sequence and optional types"),
    (r"layer_normalization", "LayerNormalization's Mean/InvStdDev outputs"),
    (r"test_(xor|and|or|not)", "opset 7 models (minic reads opsets 9-28)"),
]


def _ops(case) -> set[str]:
    return {n.op_type for n in case.model.graph.node} - {"Constant"}


def _excluded(name: str, backend: str = "interp") -> str | None:
    rules = EXCLUDED + (COMPILER_ONLY_EXCLUSIONS if backend == "minic" else [])
    return next((reason for pattern, reason in rules if re.search(pattern, name)), None)


IN_SCOPE = [c for c in CASES if c.model is not None and _ops(c) and _ops(c) <= ALLOWLIST]


def test_allowlist_is_large_enough():
    passing_types = {op for c in IN_SCOPE if _excluded(c.name) is None for op in _ops(c) if len(_ops(c)) == 1}
    assert len(passing_types) >= 80, sorted(passing_types)


@pytest.mark.parametrize("backend", ["minic", "interp"])
@pytest.mark.parametrize("case", IN_SCOPE, ids=lambda c: c.name)
def test_node_case(case, backend):
    reason = _excluded(case.name, backend)
    if reason is not None:
        with pytest.raises(UserError):
            rep = MinicBackend.prepare(case.model, backend=backend)
            for inputs, _ in case.data_sets:
                rep.run(inputs)
        return
    rep = MinicBackend.prepare(case.model, backend=backend)
    for inputs, expected in case.data_sets:
        outputs = rep.run(inputs)
        assert len(outputs) == len(expected)
        for got, want in zip(outputs, expected):
            want = np.asarray(want)
            assert got.shape == want.shape
            assert got.dtype.kind == want.dtype.kind
            np.testing.assert_allclose(got, want, rtol=case.rtol, atol=case.atol, equal_nan=True)
