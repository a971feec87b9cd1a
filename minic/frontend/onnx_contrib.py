"""ONNX Runtime's ``com.microsoft`` contrib ops, composed from minic ops.

ONNX Runtime's transformer optimizer (``onnxruntime.transformers.optimizer``) fuses
subgraphs of exported transformers into these ops (Attention, SkipLayerNormalization,
BiasGelu ...), its quantizer writes DynamicQuantizeLSTM (and its session optimizer
DynamicQuantizeMatMul), and LLM exporters write GroupQueryAttention; users share such files.
Each converter here follows the op's documented meaning (ONNX Runtime's
ContribOperators.md) and writes it back as the plain ops it fused: a learner sees
what the fusion stands for, and minic's own passes fuse it again their way.
Inputs and attributes a converter does not cover (Attention's past key/value cache, a
quantized cache) are refused by name, never ignored.
"""
from __future__ import annotations

import math

import numpy as np

from minic.errors import UnsupportedError
from minic.frontend import compose, onnx_ops
from minic.frontend.onnx_builder import Builder, OnnxImportError, optional
from minic.frontend.onnx_recurrent import unroll
from minic.ir.graph import Value
from minic.ir.types import DType, Dim
from minic.registry import Registry

DOMAIN = "com.microsoft"
CONTRIB = Registry(f"{DOMAIN} op", UnsupportedError)       # op type -> converter
contrib = CONTRIB.add
# ONNX Runtime also defines a few ops of its own in ONNX's domain, at every opset: its optimizer
# writes LayerNormalization into files of opset < 17 (before ONNX had it) and SimplifiedLayerNormalization.
ORT_ONNX_DOMAIN = Registry("ONNX Runtime op in the ONNX domain", UnsupportedError)


def ort_onnx_domain_op(op_type: str, opset: int):
    """The converter of ONNX Runtime's own op ``op_type`` in ONNX's domain when ONNX has
    no op of that name at ``opset``; else None (the ONNX op it is, if any)."""
    import onnx
    if op_type not in ORT_ONNX_DOMAIN:
        return None
    try:
        onnx.defs.get_schema(op_type, opset)
        return None
    except (onnx.defs.SchemaError, TypeError):
        return ORT_ONNX_DOMAIN[op_type]


def _refuse_extra(b: Builder, x: list, inputs: dict[int, str], outputs: dict[int, str]) -> None:
    """Refuse the optional inputs and outputs a converter does not cover, naming them."""
    for i, name in inputs.items():
        if i < len(x) and x[i] is not None:
            raise UnsupportedError(f"{b.where}: the '{name}' input is not supported")
    for i, name in outputs.items():
        if i < len(b.node.output) and b.node.output[i]:
            raise UnsupportedError(f"{b.where}: the '{name}' output is not supported")


# --- activations -------------------------------------------------------------------------

@contrib("Gelu")
def _gelu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Gelu(X) = X·Φ(X), Φ with erf."""
    return [b.one("gelu", x[0])]


@contrib("BiasGelu")
def _bias_gelu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """BiasGelu(A, B) = Gelu(A + B)."""
    return [b.one("gelu", b.one("add", x[0], x[1]))]


@contrib("FastGelu")
def _fast_gelu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """FastGelu(X, bias) = the tanh approximation of Gelu at X + bias."""
    v = x[0] if optional(x, 1) is None else b.one("add", x[0], x[1])
    return [b.one("gelu", v, approximate="tanh")]


@contrib("QuickGelu")
def _quick_gelu(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """QuickGelu(X) = X·sigmoid(alpha·X), alpha = 1.702 by default."""
    alpha = b.const(a.get("alpha", 1.702), like=x[0])
    return [b.one("mul", x[0], b.one("sigmoid", b.one("mul", x[0], alpha)))]


@contrib("BiasAdd")
def _bias_add(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """BiasAdd(X, bias, skip) = X + bias + skip."""
    return [b.one("add", b.one("add", x[0], x[1]), x[2])]


# --- normalizations ----------------------------------------------------------------------

def _skip_sum(b: Builder, x: list[Value], bias_at: int) -> Value:
    s = b.one("add", x[0], x[1])
    bias = optional(x, bias_at)
    return s if bias is None else b.one("add", s, bias)


@contrib("SkipLayerNormalization")
def _skip_layer_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """LayerNorm(input + skip + bias)·gamma + beta over the last axis; the 4th output is
    the sum before normalizing."""
    _refuse_extra(b, x, {}, {1: "mean", 2: "inv_std_var"})
    s = _skip_sum(b, x, 4)
    norm_inputs = [s, x[2]] + ([x[3]] if optional(x, 3) is not None else [])
    y = b.one("layer_norm", *norm_inputs, axis=-1, eps=float(a.get("epsilon", 1e-12)))
    return [y, None, None, s]


@contrib("SkipSimplifiedLayerNormalization")
def _skip_rms_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """RMSNorm(input + skip + bias)·gamma: s / sqrt(mean(s²) + epsilon) · gamma."""
    _refuse_extra(b, x, {}, {1: "mean", 2: "inv_std_var"})
    s = _skip_sum(b, x, 3)
    return [_rms_norm(b, s, x[2], float(a.get("epsilon", 1e-12)), -1), None, None, s]


def _rms_norm(b: Builder, v: Value, scale: Value, eps: float, axis: int) -> Value:
    """v / sqrt(mean(v²) + eps) · scale, the mean over the axes from ``axis`` on."""
    axis %= v.type.rank
    mean_square = b.one("reduce_mean", b.one("mul", v, v), axes=tuple(range(axis, v.type.rank)), keepdims=True)
    return b.one("mul", b.one("mul", v, b.one("rsqrt", b.one("add", mean_square, b.const(eps, like=v)))), scale)


@contrib("EmbedLayerNormalization")
def _embed_layer_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """LayerNorm(word[input_ids] + position[position_ids] + segment[segment_ids]); the
    mask_index output is the number of ones of each mask row (mask_index_type 1)."""
    ids, segment_ids, word, position, segment, gamma, beta = (optional(x, i) for i in range(7))
    mask, position_ids = optional(x, 7), optional(x, 8)
    batch, seq = ids.type.shape
    total = b.one("gather", word, ids, axis=0)
    if position_ids is not None:
        total = b.one("add", total, b.one("gather", position, position_ids, axis=0))
    else:                                               # positions 0 .. S-1 for every row
        pos = b.one("slice", position, axes=(0,), starts=(0,), ends=(seq,), steps=(1,))
        total = b.one("add", total, pos)
    if segment_ids is not None and segment is not None:
        total = b.one("add", total, b.one("gather", segment, segment_ids, axis=0))
    y = b.one("layer_norm", *[v for v in (total, gamma, beta) if v is not None], axis=-1,
              eps=float(a.get("epsilon", 1e-12)))
    mask_index = None
    if len(b.node.output) > 1 and b.node.output[1]:
        if mask is None or a.get("mask_index_type", 1) != 1:
            raise UnsupportedError(f"{b.where}: the mask_index output needs a mask input and mask_index_type 1")
        mask_index = b.one("cast", b.one("reduce_sum", b.one("cast", mask, dtype=DType.i64), axes=(1,)),
                           dtype=DType.i32)
    return [y, mask_index, total]


@ORT_ONNX_DOMAIN.add("LayerNormalization")
def _layer_norm_before_17(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """ONNX Runtime's LayerNormalization, the same as ONNX's of opset 17."""
    return onnx_ops.CONVERTERS["LayerNormalization"](b, x, a)


@ORT_ONNX_DOMAIN.add("SimplifiedLayerNormalization")
def _simplified_layer_norm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """X / sqrt(mean(X²) + epsilon) · scale, the mean over the axes from ``axis`` on (RMSNorm)."""
    _refuse_extra(b, x, {}, {1: "inv_std_var"})
    return [_rms_norm(b, x[0], x[1], float(a.get("epsilon", 1e-5)), int(a.get("axis", -1)))]


# --- contractions ------------------------------------------------------------------------

@contrib("FusedMatMul")
def _fused_matmul(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """alpha · op(A) @ op(B), op transposing the last two axes when transA / transB."""
    if a.get("transBatchA", 0) or a.get("transBatchB", 0):
        raise UnsupportedError(f"{b.where}: transBatchA/transBatchB are not supported")
    left = compose.swap_last(b, x[0]) if a.get("transA", 0) else x[0]
    right = compose.swap_last(b, x[1]) if a.get("transB", 0) else x[1]
    y = b.one("matmul", left, right)
    alpha = float(a.get("alpha", 1.0))
    return [y if alpha == 1.0 else b.one("mul", y, b.const(alpha, like=y))]


def _integer_product(b: Builder, a: Value, a_zp: Value | None, w: Value, w_zp: Value | None) -> Value:
    """(A - a_zp) @ (W - w_zp) in f32 (integers of 8 bits: exact while the sums stay below 2^24);
    W's zero point is one per column or one for all."""
    def shifted(v: Value, zp: Value | None) -> Value:
        f = b.one("cast", v, dtype=DType.f32)
        return f if zp is None else b.one("sub", f, b.one("cast", zp, dtype=DType.f32))
    return b.one("matmul", shifted(a, a_zp), shifted(w, w_zp))


def _scaled(b: Builder, product: Value, scale: Value, bias: Value | None) -> Value:
    y = b.one("mul", product, scale)
    return y if bias is None else b.one("add", y, bias)


@contrib("MatMulIntegerToFloat")
def _matmul_integer_to_float(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """((A - a_zero_point) @ (B - b_zero_point)) · a_scale · b_scale + bias."""
    A, B, a_scale, b_scale = x[:4]
    a_zp, b_zp, bias = optional(x, 4), optional(x, 5), optional(x, 6)
    product = _integer_product(b, A, a_zp, B, b_zp)
    return [_scaled(b, product, b.one("mul", a_scale, b_scale), bias)]


def _dynamic_u8(b: Builder, v: Value) -> tuple[Value, Value, Value]:
    """``v`` quantized to u8 at run time as ONNX's DynamicQuantizeLinear does: scale = (max(v, 0) -
    min(v, 0)) / 255, zero point = round(-min / scale); (q, scale, zero point), q and zero point
    as f32 integers."""
    every = tuple(range(v.type.rank))
    lo = b.one("min", b.one("reduce_min", v, axes=every), b.const(0.0, like=v))
    hi = b.one("max", b.one("reduce_max", v, axes=every), b.const(0.0, like=v))
    scale = b.one("div", b.one("sub", hi, lo), b.const(255.0, like=v))
    # an all-zero v has scale 0: any scale quantizes it to zeros, 1 avoids dividing by 0
    scale = b.one("where", b.one("eq", scale, b.const(0.0, like=v)), b.const(1.0, like=v), scale)
    clip = (b.const(0.0, like=v), b.const(255.0, like=v))
    zp = b.one("min", b.one("max", b.one("round", b.one("neg", b.one("div", lo, scale))), clip[0]), clip[1])
    q = b.one("min", b.one("max", b.one("add", b.one("round", b.one("div", v, scale)), zp), clip[0]), clip[1])
    return q, scale, zp


def _rounded_u8(b: Builder, v: Value) -> Value:
    """``v`` as its u8 quantization stands for it: (q - zero point) · scale."""
    q, scale, zp = _dynamic_u8(b, v)
    return b.one("mul", b.one("sub", q, zp), scale)


@contrib("DynamicQuantizeMatMul")
def _dynamic_quantize_matmul(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """A quantized to u8 at run time (DynamicQuantizeLinear), then as MatMulIntegerToFloat."""
    A, B, b_scale = x[:3]
    b_zp, bias = optional(x, 3), optional(x, 4)
    q, scale, zp = _dynamic_u8(b, A)
    product = _integer_product(b, q, zp, B, b_zp)
    return [_scaled(b, product, b.one("mul", scale, b_scale), bias)]


def _dequantized_gates(b: Builder, w: Value, scale: Value, zp: Value) -> Value:
    """A DynamicQuantizeLSTM weight (D, K, 4H), its scale and zero point one per direction (D)
    or per column (D, 4H), as ONNX's LSTM takes it: (w - zp) · scale transposed to (D, 4H, K)."""
    per = (scale.type.shape[0], 1, 1) if scale.type.rank == 1 else (scale.type.shape[0], 1, scale.type.shape[1])
    zero_point = b.one("reshape", b.one("cast", zp, dtype=DType.f32), shape=per)
    shifted = b.one("sub", b.one("cast", w, dtype=DType.f32), zero_point)
    return b.one("transpose", b.one("mul", shifted, b.one("reshape", scale, shape=per)), perm=(0, 2, 1))


@contrib("DynamicQuantizeLSTM")
def _dynamic_quantize_lstm(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """ONNX's LSTM with 8-bit W (D, I, 4H) and R (D, H, 4H), stored transposed: X is rounded to
    u8 once over the whole sequence and the state h at every step, before they meet the
    weights, as DynamicQuantizeLinear rounds them.  (ONNX Runtime multiplies the integers and
    scales the sums, the same product up to float rounding; on more than one thread it rounds
    each thread's rows of h apart, so this is its one-thread result.)"""
    if a.get("input_forget", 0):
        raise UnsupportedError(f"{b.where}: input_forget is not supported")
    x = x + [None] * (12 - len(x))
    X, W, R, B, lens, h0, c0, P, w_scale, w_zp, r_scale, r_zp = x
    lstm_inputs = [_rounded_u8(b, X), _dequantized_gates(b, W, w_scale, w_zp), _dequantized_gates(b, R, r_scale, r_zp),
                   B, lens, h0, c0, P]
    return unroll(b, "LSTM", lstm_inputs, a, weigh_state=_rounded_u8)


# --- attention -----------------------------------------------------------------------------

def _heads(b: Builder, v: Value, heads: int) -> Value:
    """(B, S, N·H) -> (B, N, S, H)."""
    batch, seq, hidden = v.type.shape
    if not isinstance(hidden, int) or hidden % heads:
        raise UnsupportedError(f"{b.where}: hidden size {hidden} is not a multiple of num_heads {heads}")
    split = b.one("reshape", v, shape=(batch, seq, heads, hidden // heads))
    return b.one("transpose", split, perm=(0, 2, 1, 3))


def _merge_heads(b: Builder, v: Value) -> Value:
    """(B, N, S, H) -> (B, S, N·H)."""
    batch, heads, seq, size = v.type.shape
    return b.one("reshape", b.one("transpose", v, perm=(0, 2, 1, 3)), shape=(batch, seq, heads * size))


def _positions(b: Builder, n: Dim) -> Value:
    return b.one("range", shape=(n,), dtype=DType.i64)


def _key_mask_bias(b: Builder, mask: Value, batch: Dim, seq: Dim, total: Dim, fill: float, like: Value) -> Value:
    """The additive bias of a key mask, broadcastable to the scores (B, N, S, T): a vector
    of key lengths (B) keeps keys j < length; a 0/1 mask (B, T) or (B, S, T) keeps the ones."""
    zero, masked = b.const(0.0, like=like), b.const(fill, like=like)
    if mask.type.rank == 1:
        if mask.type.shape[0] != batch:
            raise UnsupportedError(f"{b.where}: a mask_index of shape {mask.type} (start and end positions) is not supported")
        lengths = b.one("unsqueeze", b.one("cast", mask, dtype=DType.i64), axes=(1,))
        keep = b.one("lt", _positions(b, total), lengths)                   # (B, T)
        shape = (batch, 1, 1, total)
    elif mask.type.rank in (2, 3):
        keep = b.one("not", b.one("eq", mask, b.const(0, like=mask)))
        shape = (batch, 1, 1, total) if mask.type.rank == 2 else (batch, 1, seq, total)
    else:
        raise UnsupportedError(f"{b.where}: a mask of rank {mask.type.rank} is not supported")
    return b.one("reshape", b.one("where", keep, zero, masked), shape=shape)


def _causal_bias(b: Builder, seq: Dim, total: Dim, fill: float, like: Value) -> Value:
    """0 where key j <= query i, ``fill`` after it: (S, T)."""
    later = b.one("gt", b.one("unsqueeze", _positions(b, total), axes=(0,)),
                  b.one("unsqueeze", _positions(b, seq), axes=(1,)))
    return b.one("where", later, b.const(fill, like=like), b.const(0.0, like=like))


def _biases(b: Builder, a: dict, mask: Value | None, attention_bias: Value | None, batch: Dim, seq: Dim, total: Dim,
            like: Value) -> list[Value]:
    """Attention's and MultiHeadAttention's additive biases: the key mask's, the causal one
    (unidirectional), then attention_bias; masked scores get mask_filter_value."""
    fill = float(a.get("mask_filter_value", -10000.0))
    biases = [_key_mask_bias(b, mask, batch, seq, total, fill, like)] if mask is not None else []
    if a.get("unidirectional", 0):
        biases.append(_causal_bias(b, seq, total, fill, like))
    return biases + ([attention_bias] if attention_bias is not None else [])


def _attend(b: Builder, q: Value, k: Value, v: Value, scale: float, biases: list[Value], softcap: float = 0.0,
            sink: Value | None = None) -> Value:
    """``compose.attention`` over heads (B, N, S, H), its result's heads merged: (B, S, N·H)."""
    return _merge_heads(b, compose.attention(b, q, k, v, scale, biases, softcap, sink))


@contrib("Attention")
def _attention(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Self-attention of input (B, S, D): [q, k, v] = input @ weights + bias, split into
    num_heads heads; softmax(q·kᵀ·scale + mask) · v.  The mask_index is key lengths (B), or a
    0/1 mask (B, T) or (B, S, T); masked scores get mask_filter_value added."""
    _refuse_extra(b, x, {4: "past", 6: "past_sequence_length"}, {1: "present"})
    if a.get("do_rotary", 0):
        raise UnsupportedError(f"{b.where}: do_rotary is not supported")
    inp, weights, bias, mask, attention_bias = x[0], x[1], optional(x, 2), optional(x, 3), optional(x, 5)
    heads = int(a["num_heads"])
    batch, seq, _ = inp.type.shape
    width = weights.type.shape[1]
    sizes = tuple(a.get("qkv_hidden_sizes") or (width // 3,) * 3)
    if sum(sizes) != width:
        raise UnsupportedError(f"{b.where}: qkv_hidden_sizes {list(sizes)} do not add up to the weights' {width}")
    qkv = b.one("matmul", inp, weights)
    if bias is not None:
        qkv = b.one("add", qkv, bias)
    bounds = np.cumsum((0,) + sizes)
    q, k, v = (_heads(b, b.one("slice", qkv, axes=(2,), starts=(int(lo),), ends=(int(hi),), steps=(1,)), heads)
               for lo, hi in zip(bounds[:-1], bounds[1:]))
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(sizes[0] // heads)
    return [_attend(b, q, k, v, scale, _biases(b, a, mask, attention_bias, batch, seq, seq, inp))]


@contrib("MultiHeadAttention")
def _multi_head_attention(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Attention of query (B, S, D) over key (B, L, D) and value (B, L, Dv) already
    projected; bias (D + D + Dv) is added to them; key_padding_mask as Attention's mask."""
    _refuse_extra(b, x, {6: "past_key", 7: "past_value"}, {1: "present_key", 2: "present_value"})
    query, key, value = x[0], optional(x, 1), optional(x, 2)
    bias, mask, attention_bias = optional(x, 3), optional(x, 4), optional(x, 5)
    if key is None or value is None or key.type.rank != 3 or value.type.rank != 3 or query.type.rank != 3:
        raise UnsupportedError(f"{b.where}: only separate 3-D query, key and value are supported (not packed QKV/KV)")
    heads = int(a["num_heads"])
    batch, seq, width = query.type.shape
    total = key.type.shape[1]
    if bias is not None:
        ends = (width, 2 * width, bias.type.shape[0])
        parts = [b.one("slice", bias, axes=(0,), starts=(lo,), ends=(hi,), steps=(1,))
                 for lo, hi in zip((0,) + ends[:2], ends)]
        query, key, value = (b.one("add", t, p) for t, p in zip((query, key, value), parts))
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(width // heads)
    biases = _biases(b, a, mask, attention_bias, batch, seq, total, query)
    return [_attend(b, _heads(b, query, heads), _heads(b, key, heads), _heads(b, value, heads), scale, biases)]


def _rotate(b: Builder, v: Value, ids: Value, cos_cache: Value, sin_cache: Value, rotary: int,
            interleaved: bool) -> Value:
    """Heads (B, N, S, H) with each head's first ``rotary`` features rotated in pairs by the
    angles of cos_cache/sin_cache at positions ``ids`` (B|1, S): (x1, x2) -> (x1·cos - x2·sin,
    x2·cos + x1·sin), the pairs being (x[i], x[i + d/2]), or (x[2i], x[2i+1]) when interleaved."""
    batch, heads, seq, size = v.type.shape
    half = rotary // 2
    cos = b.one("unsqueeze", b.one("gather", cos_cache, ids, axis=0), axes=(1,))     # (B|1, 1, S, half)
    sin = b.one("unsqueeze", b.one("gather", sin_cache, ids, axis=0), axes=(1,))
    cos = b.one("slice", cos, axes=(3,), starts=(0,), ends=(half,), steps=(1,))
    sin = b.one("slice", sin, axes=(3,), starts=(0,), ends=(half,), steps=(1,))

    def part(start: int, end: int, step: int = 1) -> Value:
        return b.one("slice", v, axes=(3,), starts=(start,), ends=(end,), steps=(step,))
    if interleaved:
        x1, x2 = part(0, rotary, 2), part(1, rotary, 2)
    else:
        x1, x2 = part(0, half), part(half, rotary)
    out1 = b.one("sub", b.one("mul", x1, cos), b.one("mul", x2, sin))
    out2 = b.one("add", b.one("mul", x2, cos), b.one("mul", x1, sin))
    if interleaved:                                      # put the pairs back side by side
        pairs = b.one("concat", b.one("unsqueeze", out1, axes=(4,)), b.one("unsqueeze", out2, axes=(4,)), axis=4)
        rotated = b.one("reshape", pairs, shape=(batch, heads, seq, rotary))
    else:
        rotated = b.one("concat", out1, out2, axis=3)
    return rotated if rotary == size else b.one("concat", rotated, part(rotary, size), axis=3)


def _offset_positions(b: Builder, start: Value, seq: Dim) -> Value:
    """Positions start .. start + S - 1 as (1|B, S) from a start offset (1|B)."""
    return b.one("add", b.one("unsqueeze", _positions(b, seq), axes=(0,)),
                 b.one("unsqueeze", b.one("cast", start, dtype=DType.i64), axes=(1,)))


@contrib("RotaryEmbedding")
def _rotary_embedding(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Each head's first rotary_embedding_dim features rotated by the angles at position_ids
    (B, S), or at start .. start + S - 1 for a start offset (B)."""
    if a.get("is_packed_batching", 0):
        raise UnsupportedError(f"{b.where}: is_packed_batching is not supported")
    inp, position_ids, cos_cache, sin_cache = x
    if inp.type.rank == 4:                               # (B, N, S, H)
        heads_first, v = True, inp
    else:                                                # (B, S, N·H)
        heads = int(a.get("num_heads", 0))
        if heads <= 0:
            raise UnsupportedError(f"{b.where}: a 3-D input needs num_heads")
        heads_first, v = False, _heads(b, inp, heads)
    seq, size = v.type.shape[2:]
    ids = _offset_positions(b, position_ids, seq) if position_ids.type.rank == 1 else position_ids
    rotated = _rotate(b, v, ids, cos_cache, sin_cache, int(a.get("rotary_embedding_dim", 0)) or size,
                      bool(a.get("interleaved", 0)))
    return [rotated if heads_first else _merge_heads(b, rotated)]


def _placed(b: Builder, past: Value, new: Value, past_lengths: Value, total: int) -> Value:
    """The cache (B, Nk, total, H) after a step: past[:, :, j] for j < past_lengths[b] ((B|1)), then
    the S new rows, then zeros.  The new rows are moved into place by a 0/1 matrix (B, 1, total, S)."""
    batch, heads, length, size = past.type.shape
    if total > length:
        room = b.one("expand", b.const(0.0, like=past), shape=(batch, heads, total - length, size))
        past = b.one("concat", past, room, axis=2)
    rows = b.one("reshape", _positions(b, total), shape=(1, 1, total, 1))
    start = b.one("reshape", past_lengths, shape=(past_lengths.type.shape[0], 1, 1, 1))
    offset = b.one("sub", rows, start)                                           # (B, 1, total, 1)
    steps = new.type.shape[2]
    places = b.one("eq", offset, b.one("reshape", _positions(b, steps), shape=(1, 1, 1, steps)))
    moved = b.one("matmul", b.one("cast", places, dtype=new.type.dtype), new)
    return b.one("where", b.one("lt", rows, start), past, moved)


def _visible_bias(b: Builder, positions: Value, lengths: Value, total: int, causal: bool, window: int,
                  like: Value) -> Value:
    """0 where query s (at ``positions`` (B|1, S)) sees key j, the lowest float elsewhere:
    j < lengths[b], j <= the query's position when causal, and fewer than ``window`` keys
    back when window >= 0.  (B|1, 1, S, total)."""
    keys = b.one("reshape", _positions(b, total), shape=(1, 1, total))
    at = b.one("unsqueeze", positions, axes=(2,))                                # (B|1, S, 1)
    seen = b.one("lt", keys, b.one("reshape", lengths, shape=(lengths.type.shape[0], 1, 1)))
    if causal:
        seen = b.one("and", seen, b.one("le", keys, at))
    if window >= 0:
        seen = b.one("and", seen, b.one("gt", keys, b.one("sub", at, b.const(window, like=at))))
    lowest = float(np.finfo(like.type.dtype.numpy).min)
    return b.one("unsqueeze", b.one("where", seen, b.const(0.0, like=like), b.const(lowest, like=like)), axes=(1,))


@contrib("GroupQueryAttention")
def _group_query_attention(b: Builder, x: list[Value], a: dict) -> list[Value]:
    """Attention of num_heads query heads over kv_num_heads key/value heads, each shared by
    num_heads / kv_num_heads query heads.  Query (B, S, N·H), key and value (B, S, Nk·H) (or
    the three packed in query) are S new tokens; past_key/past_value (B, Nk, P, H) hold the
    tokens before them, P_b = seqlens_k[b] + 1 - S of them, none in a first prompt
    (total_sequence_length = S).  The new token s is at position P_b + s; q/k_norm_weight
    RMS-normalize each head, and do_rotary rotates q and k at their positions (position_ids when
    given; in a first prompt position_ids[0, 0] + s, as ONNX Runtime reads it).  present_key
    and present_value are the cache with the new (rotated) k and v written at P_b, zeros after:
    (B, Nk, max(total_sequence_length, P), H).  Query s sees key j when j < seqlens_k[b] + 1,
    j <= its position (causal) and within local_window_size of it (when >= 0)."""
    _refuse_extra(b, x, {12: "k_scale", 13: "v_scale", 16: "query_seqlens"}, {3: "output_qk"})
    if a.get("sliding_window_cache", 0):
        raise UnsupportedError(f"{b.where}: sliding_window_cache is not supported")
    query, key, value, past_key, past_value, seqlens_k, total_length = (optional(x, i) for i in range(7))
    heads, kv_heads = int(a["num_heads"]), int(a["kv_num_heads"])
    if heads % kv_heads:
        raise OnnxImportError(f"{b.where}: num_heads {heads} is not a multiple of kv_num_heads {kv_heads}")
    batch, seq, width = query.type.shape
    if key is None:                                      # packed: (B, S, (N + 2·Nk)·H)
        size = width // (heads + 2 * kv_heads)
        ends = (heads * size, (heads + kv_heads) * size, width)
        query, key, value = (b.one("slice", query, axes=(2,), starts=(lo,), ends=(hi,), steps=(1,))
                             for lo, hi in zip((0,) + ends[:2], ends))
    q, k, v = _heads(b, query, heads), _heads(b, key, kv_heads), _heads(b, value, kv_heads)
    size = q.type.shape[3]
    cached = past_key is not None and past_key.type.shape[2] != 0
    if cached and not all(isinstance(n, int) for n in (seq, past_key.type.shape[2])):
        raise UnsupportedError(f"{b.where}: a past cache needs static lengths, got S={seq}, P={past_key.type.shape[2]}")
    # the cache's length is the output's shape: compiled in (a compilation per value)
    total = int(b.need_known(total_length, "total_sequence_length")) if cached else seq
    first_prompt = total == seq
    lengths = b.one("cast", b.one("add", seqlens_k, b.const(1, like=seqlens_k)), dtype=DType.i64)
    steps = b.one("unsqueeze", _positions(b, seq), axes=(0,))                    # (1, S)
    if first_prompt:
        past_lengths, positions = b.const(np.zeros(1, np.int64)), steps
    else:
        past_lengths = b.one("sub", lengths, b.const(seq, like=lengths))         # P_b
        positions = b.one("add", b.one("unsqueeze", past_lengths, axes=(1,)), steps)
    if optional(x, 14) is not None:
        eps = float(a.get("qk_norm_epsilon", 1e-6))
        q = _rms_norm(b, q, x[14], float(a.get("q_norm_epsilon", eps)), -1)
        k = _rms_norm(b, k, x[15], float(a.get("k_norm_epsilon", eps)), -1)
    if a.get("do_rotary", 0):
        cos_cache, sin_cache, position_ids = x[7], x[8], optional(x, 9)
        ids = positions
        if position_ids is not None and first_prompt:
            first = b.one("slice", position_ids, axes=(0, 1), starts=(0, 0), ends=(1, 1), steps=(1, 1))
            ids = _offset_positions(b, b.one("reshape", first, shape=(1,)), seq)
        elif position_ids is not None:
            ids = position_ids
        rotary, interleaved = 2 * cos_cache.type.shape[1], bool(a.get("rotary_interleaved", 0))
        q = _rotate(b, q, ids, cos_cache, sin_cache, rotary, interleaved)
        k = _rotate(b, k, ids, cos_cache, sin_cache, rotary, interleaved)
    present_length = max(total, past_key.type.shape[2]) if past_key is not None else seq
    if present_length != seq:                            # else the new rows are the whole cache
        k, v = (_placed(b, p, n, past_lengths, present_length) for p, n in ((past_key, k), (past_value, v)))
    window = int(a.get("local_window_size", -1))
    if window >= 0 and not a.get("causal", 1):
        raise UnsupportedError(f"{b.where}: local_window_size needs causal 1")
    biases = [_visible_bias(b, positions, lengths, present_length, bool(a.get("causal", 1)), window, q)]
    if optional(x, 10) is not None:
        biases.append(x[10])
    sink = optional(x, 11)
    if sink is None and a.get("smooth_softmax", 0):
        sink = b.const(np.zeros(heads, q.type.dtype.numpy))
    scale = float(a.get("scale", 0.0)) or 1.0 / math.sqrt(size)
    group = heads // kv_heads
    y = _attend(b, q, compose.repeat_heads(b, k, group), compose.repeat_heads(b, v, group), scale, biases,
                float(a.get("softcap", 0.0)), sink)
    return [y, k, v]
