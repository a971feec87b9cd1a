"""The tolerance policy: how far a path may drift from the reference and still be "ok".

Errors are measured as ``minic.compare.Errors``: the max absolute difference,
and the same divided by the largest reference magnitude; a result is ok when
either is within the bound ("abs or rel").  Why not exact?

* Reduction order: a compiler that splits a sum over k into vector lanes or
  tiles adds in another order; in f32 each add rounds at 2^-24 relative, and
  the error of an n-term sum grows like sqrt(n)·2^-24 (n = 3072 in BERT's FFN).
* Fused multiply-add rounds once where eager PyTorch rounds twice.
* Transcendentals: libm, LLVM's intrinsics, MLIR's math expansions, ONNX
  Runtime's and TVM's fast exp/tanh/erf approximations differ in the last bits,
  and softmax/layer-norm chains amplify that a little.
None of these reach 1e-4 of the output's scale on the zoo, so f32 is held to
1e-4 — two orders of magnitude tighter than NNSmith's rtol 1e-2 / atol 1e-3.
f16 storage keeps only 11 significant bits (unit roundoff 2^-11 ≈ 4.9e-4), so
its bound is set by that, not by the compiler; bf16 keeps 8 bits (2^-8 ≈ 3.9e-3),
so its bound is eight times f16's.  f64 is held to 1e-9: the same reasons, at
2^-53.  Integer and bool results are exact: any difference is a bug.
"""
from __future__ import annotations

import numpy as np

F32 = 1e-4
F16 = 2e-2          # f16 storage: ~40 roundings of 4.9e-4 relative through a deep model
BF16 = F16 * 2 ** (11 - 8)  # bf16 storage: the same ~40 roundings of 2^-8 ≈ 3.9e-3: 1.6e-1
F64 = 1e-9
# A model quantized to 8 bits (QDQ activations and weights, or quantize_dynamic's), against
# its f32 reference: every activation is rounded to one of 256 codes over its calibrated range
# and the weights likewise; a few dozen such roundings add up through a model, and inputs
# outside the calibration range are clipped: 0.15 of the output's scale (the QNN leg's bound,
# bridges/qnn/tolerance.py, where the measured figures are; 16-bit activations: 0.1).
QDQ8 = 0.15
QDQ16 = 0.1
EXACT = 0.0
NNSMITH = (1e-2, 1e-3)


def tolerance(dtype: np.dtype | str) -> float:
    """The bound for outputs computed in ``dtype``."""
    dt = np.dtype(dtype)
    if dt == np.float16:
        return F16
    if dt.name == "bfloat16":                        # ml_dtypes' (imported only where bf16 is used)
        return BF16
    if dt == np.float64:
        return F64
    return F32 if dt == np.float32 else EXACT


# int8 (a QDQ model's quantized matmuls on integers, minic/passes/quantized.py; docs/int8.md):
# the i32 sums are exact, equal to ONNX Runtime's, so the two differ only where a value is
# *requantized* (QuantizeLinear: round(y / scale) + zero point) and y, computed in f32 in a
# different order (minic: f32(sum) · (sx · sw) / sy; ONNX Runtime: f32(sum) · (sx · sw / sy)),
# lands within an f32 rounding of a tie: it rounds to the neighbouring integer, one quantum
# away.  So each requantized value may be one quantum off; a later layer sees that as a
# one-step change of an input, which moves its sum by |w| · sx and, after its own
# requantization, its output by at most one quantum more in practice.  The bound is counted
# in quanta of the output's scale, per requantization on the way: a model with L quantized
# layers is held to L quanta (measured: 0 on the tests' QDQ MLPs, tests/int8).  Outputs computed
# by float ops after the last requantization (bert-base's layer norm) differ as f32 code does:
# held to F32 against ONNX Runtime's int8 (measured: 1.6e-7 on the zoo's bert-base, small).
INT8_QUANTA_PER_LAYER = 1


def int8_quanta(got: np.ndarray, want: np.ndarray, scale: float) -> float:
    """The largest difference of two dequantized outputs, in quanta of their ``scale``."""
    return float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0) / scale)
