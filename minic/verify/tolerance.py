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
