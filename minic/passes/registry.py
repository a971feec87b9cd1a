"""Every pass under its kebab-case name, and the optimisation levels as lists of names."""
from __future__ import annotations

from typing import Callable

from minic.ir.graph import Graph
from minic.passes import (algebra, batchnorm, cse, dead_code, fold_constants, fuse_groups, identity, matmul_bias,
                          padding, reshapes, shape_chains, to_f16, winograd)

Pass = Callable[[Graph], Graph]

PASSES: dict[str, Pass] = {
    "fold-constant-gather": shape_chains.fold_constant_gather,
    "fold-constants": fold_constants.fold_constants,
    "eliminate-identity": identity.eliminate_identity,
    "simplify-algebra": algebra.simplify_algebra,
    "fuse-reshapes": reshapes.fuse_reshapes,
    "fold-batchnorm": batchnorm.fold_batchnorm,
    "fuse-matmul-bias": matmul_bias.fuse_matmul_bias,
    "eliminate-common-subexpr": cse.eliminate_common_subexpr,
    "eliminate-dead-code": dead_code.eliminate_dead_code,
    "winograd-conv2d": winograd.winograd_conv2d,
    "explicit-padding": padding.explicit_padding,
    # The fusion grouping belongs to lowering (it decides which ops become one
    # kernel); it is a pass so that --print-after shows the groups.  It is the
    # pipeline's "fused" stage (minic/pipeline.py), after the rest of the level.
    "fuse-groups": fuse_groups.fuse_groups,
    # Changes the numbers (f16 storage), so it is in no level: CompileOptions.precision asks for it.
    "to-f16": to_f16.to_f16,
}

# Passes that change the numbers on purpose; every other pass computes exactly what it was given.
ROUNDING = {"to-f16"}

CLEANUP = ["eliminate-identity", "fold-constants", "eliminate-common-subexpr", "eliminate-dead-code"]

LEVELS: dict[int, list[str]] = {
    0: [],
    1: CLEANUP,
    # Shape programs first (they hide static reshapes), then constants, so that
    # folding batch norms and biases sees constant weights; cleanup; then the
    # rewrites for lowering: 3x3 convolutions in Winograd's form (GraphOptions.winograd),
    # padding as nodes of its own, the fusion groups.
    2: ["fold-constant-gather", "fold-constants", "eliminate-identity", "simplify-algebra",
        "fuse-reshapes", "fold-batchnorm", "fuse-matmul-bias"] + CLEANUP
       + ["winograd-conv2d", "explicit-padding", "fuse-groups"],
}
