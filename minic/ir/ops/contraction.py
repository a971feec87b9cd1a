"""Contractions: matmul (batched, broadcasting), matmul_integer (8-bit operands, i32 sums), gemm, conv2d,
conv2d_integer (8-bit operands, i32 sums).  Each output element
is a sum over the contracted axes, so a fused epilogue (bias, activation,
residual) applies to the accumulator before the single store."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from minic.ir.compute import Reduce, Site, broadcast_index
from minic.ir.loops import BinOp, Cast, Expr, Select, const, dim_expr
from minic.ir.ops import OpKind, define
from minic.ir.ops.elementwise import arg
from minic.ir.ops.shapes import broadcast, require
from minic.ir.ops.window import out_hw, symmetric, taps, windows
from minic.ir.types import DType, TensorType


def _matmul_infer(attrs, ts: list[TensorType]) -> list[TensorType]:
    a, b = ts
    require(a.dtype == b.dtype and a.dtype.is_float, f"matmul needs two float inputs of one dtype, got {a} and {b}")
    require(a.rank >= 1 and b.rank >= 1, "matmul needs inputs of rank >= 1")
    k = b.shape[-2] if b.rank > 1 else b.shape[0]
    require(a.shape[-1] == k, f"matmul: contracted dims differ: {list(a.shape)} @ {list(b.shape)}")
    # numpy's rule: the batch axes broadcast; a 1-D operand has no row (a) or column (b) in the result.
    out = broadcast(a.shape[:-2], b.shape[:-2]) + a.shape[-2:-1] + (b.shape[-1:] if b.rank > 1 else ())
    return [TensorType(out, a.dtype)]


def matmul_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    a, b = site.inputs
    ra, rb = a.type.rank, b.type.rank
    # Work in the rank >= 2 view of both operands: a 1-D a is [1, K], a 1-D b is [K, 1].
    full = list(index)
    if ra == 1:
        full.insert(len(full) - (rb > 1), const(0))
    if rb == 1:
        full.append(const(0))
    batch, i, j = full[:-2], full[-2], full[-1]
    k = site.fresh.var("k")
    K = a.type.shape[-1]
    a_index = (k,) if ra == 1 else broadcast_index(batch, a.type.shape[:-2]) + (i, k)
    b_index = (k,) if rb == 1 else broadcast_index(batch, b.type.shape[:-2]) + (k, j)
    return Reduce("sum", ((k, dim_expr(K)),), BinOp("mul", a.at(a_index), b.at(b_index)))


define("matmul", OpKind.CONTRACTION, _matmul_infer, lambda attrs, a, b: np.matmul(a, b), matmul_rule,
       arity=(2, 2), doc="matmul(a, b)[..., i, j] = sum_k a[..., i, k] · b[..., k, j]", torch="matmul")


def _matmul_integer_infer(attrs, ts: list[TensorType]) -> list[TensorType]:
    a, b = ts
    eight = (DType.u8, DType.i8)
    require(a.dtype in eight and b.dtype in eight, f"matmul_integer needs u8 or i8 inputs, got {a} and {b}")
    require(a.rank >= 2 and b.rank == 2, f"matmul_integer needs a of rank >= 2 and a 2-D b, got {a} and {b}")
    require(a.shape[-1] == b.shape[0], f"matmul_integer: contracted dims differ: {list(a.shape)} @ {list(b.shape)}")
    return [TensorType(a.shape[:-1] + b.shape[1:], DType.i32)]


def matmul_integer_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    a, b = site.inputs
    k = site.fresh.var("k")
    product = BinOp("mul", Cast(DType.i32, a.at(index[:-1] + (k,))), Cast(DType.i32, b.at((k, index[-1]))))
    return Reduce("sum", ((k, dim_expr(a.type.shape[-1])),), product)


define("matmul_integer", OpKind.CONTRACTION, _matmul_integer_infer,
       lambda attrs, a, b: np.matmul(a.astype(np.int32), b.astype(np.int32)), matmul_integer_rule, arity=(2, 2),
       doc="matmul_integer(a, b)[..., i, j] = sum_k i32(a[..., i, k]) · i32(b[k, j]): 8-bit operands, "
           "exact i32 sums (ONNX's MatMulInteger without zero points; docs/int8.md)",
       torch=lambda t, a, b: t.torch.matmul(a.to(t.torch.int32), b.to(t.torch.int32)))


@dataclass(frozen=True)
class GemmAttrs:
    trans_a: bool = False
    trans_b: bool = False
    alpha: float = 1.0
    beta: float = 1.0


def _gemm_infer(attrs: GemmAttrs, ts: list[TensorType]) -> list[TensorType]:
    a, b = ts[0], ts[1]
    require(a.rank == 2 and b.rank == 2, f"gemm needs 2-D operands, got {a} and {b}")
    require(a.dtype == b.dtype and a.dtype.is_float, f"gemm needs float operands of one dtype, got {a} and {b}")
    m, k = a.shape[::-1] if attrs.trans_a else a.shape
    k2, n = b.shape[::-1] if attrs.trans_b else b.shape
    require(k == k2, f"gemm: contracted dims differ: {k} and {k2}")
    if len(ts) == 3:
        require(broadcast(ts[2].shape, (m, n)) == (m, n),
                f"gemm: c {list(ts[2].shape)} does not broadcast to [{m}, {n}]")
        require(ts[2].dtype == a.dtype, "gemm: c has another dtype")
    return [TensorType((m, n), a.dtype)]


def gemm(attrs: GemmAttrs, a, b, c=None) -> np.ndarray:
    a = a.T if attrs.trans_a else a
    b = b.T if attrs.trans_b else b
    y = attrs.alpha * (a @ b) if attrs.alpha != 1.0 else a @ b
    if c is not None:
        y = y + (attrs.beta * c if attrs.beta != 1.0 else c)
    return y.astype(a.dtype)


def gemm_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    attrs = site.attrs
    a, b = site.inputs[:2]
    i, j = index
    k = site.fresh.var("k")
    K = a.type.shape[0] if attrs.trans_a else a.type.shape[1]
    product = BinOp("mul", a.at((k, i) if attrs.trans_a else (i, k)), b.at((j, k) if attrs.trans_b else (k, j)))
    dt = a.type.dtype
    y: Expr = Reduce("sum", ((k, dim_expr(K)),), product)
    if attrs.alpha != 1.0:
        y = BinOp("mul", const(attrs.alpha, dt), y)
    if len(site.inputs) == 3:
        term = arg(site.inputs[2], index)
        y = BinOp("add", y, term if attrs.beta == 1.0 else BinOp("mul", const(attrs.beta, dt), term))
    return y


def _torch_gemm(t, a, b, c=None):
    attrs = t.attrs
    left, right = (a.t() if attrs.trans_a else a), (b.t() if attrs.trans_b else b)
    if c is not None:
        return t.torch.addmm(c, left, right, beta=attrs.beta, alpha=attrs.alpha)
    return left @ right * attrs.alpha if attrs.alpha != 1.0 else left @ right


define("gemm", OpKind.CONTRACTION, _gemm_infer, gemm, gemm_rule, GemmAttrs, arity=(2, 3),
       doc="gemm(a, b, c?) = alpha · op(a) @ op(b) + beta · c, op = transpose if asked", torch=_torch_gemm)


@dataclass(frozen=True)
class Conv2dAttrs:
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)    # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)
    groups: int = 1

    def check(self) -> None:
        require(len(self.stride) == 2 and len(self.padding) == 4 and len(self.dilation) == 2,
                "conv2d: stride and dilation need 2 values, padding 4")
        require(min(self.stride + self.dilation) >= 1 and min(self.padding) >= 0 and self.groups >= 1,
                f"conv2d: stride/dilation/groups must be >= 1 and padding >= 0, got {self}")


def _conv_infer(attrs: Conv2dAttrs, ts: list[TensorType]) -> list[TensorType]:
    x, w = ts[0], ts[1]
    require(x.rank == 4 and w.rank == 4, f"conv2d needs NCHW input and OIHW weight, got {x} and {w}")
    require(x.dtype == w.dtype and x.dtype.is_float, "conv2d needs float input and weight of one dtype")
    require(all(isinstance(d, int) for d in x.shape[1:2] + w.shape), f"conv2d needs static C and a static weight, got {x} and {w}")
    c, o, g = x.shape[1], w.shape[0], attrs.groups
    require(c % g == 0 and o % g == 0 and w.shape[1] == c // g,
            f"conv2d: {c} input channels, {o} filters of {w.shape[1]} channels do not fit groups={g}")
    if len(ts) == 3:
        require(ts[2].shape == (o,), f"conv2d: bias must be [{o}], got {list(ts[2].shape)}")
    oh, ow = out_hw(attrs, x.shape[2], x.shape[3], w.shape[2:])
    return [TensorType((x.shape[0], o, oh, ow), x.dtype)]


def _window_sums(attrs: Conv2dAttrs, x: np.ndarray, w: np.ndarray, pad: int | float = 0) -> np.ndarray:
    """sum_{c,p,q} x[n, c, i·s + p·d, j·s + q·d] · w[o, c, p, q] per group, x padded with ``pad``."""
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    g = attrs.groups
    out = out_hw(attrs, x.shape[2], x.shape[3], (kh, kw))
    xp = np.pad(x, ((0, 0), (0, 0), attrs.padding[0::2], attrs.padding[1::2]), constant_values=pad)  # rows, columns
    cols = windows(xp, (kh, kw), attrs.stride, attrs.dilation, out).reshape(n, g, cg, kh, kw, *out)
    y = np.einsum("ngcijyx,gocij->ngoyx", cols, w.reshape(g, o // g, cg, kh, kw), optimize=True)
    return y.reshape(n, o, *out)


def conv2d(attrs: Conv2dAttrs, x, w, b=None) -> np.ndarray:
    y = _window_sums(attrs, x, w)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y.astype(x.dtype)


def _window_sum(site: Site, index: tuple[Expr, ...], pad: Expr, integer: bool) -> Reduce:
    """conv2d's sum over the window at ``index`` (taps in the padding read ``pad``).  An integer one
    widens its 8-bit factors to i32 and runs its input channels innermost: the reduction the int8
    micro-kernel takes four terms a step (``schedule.templates.quad_products``)."""
    x, w = site.inputs[:2]
    attrs = site.attrs
    n, o, oy, ox = index
    out_channels, cg, kh, kw = w.type.shape
    per_group = out_channels // attrs.groups
    c, p, q = site.fresh.var("c"), site.fresh.var("p"), site.fresh.var("q")
    channel = c if attrs.groups == 1 else BinOp("add", BinOp("mul", BinOp("div", o, const(per_group)), const(cg)), c)
    _, _, inside, pixel = taps(attrs, x, (n, channel, oy, ox), p, q)
    if any(attrs.padding):
        pixel = Select(inside, pixel, pad)
    weight = w.at((o, c, p, q))
    if integer:
        pixel, weight = Cast(DType.i32, pixel), Cast(DType.i32, weight)
    loops = ((p, const(kh)), (q, const(kw)), (c, const(cg))) if integer else ((c, const(cg)), (p, const(kh)), (q, const(kw)))
    return Reduce("sum", loops, BinOp("mul", pixel, weight))


def conv2d_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    # taps in the zero padding contribute nothing
    y: Expr = _window_sum(site, index, const(0.0, site.inputs[0].type.dtype), integer=False)
    if len(site.inputs) == 3:
        y = BinOp("add", y, site.inputs[2].at((index[1],)))
    return y


define("conv2d", OpKind.CONTRACTION, _conv_infer, conv2d, conv2d_rule, Conv2dAttrs, arity=(2, 3),
       doc="conv2d(x, w, b?)[n,o,i,j] = b[o] + sum_{c,p,q} x[n,c,i·s+p·d,j·s+q·d] · w[o,c,p,q] (per group)",
       torch=lambda t, x, w, b=None: t.F.conv2d(x, w, b, t.attrs.stride, symmetric(t.attrs.padding, "conv2d"),
                                                t.attrs.dilation, t.attrs.groups))


def _conv_integer_infer(attrs: Conv2dAttrs, ts: list[TensorType]) -> list[TensorType]:
    x, w = ts[0], ts[1]
    eight = (DType.u8, DType.i8)
    require(x.dtype in eight and w.dtype in eight, f"conv2d_integer needs u8 or i8 inputs, got {x} and {w}")
    require(len(ts) == 2 or (ts[2].rank == 0 and ts[2].dtype == x.dtype),
            f"conv2d_integer: the padding value must be a scalar {x.dtype.value}, got {ts[-1]}")
    y = _conv_infer(attrs, [TensorType(x.shape, DType.f32), TensorType(w.shape, DType.f32)])[0]
    return [TensorType(y.shape, DType.i32)]


def conv2d_integer(attrs: Conv2dAttrs, x, w, z=None) -> np.ndarray:
    pad = 0 if z is None else int(z)
    return _window_sums(attrs, x.astype(np.int64), w.astype(np.int64), pad).astype(np.int32)


def conv2d_integer_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    pad = site.inputs[2].at(()) if len(site.inputs) == 3 else const(0, x.type.dtype)
    return _window_sum(site, index, pad, integer=True)


def _torch_pads(padding: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """(left, right, top, bottom): torch's F.pad order for minic's (top, left, bottom, right)."""
    top, left, bottom, right = padding
    return left, right, top, bottom


define("conv2d_integer", OpKind.CONTRACTION, _conv_integer_infer, conv2d_integer, conv2d_integer_rule, Conv2dAttrs,
       arity=(2, 3),
       doc="conv2d_integer(x, w, z?)[n,o,i,j] = sum_{c,p,q} i32(x[n,c,i·s+p·d,j·s+q·d]) · i32(w[o,c,p,q]) (per "
           "group): 8-bit operands, exact i32 sums, taps in the padding read z (0 if absent; ONNX's ConvInteger "
           "pads with x's zero point and subtracts it; minic subtracts it after: docs/int8.md)",
       torch=lambda t, x, w, z=None: t.F.conv2d(
           t.F.pad(x.to(t.torch.float64), _torch_pads(t.attrs.padding), value=0 if z is None else float(z)),
           w.to(t.torch.float64), None, t.attrs.stride, 0, t.attrs.dilation, t.attrs.groups).to(t.torch.int32))
