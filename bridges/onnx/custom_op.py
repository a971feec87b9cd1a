"""How do custom ONNX ops work when the runtime doesn't support them?

An ONNX node names its op by (domain, op_type).  The standard ops live in the
domain "" (ai.onnx); anyone may invent another domain.  The exporter can write a
node in any domain, and the checker accepts it (it cannot know the op), but a
*runtime* needs a kernel for it.  This demo exports llama-tiny with every
RMSNorm written as one custom node ``ai.minic::RMSNorm`` and then shows the four
outcomes a learner meets:

1. ONNX Runtime refuses the model: no kernel is registered for that op;
2. ONNX's reference evaluator runs it once we hand it a Python kernel
   (ORT's equivalent is a compiled custom-op library, registered with
   ``SessionOptions.register_custom_ops_library``);
3. ONNX Runtime runs it when the model carries the op's *definition* as an ONNX
   function (a ``FunctionProto`` in standard ops), which the runtime inlines;
4. minic's own ONNX importer, told the op's meaning, imports it.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from minic.errors import UnsupportedError

DOMAIN = "ai.minic"
OP = "RMSNorm"
DEFAULT_EPSILON = 1e-5


def rmsnorm_reference(x: np.ndarray, scale: np.ndarray, epsilon: float = DEFAULT_EPSILON
                      ) -> np.ndarray:
    """The op's meaning: y = x / sqrt(mean(x^2, last axis) + epsilon) * scale."""
    mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
    return (x / np.sqrt(mean_square + np.float32(epsilon)) * scale).astype(x.dtype)


def export_with_custom_rmsnorm(size: str = "small", seed: int = 0, opset: int = 17,
                               dynamic: bool = True):
    """llama-tiny exported with each RMSNorm as one ``ai.minic::RMSNorm`` node.

    ``dynamic=False`` fixes (batch, seq) to the example's: minic's importer wants
    the ``cos[:T]`` slices to have constant ends.  Returns ``(exported, module)``;
    the module is the unchanged torch reference.
    """
    import torch

    import minic.models as zoo
    from bridges.onnx.export import export_module
    from minic.models.llama import RMSNorm

    class RMSNormOp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps: float):
            return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight

        @staticmethod
        def symbolic(g, x, weight, eps: float):
            # "domain::op"; the _f suffix makes epsilon a float attribute.
            return g.op(f"{DOMAIN}::{OP}", x, weight, epsilon_f=eps).setType(x.type())

    module, inputs = zoo.get("llama-tiny", size=size, seed=seed)
    originals = {}
    for norm in module.modules():
        if isinstance(norm, RMSNorm):
            originals[norm] = norm.forward
            norm.forward = (lambda x, n=norm: RMSNormOp.apply(x, n.weight, n.eps))
    try:
        info = zoo.info("llama-tiny")
        axes = info.dynamic_axes if dynamic else tuple({} for _ in info.input_names)
        exported = _export_custom(export_module, module, inputs, info.input_names, axes, opset)
    finally:
        for norm, forward in originals.items():
            norm.forward = forward
    return exported, module


def _export_custom(export_module, module, inputs, input_names, dynamic_axes, opset):
    import torch

    # torch.onnx.export needs the custom domain's version: patch it in via kwargs.
    real_export = torch.onnx.export

    def export_with_domain(*args, **kwargs):
        return real_export(*args, custom_opsets={DOMAIN: 1}, **kwargs)

    torch.onnx.export = export_with_domain
    try:
        return export_module(module, inputs, input_names=input_names,
                             dynamic_axes=dynamic_axes, opset=opset,
                             output_names=("logits",))
    finally:
        torch.onnx.export = real_export


def ort_error(model: onnx.ModelProto) -> str | None:
    """The error ONNX Runtime raises when loading ``model``, or None if it loads."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as err:      # ORT raises its own Fail/NotImplemented/InvalidGraph
        return f"{type(err).__name__}: {str(err).strip().splitlines()[0]}"
    return None


def run_with_python_kernel(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """Run the model with ONNX's reference evaluator, the custom op given as Python."""
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    class RMSNorm(OpRun):
        op_domain = DOMAIN

        def _run(self, x, scale, epsilon=DEFAULT_EPSILON):
            return (rmsnorm_reference(x, scale, epsilon),)

    return ReferenceEvaluator(model, new_ops=[RMSNorm]).run(None, feeds)[0]


def rmsnorm_function(opset: int = 17) -> onnx.FunctionProto:
    """``ai.minic::RMSNorm`` defined in standard ONNX ops, as a model-local function."""
    nodes = [
        helper.make_node("Mul", ["X", "X"], ["square"]),
        helper.make_node("ReduceMean", ["square"], ["mean"], axes=[-1], keepdims=1),
        helper.make_node("Constant", [], ["eps"], value_float=DEFAULT_EPSILON),
        helper.make_node("CastLike", ["eps", "X"], ["eps_t"]),
        helper.make_node("Add", ["mean", "eps_t"], ["shifted"]),
        helper.make_node("Sqrt", ["shifted"], ["rms"]),
        helper.make_node("Div", ["X", "rms"], ["normed"]),
        helper.make_node("Mul", ["normed", "scale"], ["Y"]),
    ]
    # The epsilon attribute is a function attribute: Constant reads it by reference.
    nodes[2] = helper.make_node("Constant", [], ["eps"])
    ref = onnx.AttributeProto(name="value_float", ref_attr_name="epsilon",
                              type=onnx.AttributeProto.FLOAT)
    nodes[2].attribute.append(ref)
    return helper.make_function(DOMAIN, OP, ["X", "scale"], ["Y"], nodes,
                                opset_imports=[helper.make_opsetid("", opset)],
                                attributes=["epsilon"])


def with_function_definition(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` that carries the definition of its custom op."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    opset = next(o.version for o in out.opset_import if o.domain in ("", "ai.onnx"))
    out.functions.append(rmsnorm_function(opset))
    return out


def rmsnorm_to_minic(b, inputs: list, attrs: dict) -> list:
    """minic's converter for ``ai.minic::RMSNorm``: the op in minic's own ops.

    The signature is the importer's ``Converter``: the builder, the node's input
    values and its attributes; it returns the node's output values.
    """
    x, scale = inputs
    epsilon = attrs.get("epsilon", DEFAULT_EPSILON)
    mean_square = b.one("reduce_mean", b.one("mul", x, x), axes=(x.type.rank - 1,),
                        keepdims=True)
    inverse_rms = b.one("rsqrt", b.one("add", mean_square, b.const(epsilon, like=x)))
    return [b.one("mul", b.one("mul", x, inverse_rms), scale)]


def import_into_minic(model: onnx.ModelProto):
    """Hand the custom-op model to minic's ONNX importer with the op registered.

    ``minic.frontend.onnx.from_onnx(model, custom_ops=...)`` maps (domain, op_type)
    to a converter; without the entry it stops with "op is not supported".
    """
    try:
        from minic.frontend.onnx import from_onnx
    except ImportError:
        raise UnsupportedError("minic's ONNX importer (minic.frontend.onnx.from_onnx) is not "
                               "available; the custom-op model cannot be imported") from None
    return from_onnx(model, custom_ops={(DOMAIN, OP): rmsnorm_to_minic})
