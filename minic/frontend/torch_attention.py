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

from minic.errors import UserError
from minic.frontend import compose
from minic.frontend.torch_ops import out_dtype, aten, handler_table
from minic.ir.types import DType

HANDLERS = handler_table()
handles = HANDLERS.add


@handles(aten.scaled_dot_product_attention.default)
def _sdpa(cx, node, a):
    """``compose.attention`` with torch's mask rules (a float mask in the output's dtype, is_causal as
    a boolean mask, the safe softmax wherever a mask is given)."""
    q, k, v = (cx.value(a[n]) for n in ("query", "key", "value"))
    if a.get("dropout_p"):
        raise UserError("scaled_dot_product_attention with dropout_p > 0 is training-only")
    dtype = out_dtype(cx, node)
    if a.get("enable_gqa") and q.type.shape[-3] != k.type.shape[-3]:
        hq, hk = q.type.shape[-3], k.type.shape[-3]
        if not (isinstance(hq, int) and isinstance(hk, int) and hq % hk == 0):
            raise UserError(f"enable_gqa: {hq} query heads are not a multiple of {hk} key heads")
        k, v = compose.repeat_heads(cx, k, hq // hk), compose.repeat_heads(cx, v, hq // hk)
    scale = a.get("scale")
    if scale is None:
        scale = 1.0 / math.sqrt(compose.static(cx, q, q.type.rank - 1, "scaled_dot_product_attention's scale"))
    masks = []
    if a.get("attn_mask") is not None:
        m = cx.value(a["attn_mask"])
        masks.append(m if m.type.dtype == DType.bool else cx.cast(m, dtype))
    if a.get("is_causal"):
        if masks:
            raise UserError("scaled_dot_product_attention: attn_mask and is_causal together")
        row = cx.one("unsqueeze", cx.one("range", shape=(q.type.shape[-2],), dtype=DType.i64), axes=(1,))
        masks.append(cx.one("le", cx.one("range", shape=(k.type.shape[-2],), dtype=DType.i64), row))   # col <= row
    return compose.attention(cx, q, k, v, float(scale), masks, safe=a.get("attn_mask") is not None)
