"""``scaled_dot_product_attention``, converted whole (it is kept through
``run_decompositions``, see ``minic.frontend.torch.KEEP``), as PyTorch's math
reference computes it:

    scores = q @ kᵀ · scale                  scale = 1/√E unless given
    scores = where(mask, scores, -inf)       a bool mask (True: attend), or scores + mask (float)
    scores = where(col <= row, scores, -inf) is_causal (top-left aligned, as torch.tril)
    out    = softmax(scores) @ v             a row masked everywhere: zeros (torch's safe softmax)

With ``enable_gqa`` the Hk key/value heads serve Hq query heads: each is
repeated Hq/Hk times (``repeat_interleave`` on the head axis), as an unsqueeze,
an expand and a reshape.
"""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UserError
from minic.frontend.torch_ops import axis_of, out_dtype, aten, handles
from minic.ir.graph import Value
from minic.ir.types import DType, dim_mul


def _repeat_heads(cx, node, x: Value, groups: int, role: str) -> Value:
    """[..., Hk, S, E] -> [..., Hk·groups, S, E], each head repeated ``groups`` times in a row."""
    *batch, heads, s, e = x.type.shape
    axis = len(batch)
    wide = cx.emit("unsqueeze", [x], cx.attrs("unsqueeze", axes=(axis + 1,)), name=f"{node.name}_{role}_1")
    wide = cx.emit("expand", [wide], cx.attrs("expand", shape=(*batch, heads, groups, s, e)),
                   name=f"{node.name}_{role}_groups")
    return cx.emit("reshape", [wide], cx.attrs("reshape", shape=(*batch, dim_mul(heads, groups), s, e)),
                   name=f"{node.name}_{role}_heads")


@handles(aten.scaled_dot_product_attention.default)
def _sdpa(cx, node, a):
    q, k, v = (cx.value(a[n]) for n in ("query", "key", "value"))
    if a.get("dropout_p"):
        raise UserError("scaled_dot_product_attention with dropout_p > 0 is training-only")
    dtype = out_dtype(cx, node)
    if a.get("enable_gqa") and q.type.shape[-3] != k.type.shape[-3]:
        hq, hk = q.type.shape[-3], k.type.shape[-3]
        if not (isinstance(hq, int) and isinstance(hk, int) and hq % hk == 0):
            raise UserError(f"enable_gqa: {hq} query heads are not a multiple of {hk} key heads")
        k, v = _repeat_heads(cx, node, k, hq // hk, "k"), _repeat_heads(cx, node, v, hq // hk, "v")
    rank = k.type.rank
    perm = tuple(range(rank - 2)) + (rank - 1, rank - 2)
    kt = cx.emit("transpose", [k], cx.attrs("transpose", perm=perm), name=f"{node.name}_kt")
    scores = cx.emit("matmul", [q, kt], name=f"{node.name}_qk")
    e = q.type.shape[-1]
    scale = a.get("scale")
    if scale is None:
        if not isinstance(e, int):
            raise UserError(f"scaled_dot_product_attention: head size {e} must be static")
        scale = 1.0 / math.sqrt(e)
    scores = cx.emit("mul", [scores, cx.scalar(scale, dtype, f"{node.name}_scale")], name=f"{node.name}_scaled")
    lowest = cx.scalar(-np.inf, dtype, f"{node.name}_ninf")
    mask = a.get("attn_mask")
    if mask is not None:
        m = cx.value(mask)
        if m.type.dtype == DType.bool:
            scores = cx.emit("where", [m, scores, lowest], name=f"{node.name}_masked")
        else:
            scores = cx.emit("add", [scores, cx.cast(m, dtype)], name=f"{node.name}_masked")
    if a.get("is_causal"):
        if mask is not None:
            raise UserError("scaled_dot_product_attention: attn_mask and is_causal together")
        n_q, n_k = q.type.shape[-2], k.type.shape[-2]
        row = cx.emit("range", [], cx.attrs("range", shape=(n_q,), dtype=DType.i64), name=f"{node.name}_row")
        col = cx.emit("range", [], cx.attrs("range", shape=(n_k,), dtype=DType.i64), name=f"{node.name}_col")
        row = cx.emit("unsqueeze", [row], cx.attrs("unsqueeze", axes=(1,)), name=f"{node.name}_row_1")
        above = cx.emit("gt", [col, row], name=f"{node.name}_above")          # col > row: the future
        scores = cx.emit("where", [above, lowest, scores], name=f"{node.name}_causal")
    probs = cx.emit("softmax", [scores], cx.attrs("softmax", axis=axis_of(-1, scores.type.rank)), name=f"{node.name}_p")
    if mask is not None:
        # A row whose every score is masked attends to nothing: torch's safe softmax gives it
        # zeros, where a plain softmax of all -inf gives NaN.
        best = cx.emit("reduce_max", [scores], cx.attrs("reduce_max", axes=(scores.type.rank - 1,), keepdims=True),
                       name=f"{node.name}_best")
        dead = cx.emit("eq", [best, lowest], name=f"{node.name}_dead")
        probs = cx.emit("where", [dead, cx.scalar(0, dtype, f"{node.name}_zero"), probs], name=f"{node.name}_safe")
    return cx.emit("matmul", [probs, v])
