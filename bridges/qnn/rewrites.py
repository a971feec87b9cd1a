"""ONNX rewrites that let a model run on the HTP, or run right there.

Each rule is a function ``model -> (model, count)`` on a copy, with the reason
it exists.  ``apply`` runs the rules a mode asks for, in order:

* ``decompose-hyperbolic``: ``Sinh(x) = (Exp(x) - Exp(-x)) / 2`` and
  ``Cosh(x) = (Exp(x) + Exp(-x)) / 2``.  The QNN EP has no builder for Sinh or
  Cosh ("Operators of type `Sinh` are not supported by QNN EP"); Exp, Neg, Sub,
  Add and Mul it has, so the rewritten graph offloads fully.
* ``clamp-additive-mask``: a constant that holds only 0 and huge negatives
  (an additive attention mask, -1e9 in llama-tiny) is clamped to -MASK_FLOOR.
  Quantization calibrates each tensor's range from min to max; with -1e9 in
  ``scores + mask`` the step of an 8- or 16-bit code is ~1e7 and every real
  score rounds to the same code (llama-tiny's logits were off by 2.4 of 4.4).
  exp(-MASK_FLOOR) ~ 1e-28 keeps masked keys at zero weight after Softmax.
* ``materialize-broadcast-into-layernorm``: ``LayerNormalization(x + c [+ d])``
  where ``c`` broadcasts over x's leading (batch) axis is computed wrong
  by the emulated HTP (BERT's embeddings: position table [T, C] + word
  embeddings [B, T, C] with B = 2, T = 16: max error 2.5 on values of 3);
  with ``c`` expanded to the full shape first (``Expand``, which ORT folds
  for a constant) the result is right.  See
  docs/production-bugs.md#qnn-htp-broadcast-add-into-layernorm.  Needs static
  shapes (the backend fixes them first).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from bridges.onnx.graph_tools import (consumers, constants, copy_model, fresh_name, remove_nodes,
                                      set_initializer, static_shapes)

MASK_FLOOR = 64.0
MASK_THRESHOLD = -1e4           # values at or below this are "masked" positions


@dataclass(frozen=True)
class Rule:
    name: str
    why: str
    modes: tuple[str, ...]                               # "fp16", "qdq"
    apply: Callable[[onnx.ModelProto], tuple[onnx.ModelProto, int]]


def decompose_hyperbolic(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """Sinh(x) = (Exp(x) - Exp(-x)) * 0.5; Cosh(x) = (Exp(x) + Exp(-x)) * 0.5."""
    out = copy_model(model)
    g = out.graph
    doomed = [n for n in g.node if n.op_type in ("Sinh", "Cosh")]
    for node in doomed:
        x, y = node.input[0], node.output[0]
        base = node.name or y
        neg, ep, en, comb = (fresh_name(g, f"{y}_{s}") for s in ("neg", "exp", "expneg", "comb"))
        half = fresh_name(g, f"{y}_half")
        set_initializer(g, half, np.array(0.5, dtype=np.float32))
        new = [helper.make_node("Neg", [x], [neg], name=f"{base}/neg"),
               helper.make_node("Exp", [x], [ep], name=f"{base}/exp"),
               helper.make_node("Exp", [neg], [en], name=f"{base}/exp_neg"),
               helper.make_node("Sub" if node.op_type == "Sinh" else "Add", [ep, en], [comb],
                                name=f"{base}/combine"),
               helper.make_node("Mul", [comb, half], [y], name=f"{base}/half")]
        index = list(g.node).index(node)
        del g.node[index]
        for k, n in enumerate(new):
            g.node.insert(index + k, n)
    return out, len(doomed)


def clamp_additive_mask(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """c -> max(c, -MASK_FLOOR) for constants holding only 0 and values <= -1e4."""
    out = copy_model(model)
    g = out.graph
    count = 0
    for name, value in constants(g).items():
        if value.dtype.kind != "f" or value.size < 2 or value.min() > MASK_THRESHOLD:
            continue
        if not np.all((value == 0) | (value <= MASK_THRESHOLD)):
            continue
        clamped = np.maximum(value, -MASK_FLOOR).astype(value.dtype)
        for node in [n for n in g.node if n.op_type == "Constant" and n.output[0] == name]:
            remove_nodes(g, [node])
        set_initializer(g, name, clamped)
        count += 1
    return out, count


def materialize_broadcast_into_layernorm(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """Add(x, c) -> [Add ->] LayerNormalization, c broadcast over the batch axis and
    varying along a middle axis (a [T, C] table; a [C] bias is computed right):
    Add(x, Expand(c, shape)) with the Add's full static shape (ORT folds the
    Expand of a constant into a stored constant)."""
    out = copy_model(model)
    g = out.graph
    shapes = static_shapes(out)
    readers = consumers(g)
    count = 0

    def into_layernorm(name: str) -> bool:         # through a chain of Adds
        return any(r.op_type == "LayerNormalization" or (r.op_type == "Add" and into_layernorm(r.output[0]))
                   for r in readers.get(name, []))

    for node in list(g.node):
        if node.op_type != "Add" or not into_layernorm(node.output[0]):
            continue
        full = shapes.get(node.output[0])
        if not full or not all(isinstance(d, int) for d in full) or full[0] == 1:
            continue
        for i, operand in enumerate(node.input):
            dims = shapes.get(operand)
            if dims is None:
                continue
            padded = [1] * (len(full) - len(dims)) + list(dims)
            if padded[0] != 1 or all(d == 1 for d in padded[1:-1]):
                continue                    # not the trigger: a [T, C]-like operand without the batch
            shape_name = fresh_name(g, f"{operand}_full_shape")
            set_initializer(g, shape_name, np.array(full, dtype=np.int64))
            expanded = fresh_name(g, f"{operand}_expanded")
            index = list(g.node).index(node)
            g.node.insert(index, helper.make_node("Expand", [operand, shape_name], [expanded],
                                                  name=f"{node.name or expanded}/expand_{i}"))
            node.input[i] = expanded
            count += 1
    return out, count


RULES: tuple[Rule, ...] = (
    Rule("decompose-hyperbolic", "QNN EP has no Sinh/Cosh; Exp/Neg/Sub/Add/Mul it has",
         ("fp16", "qdq"), decompose_hyperbolic),
    Rule("clamp-additive-mask", "a -1e9 mask ruins the calibrated range of scores + mask",
         ("qdq",), clamp_additive_mask),
    Rule("materialize-broadcast-into-layernorm",
         "the emulated HTP computes LayerNorm(x + batch-broadcast constant) wrong",
         ("fp16", "qdq"), materialize_broadcast_into_layernorm),
)


def apply(model: onnx.ModelProto, family: str) -> tuple[onnx.ModelProto, dict[str, int]]:
    """Every rule of ``family`` ("fp16" or "qdq"); returns the model and rule -> rewrites."""
    log: dict[str, int] = {}
    for rule in RULES:
        if family in rule.modes:
            model, count = rule.apply(model)
            if count:
                log[rule.name] = count
    return model, log

