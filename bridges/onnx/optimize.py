"""Step 2: optimize the exported model four ways, to put them side by side.

* ``exported``      : what ``torch.onnx.export`` wrote (after the checker);
* ``homemade``      : our passes (``bridges/onnx/passes``) run to a fixed point;
* ``onnxoptimizer`` : onnxoptimizer's passes nearest to ours;
* ``ort-basic``     : ONNX Runtime's basic-level graph optimizer, as it saves the
  graph it will run (``SessionOptions.optimized_model_filepath``).
"""
from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import onnx

from bridges.onnx.passes import PassLog, run_passes

# onnxoptimizer's counterparts of our passes: identity/no-op elimination,
# Shape->Gather folding, Concat-into-Reshape, dead code and unused initializers.
ONNXOPTIMIZER_NEAREST = [
    "eliminate_identity", "eliminate_nop_dropout", "eliminate_nop_cast",
    "eliminate_nop_transpose", "eliminate_nop_reshape", "eliminate_shape_gather",
    "eliminate_shape_op", "eliminate_slice_after_shape", "fuse_concat_into_reshape",
    "eliminate_deadend", "eliminate_unused_initializer",
]


def homemade(model: onnx.ModelProto, names=None) -> tuple[onnx.ModelProto, PassLog]:
    """Our passes to a fixed point; the result must still pass the full checker."""
    from bridges.onnx.export import check

    optimized, log = run_passes(model, names)
    check(optimized)
    return optimized, log


def with_onnxoptimizer(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnxoptimizer's nearest passes, given the same shape-inference facts ours use.

    Its Shape/Gather passes read shapes only from the graph's ``value_info``, which
    the exporter leaves empty: without inferring first they change nothing.
    """
    import onnxoptimizer

    inferred = onnx.shape_inference.infer_shapes(model)
    return onnxoptimizer.optimize(inferred, ONNXOPTIMIZER_NEAREST, fixed_point=True)


def with_ort_basic(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph ONNX Runtime runs after its basic (provider-independent) rewrites."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "ort_basic.onnx"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(saved)
        ort.InferenceSession(model.SerializeToString(), options,
                             providers=["CPUExecutionProvider"])
        return onnx.load(str(saved))


def all_variants(model: onnx.ModelProto) -> dict[str, onnx.ModelProto]:
    """The four graphs of the side-by-side table, by label."""
    return {
        "exported": model,
        "homemade": homemade(model)[0],
        "onnxoptimizer": with_onnxoptimizer(model),
        "ort-basic": with_ort_basic(model),
    }


def node_counts(model: onnx.ModelProto) -> tuple[int, int]:
    """(all nodes, nodes other than ``Constant``): a Constant node and an initializer
    hold the same thing, and tools differ in which they write, so the table shows both."""
    ops = Counter(n.op_type for n in model.graph.node)
    total = sum(ops.values())
    return total, total - ops["Constant"]
