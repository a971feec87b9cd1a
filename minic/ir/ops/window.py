"""Sliding-window ops over the two spatial axes of NCHW tensors: max_pool2d,
avg_pool2d, global_avg_pool.  ``windows`` is shared with conv2d."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from minic.errors import UnsupportedError
from minic.ir.compute import Operand, Reduce, Site, clamp, count, in_range, initial, reduce_over
from minic.ir.loops import BinOp, Expr, Select, const, dim_expr, fold
from minic.ir.ops import OpKind, define
from minic.ir.ops.shapes import require
from minic.ir.types import Dim, DType, TensorType, dim_floordiv, dim_sum
from minic.limits import ensure_array_fits


def pooled_size(size: Dim, k: int, stride: int, pad_lo: int, pad_hi: int, dilation: int, ceil_mode: bool) -> Dim:
    """Output length of a window sweep (PyTorch's rule, ceil_mode included).  Over a symbolic
    size it is a derived dim, ``(H + pads - span) / stride + 1`` (the runtime checks it is >= 1)."""
    if not isinstance(size, int):
        require(not ceil_mode, f"a ceil_mode window over a symbolic size {size}: its last window depends on it")
        return dim_floordiv(size, pad_lo + pad_hi - dilation * (k - 1) - 1, stride, 1)
    span = size + pad_lo + pad_hi - dilation * (k - 1) - 1
    require(span >= 0, f"window of {k} (dilation {dilation}) is larger than the padded input {size + pad_lo + pad_hi}")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_lo:
        out -= 1                         # the last window would start in the right padding
    return out


def windows(xp: np.ndarray, k: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
            out: tuple[int, int]) -> np.ndarray:
    """All windows of padded NCHW ``xp``, as an array [N, C, KH, KW, OH, OW]."""
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = k, stride, dilation, out
    ensure_array_fits(xp.shape[:2] + (kh, kw, oh, ow), xp.dtype, "the windows of a convolution or pool")
    spans = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))   # [N, C, y, x, span]
    taken = spans[:, :, :sh * (oh - 1) + 1:sh, :sw * (ow - 1) + 1:sw, ::dh, ::dw]
    return taken.transpose(0, 1, 4, 5, 2, 3).copy()


@dataclass(frozen=True)
class PoolAttrs:
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)    # top, left, bottom, right
    dilation: tuple[int, int] = (1, 1)
    ceil_mode: bool = False
    count_include_pad: bool = True                        # avg_pool2d only

    def check(self) -> None:
        require(len(self.kernel) == 2 and len(self.stride) == 2 and len(self.padding) == 4
                and len(self.dilation) == 2, "pool: kernel, stride, dilation need 2 values, padding 4")
        require(min(self.kernel + self.stride + self.dilation) >= 1 and min(self.padding) >= 0,
                f"pool: kernel/stride/dilation must be >= 1 and padding >= 0, got {self}")


def out_hw(attrs, h: Dim, w: Dim, kernel: tuple[int, int], ceil_mode: bool = False) -> tuple[Dim, Dim]:
    """Output height and width of the window sweep of ``attrs`` (stride, padding, dilation: a pool's or conv2d's)."""
    return tuple(pooled_size(n, k, s, lo, hi, d, ceil_mode) for n, k, s, lo, hi, d
                 in zip((h, w), kernel, attrs.stride, attrs.padding[:2], attrs.padding[2:], attrs.dilation))


def taps(attrs, x: Operand, at: tuple[Expr, ...], p: Expr, q: Expr) -> tuple[Expr, Expr, Expr, Expr]:
    """Tap (p, q) of the window at output ``at`` = (n, c, oy, ox) of NCHW ``x``: the input row and
    column it reads, whether it lies inside the input (not in the padding), and x's element there
    (clamped into x: a tap in the padding reads an edge, which the caller masks)."""
    n, c, oy, ox = at
    h, w = (BinOp("sub", BinOp("add", BinOp("mul", o, const(s)), BinOp("mul", k, const(d))), const(before))
            for o, k, s, d, before in zip((oy, ox), (p, q), attrs.stride, attrs.dilation, attrs.padding))
    inside = fold("and", [in_range(i, const(0), dim_expr(size)) for i, size in zip((h, w), x.type.shape[2:])])
    return h, w, inside, x.at((n, c, clamp(h, x.type.shape[2]), clamp(w, x.type.shape[3])))


def _pool_infer(attrs: PoolAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(x.rank == 4 and x.dtype.is_float, f"pool needs a float NCHW input, got {x}")
    return _window_type(attrs, x)


def _max_pool_infer(attrs: PoolAttrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]                                  # a max of integers too (ONNX MaxPool takes int8, uint8)
    require(x.rank == 4 and x.dtype != DType.bool, f"max_pool2d needs a numeric NCHW input, got {x}")
    return _window_type(attrs, x)


def _window_type(attrs: PoolAttrs, x: TensorType) -> list[TensorType]:
    return [TensorType(x.shape[:2] + out_hw(attrs, x.shape[2], x.shape[3], attrs.kernel, attrs.ceil_mode), x.dtype)]


def _pool_windows(attrs: PoolAttrs, x: np.ndarray, pad_value: float, extra_value: float) -> np.ndarray:
    """The windows of x padded by the explicit padding (``pad_value``), then by whatever
    the last ceil_mode window reaches past it (``extra_value``)."""
    out = out_hw(attrs, x.shape[2], x.shape[3], attrs.kernel, attrs.ceil_mode)
    # padding is (top, left, bottom, right): (top, bottom) for the rows, (left, right) for the columns
    xp = np.pad(x, ((0, 0), (0, 0), attrs.padding[0::2], attrs.padding[1::2]), constant_values=pad_value)
    # the rows and columns the last window reaches, per spatial axis
    need = [(o - 1) * s + d * (k - 1) + 1 for o, s, d, k in zip(out, attrs.stride, attrs.dilation, attrs.kernel)]
    extra = ((0, 0), (0, 0)) + tuple((0, max(0, n - have)) for n, have in zip(need, xp.shape[2:]))
    xp = np.pad(xp, extra, constant_values=extra_value)
    return windows(xp, attrs.kernel, attrs.stride, attrs.dilation, out)


def max_pool2d(attrs: PoolAttrs, x: np.ndarray) -> np.ndarray:
    lowest = float(initial("max", DType.of(x.dtype)).value)      # never wins a max: -inf, or 0 for u8
    return _pool_windows(attrs, x, lowest, lowest).max(axis=(2, 3))


def avg_pool2d(attrs: PoolAttrs, x: np.ndarray) -> np.ndarray:
    sums = _pool_windows(attrs, x, 0.0, 0.0).sum(axis=(2, 3))
    # The divisor counts the cells of each window that lie in the input, plus
    # those in the explicit padding when count_include_pad (never ceil_mode's extra).
    mask = np.ones((1, 1) + x.shape[2:], x.dtype)
    count = _pool_windows(attrs, mask, float(attrs.count_include_pad), 0.0).sum(axis=(2, 3))
    return (sums / count).astype(x.dtype)


def _window(site: Site, index: tuple[Expr, ...]):
    """The reduction variables of a pooling window and, per tap, what ``taps`` says of it
    (the input row and column, whether it lies inside the input, the element)."""
    p, q = site.fresh.var("p"), site.fresh.var("q")
    loops = ((p, const(site.attrs.kernel[0])), (q, const(site.attrs.kernel[1])))
    return (loops, *taps(site.attrs, site.inputs[0], index, p, q))


def max_pool2d_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    loops, _, _, inside, element = _window(site, index)
    return Reduce("max", loops, Select(inside, element, initial("max", element.dtype)))


def avg_pool2d_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    loops, _, _, inside, element = _window(site, index)
    dt = element.dtype
    total = Reduce("sum", loops, Select(inside, element, const(0.0, dt)))
    # The divisor counts the window's cells in the input, plus those in the
    # explicit padding when count_include_pad (never ceil_mode's overhang).
    a, x = site.attrs, site.inputs[0]
    loops, h, w, counted, _ = _window(site, index)
    if a.count_include_pad:
        counted = fold("and", [in_range(i, const(-before), dim_expr(dim_sum([(n, 1)], after))) for i, n, before, after
                               in zip((h, w), x.type.shape[2:], a.padding[:2], a.padding[2:])])
    cells = Reduce("sum", loops, Select(counted, const(1.0, dt), const(0.0, dt)))
    return BinOp("div", total, cells)


def symmetric(padding: tuple[int, int, int, int], op: str) -> tuple[int, int]:
    """(top, left) of a padding torch can spell (it has no asymmetric padding)."""
    top, left, bottom, right = padding
    if (top, left) != (bottom, right):
        raise UnsupportedError(f"{op}: torch has no asymmetric padding {list(padding)}")
    return top, left


def _torch_max_pool(t, x):
    a = t.attrs
    return t.F.max_pool2d(x, a.kernel, a.stride, symmetric(a.padding, "max_pool2d"), a.dilation, ceil_mode=a.ceil_mode)


def _torch_avg_pool(t, x):
    a = t.attrs
    pad = symmetric(a.padding, "avg_pool2d")
    if a.dilation != (1, 1):
        raise UnsupportedError("avg_pool2d: torch has no dilated average pooling")
    return t.F.avg_pool2d(x, a.kernel, a.stride, pad, ceil_mode=a.ceil_mode, count_include_pad=a.count_include_pad)


define("max_pool2d", OpKind.WINDOW, _max_pool_infer, max_pool2d, max_pool2d_rule, PoolAttrs,
       doc="max_pool2d(x)[n,c,i,j] = max over the window at (i·stride, j·stride)", torch=_torch_max_pool,
       sample="pool")
define("avg_pool2d", OpKind.WINDOW, _pool_infer, avg_pool2d, avg_pool2d_rule, PoolAttrs,
       doc="avg_pool2d(x)[n,c,i,j] = mean over the window at (i·stride, j·stride)", torch=_torch_avg_pool,
       sample="pool")


def _global_infer(attrs, ts: list[TensorType]) -> list[TensorType]:
    x = ts[0]
    require(x.rank >= 3 and x.dtype.is_float, f"global_avg_pool needs a float N,C,spatial... input, got {x}")
    return [TensorType(x.shape[:2] + (1,) * (x.rank - 2), x.dtype)]


def global_avg_pool_rule(site: Site, index: tuple[Expr, ...]) -> Expr:
    x = site.inputs[0]
    total = reduce_over(site, x, tuple(range(2, x.type.rank)), True, index, "sum")
    return BinOp("div", total, count(x.type.shape[2:], x.type.dtype))


define("global_avg_pool", OpKind.REDUCTION, _global_infer,
       lambda attrs, x: x.mean(axis=tuple(range(2, x.ndim)), keepdims=True).astype(x.dtype), global_avg_pool_rule,
       doc="global_avg_pool(x)[n,c,1,1] = mean over all spatial positions",
       torch=lambda t, x: t.F.adaptive_avg_pool2d(x, 1) if x.dim() == 4 else x.mean(dim=tuple(range(2, x.dim())), keepdim=True))
