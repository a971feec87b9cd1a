"""Graph passes: Graph -> Graph rewrites, each stating its rewrite as an identity.

Read them in pipeline order (the order of ``LEVELS[2]``):

  quantized.py       fake-quantization-to-integer  matmul(dequantize(x), dequantize(@w)) -> matmul_integer(x, @w)·s,
                                                   conv2d alike (conv2d_integer); MatMulInteger's and ConvInteger's
                                                   cast(matmul(x - zx, @w - zw), i32) alike
  shape_chains.py    fold-constant-gather      gather(@c, @i) -> @c[i]; shape programs -> static reshapes
  fold_constants.py  fold-constants            op(@c...) -> @op(c...)
  identity.py        eliminate-identity        identity(x) -> x, no-op reshape/transpose/cast/... -> x
  algebra.py         simplify-algebra          x*1 -> x, x+0 -> x, neg(neg(x)) -> x, ...
  reshapes.py        fuse-reshapes             reshape(reshape(x, s1), s2) -> reshape(x, s2)
  batchnorm.py       fold-batchnorm            batch_norm(conv2d(x, w, b)) -> conv2d(x, w·k, b')
  matmul_bias.py     fuse-matmul-bias          add(matmul(x, w), b) -> gemm(x, w, b)
  cse.py             eliminate-common-subexpr  op(x) twice -> once
  dead_code.py       eliminate-dead-code       unused y = op(x) -> nothing
  padding.py         explicit-padding          conv2d(x){padding=p} -> conv2d(pad(x, p)){padding=0} (int8's pad zx)
  fuse_groups.py     fuse-groups               marks which nodes lowering makes into one kernel

and passes in no level, run when asked for (CompileOptions.precision; the backends' precision="int8"):

  to_f16.py          to-f16                    op(x: f32) : f32 -> cast(op(cast(x, f16)) : f16, f32)
                     to-bf16                   op(x: f32) : f32 -> cast(op(cast(x, bf16)) : bf16, f32)
  post_training.py   (quantize_int8)           matmul(x, @w) -> matmul(dequantize(quantize(x)), dequantize(@q)),
                                               calibrated on data: what fake-quantization-to-integer then takes

``rewrite.py`` is the toolkit they share; ``manager.py`` names them (a pass of rules as its
table of rules) and runs them by name.
"""
from minic.passes.manager import LEVELS, PASSES, PassStat, format_stats, optimize, pipeline

__all__ = ["LEVELS", "PASSES", "PassStat", "format_stats", "optimize", "pipeline"]
