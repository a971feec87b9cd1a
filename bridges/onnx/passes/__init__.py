"""Homemade ONNX graph passes and the tiny pass manager that runs them.

Every pass is ``name(model: onnx.ModelProto) -> onnx.ModelProto``: it returns a
rewritten copy and never mutates its argument.  Its docstring's first line states
the rewrite as an identity.  ``PASSES`` lists them under kebab-case names, in the
order the default pipeline runs them.
"""
from __future__ import annotations

from typing import Callable

import onnx

from bridges.onnx.passes.cleanup import eliminate_dead_nodes, eliminate_unused_initializers
from bridges.onnx.passes.fold import (fold_constant_gather, fold_constant_nodes,
                                      fold_reshape_dims, fold_shape_gather)
from bridges.onnx.passes.noop import (eliminate_identity, eliminate_nop_cast,
                                      eliminate_nop_dropout, eliminate_nop_reshape,
                                      eliminate_nop_transpose)
from bridges.onnx.passes.reshape import fuse_consecutive_reshapes

Pass = Callable[[onnx.ModelProto], onnx.ModelProto]

PASSES: dict[str, Pass] = {
    # (b) no-ops
    "eliminate-identity": eliminate_identity,
    "eliminate-nop-dropout": eliminate_nop_dropout,
    "eliminate-nop-cast": eliminate_nop_cast,
    "eliminate-nop-transpose": eliminate_nop_transpose,
    # (c) constant Gather and the shape chains around it
    "fold-shape-gather": fold_shape_gather,
    "fold-constant-gather": fold_constant_gather,
    "fold-constant-nodes": fold_constant_nodes,
    "fold-reshape-dims": fold_reshape_dims,
    # (a) reshapes (after folding, so that their target shapes are constants)
    "fuse-reshapes": fuse_consecutive_reshapes,
    "eliminate-nop-reshape": eliminate_nop_reshape,
    # cleanup
    "eliminate-dead-nodes": eliminate_dead_nodes,
    "eliminate-unused-initializers": eliminate_unused_initializers,
}

DEFAULT_PIPELINE: tuple[str, ...] = tuple(PASSES)

from bridges.onnx.passes.manager import PassLog, run_passes  # noqa: E402

__all__ = ["PASSES", "DEFAULT_PIPELINE", "PassLog", "run_passes"]
