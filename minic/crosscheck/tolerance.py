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
its bound is set by that, not by the compiler.
"""
from __future__ import annotations

import numpy as np

F32 = 1e-4
F16 = 2e-2          # f16 storage: ~40 roundings of 4.9e-4 relative through a deep model
NNSMITH = (1e-2, 1e-3)


def tolerance(dtype: np.dtype | str) -> float:
    """The bound for outputs computed in ``dtype``."""
    return F16 if np.dtype(dtype) == np.float16 else F32
