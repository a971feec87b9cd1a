"""Decompositions shared by the torch and ONNX importers, each written once: ops that
minic has no single op for, spelled in the ones it has.

Every function takes a builder ``b`` with three things, which both importers have:
``b.one(op, *inputs, **attrs)`` adds one node and returns its output (``b.many``: all of them),
``b.const(data, like=None)`` adds a constant (of ``like``'s dtype), ``b.where``
names the node being converted, for messages, and ``b.fresh_symbol(hint)`` names a size the
data decides.

- Windows (``compose_windows.py``): convolutions and pools of any rank; here
  ``adaptive_max`` and ``adaptive_weights``.  Resampling: ``compose_resample.py``.
- Per-axis maps: ``along`` (a constant [out, in] matrix on one axis: adaptive average
  pools, linear resize) and ``pick`` (a gather of constant indices: nearest resize).
- ``pad`` (negative pads crop; wrap is circular); ``compress`` (slices kept by a run-time mask).
- Elementwise families: ``leaky_relu``, ``elu`` (Celu, Selu), ``sign`` (NaN stays NaN), ``is_special`` (isnan/isinf),
  ``tile``, ``vector_norm`` (p = 0, 1, 2, inf, -inf, any).
- ``moments`` (mean, 1/std) of the norms that compute their own statistics.
- ``attention`` (masks, softcap, sink, safe softmax) and ``repeat_heads``: torch's
  scaled_dot_product_attention, ONNX Runtime's Attention, MultiHeadAttention, GroupQueryAttention.
- ``sorted_along``: sort/topk by ranks, stable, NaN ordered as the largest value.
- ``grid_sample``: ONNX's GridSample, torch's grid_sample, from elementwise ops and gathers.
- Recurrent layers (``compose_recurrent.py``): RNN, GRU, LSTM, unrolled or a loop at run time.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence

import numpy as np

from minic.errors import UnsupportedError, UserError
from minic.ir.graph import Value
from minic.ir.ops.layout import END
from minic.ir.types import DType, dim_mul


def static(b: Any, v: Value, axis: int, what: str) -> int:
    """``v``'s size along ``axis``, which ``what`` needs known at import."""
    n = v.type.shape[axis]
    if not isinstance(n, int):
        raise UnsupportedError(f"{b.where}: {what} needs a static size along axis {axis}, got {n}")
    return n


def move_last(b: Any, v: Value, axis: int) -> tuple[Value, tuple[int, ...]]:
    """``v`` with ``axis`` moved to the end, and the permutation that moves it back."""
    rank = v.type.rank
    if axis == rank - 1:
        return v, tuple(range(rank))
    perm = tuple(k for k in range(rank) if k != axis) + (axis,)
    return b.one("transpose", v, perm=perm), tuple(int(k) for k in np.argsort(perm))


def put_back(b: Any, v: Value, back: tuple[int, ...]) -> Value:
    return v if back == tuple(range(len(back))) else b.one("transpose", v, perm=back)


def swap_last(b: Any, v: Value) -> Value:
    """``v`` with its last two axes swapped (a batched matrix transposed)."""
    return b.one("transpose", v, perm=tuple(range(v.type.rank - 2)) + (v.type.rank - 1, v.type.rank - 2))


# --- elementwise families ---------------------------------------------------------------------

def _rectified(b: Any, v: Value, negative: Value, positive: Value, negative_at_zero: bool) -> Value:
    """``negative`` where v < 0 (v <= 0 when ``negative_at_zero``), else ``positive``: at 0 only
    the named branch is read (an infinite slope times 0 would be NaN)."""
    zero = b.const(0, like=v)
    if negative_at_zero:
        return b.one("where", b.one("gt", v, zero), positive, negative)
    return b.one("where", b.one("lt", v, zero), negative, positive)


def leaky_relu(b: Any, v: Value, slope: float | Value, negative_at_zero: bool = False) -> Value:
    """slope·x below 0, x above (torch's leaky_relu and rrelu at inference, ONNX's LeakyRelu and
    PRelu, whose slope is a tensor)."""
    slope = slope if isinstance(slope, Value) else b.const(slope, like=v)
    return _rectified(b, v, b.one("mul", v, slope), v, negative_at_zero)


def elu(b: Any, v: Value, alpha: float, scale: float = 1.0, input_scale: float = 1.0,
        negative_at_zero: bool = False) -> Value:
    """scale·alpha·(e^(input_scale·x) - 1) below 0, scale·x above: torch's elu; ONNX's Elu, Celu
    (input_scale 1/alpha) and Selu (scale gamma, the negative branch at 0 too)."""
    inner = v if input_scale == 1.0 else b.one("mul", v, b.const(input_scale, like=v))
    negative = b.one("mul", b.const(alpha, like=v), b.one("sub", b.one("exp", inner), b.const(1, like=v)))
    out = _rectified(b, v, negative, v, negative_at_zero)
    return out if scale == 1.0 else b.one("mul", out, b.const(scale, like=v))


def sign(b: Any, v: Value) -> Value:
    """-1, 0 or 1 by the sign of x in x's type, NaN staying NaN (unsigned: 0 or 1)."""
    zero = b.const(0, like=v)
    pos = b.one("cast", b.one("gt", v, zero), dtype=v.type.dtype)
    if v.type.dtype in (DType.u8, DType.u16, DType.u32, DType.u64):
        return pos
    s = b.one("sub", pos, b.one("cast", b.one("lt", v, zero), dtype=v.type.dtype))
    return b.one("where", b.one("eq", v, v), s, v) if v.type.dtype.is_float else s


def is_special(b: Any, v: Value, nan: bool, positive: bool = True, negative: bool = True) -> Value:
    """Where v is NaN (``nan``), else where it is +inf / -inf (those asked for); never, for integers."""
    if not v.type.dtype.is_float or not (nan or positive or negative):
        return b.one("expand", b.const(np.array(False)), shape=v.type.shape)
    if nan:
        return b.one("not", b.one("eq", v, v))
    if positive and negative:
        return b.one("eq", b.one("abs", v), b.const(np.inf, like=v))
    return b.one("eq", v, b.const(np.inf if positive else -np.inf, like=v))


def tile(b: Any, v: Value, reps: Sequence[int]) -> Value:
    """v repeated reps[i] times along axis i (leading axes added where reps is longer): v viewed
    as [1, s0, 1, s1, ...], expanded to [r0, s0, r1, s1, ...], each pair flattened."""
    shape = (1,) * (len(reps) - v.type.rank) + tuple(v.type.shape)
    pairs = b.one("reshape", v, shape=tuple(d for s in shape for d in (1, s)))
    grown = b.one("expand", pairs, shape=tuple(d for r, s in zip(reps, shape) for d in (r, s)))
    return b.one("reshape", grown, shape=tuple(dim_mul(r, s) for r, s in zip(reps, shape)))


def vector_norm(b: Any, v: Value, p: float, axes: tuple[int, ...], keepdims: bool) -> Value:
    """The p-norm over ``axes``: sqrt(Σx²), Σ|x|, max|x| (inf), min|x| (-inf), the count of
    nonzeros (0), else (Σ|x|^p)^(1/p)."""
    if v.type.rank == 0:
        return b.one("abs", v) if p != 0 else b.one("cast", b.one("not", b.one("eq", v, b.const(0, like=v))),
                                                    dtype=v.type.dtype)
    red = lambda op, x: b.one(op, x, axes=tuple(axes), keepdims=keepdims)          # noqa: E731
    if p == 2:
        return b.one("sqrt", red("reduce_sum", b.one("mul", v, v)))
    mag = b.one("abs", v)
    if p in (np.inf, -np.inf):
        return red("reduce_max" if p > 0 else "reduce_min", mag)
    if p == 0:
        return red("reduce_sum", b.one("cast", b.one("gt", mag, b.const(0, like=v)), dtype=v.type.dtype))
    if p == 1:
        return red("reduce_sum", mag)
    return b.one("pow", red("reduce_sum", b.one("pow", mag, b.const(p, like=v))), b.const(1.0 / p, like=v))


def any_all(b: Any, v: Value, axes: tuple[int, ...], keepdims: bool, every: bool) -> Value:
    """any (all, when ``every``) of v read as bools over ``axes``: a max (min) of 0/1 bytes, as
    minic's reductions take numbers; an empty reduction's identity (0 for max, 255 for min) reads
    False for any and True for all, as in PyTorch and ONNX."""
    flags = v if v.type.dtype == DType.bool else b.one("cast", v, dtype=DType.bool)
    if v.type.rank == 0:
        return flags
    red = b.one("reduce_min" if every else "reduce_max", b.one("cast", flags, dtype=DType.u8), axes=axes,
                keepdims=keepdims)
    return b.one("cast", red, dtype=DType.bool)


def moments(b: Any, x: Value, axes: tuple[int, ...], eps: float) -> tuple[Value, Value, Value]:
    """(x - mean, mean, 1/sqrt(var + eps)) over ``axes`` (kept as size 1): the statistics of
    instance and batch-statistics norms, and layer norm's saved ones."""
    mean = b.one("reduce_mean", x, axes=axes, keepdims=True)
    centered = b.one("sub", x, mean)
    var = b.one("reduce_mean", b.one("mul", centered, centered), axes=axes, keepdims=True)
    return centered, mean, b.one("rsqrt", b.one("add", var, b.const(eps, like=x)))


# --- attention --------------------------------------------------------------------------------

def repeat_heads(b: Any, x: Value, groups: int) -> Value:
    """[..., H, S, E] -> [..., H·groups, S, E], each head ``groups`` times in a row (grouped-query
    attention's shared key/value heads)."""
    *batch, heads, s, e = x.type.shape
    wide = b.one("expand", b.one("unsqueeze", x, axes=(len(batch) + 1,)), shape=(*batch, heads, groups, s, e))
    return b.one("reshape", wide, shape=(*batch, dim_mul(heads, groups), s, e))


def attention(b: Any, q: Value, k: Value, v: Value, scale: float, masks: Sequence[Value] = (), softcap: float = 0.0,
              sink: Value | None = None, safe: bool = False) -> Value:
    """softmax(q·kᵀ·scale + masks)·v over the last two axes (q [..., S, E], k [..., T, E], v [..., T, Ev]).

    A boolean mask keeps the scores where it is true (-inf elsewhere), another is added.  ``safe``:
    a row masked everywhere attends to nothing (zeros, torch's safe softmax), not NaN.  A softcap c
    bounds the scaled scores to c·tanh(scores / c) before the masks; a ``sink`` (one score per
    head, q being [B, N, S, E]) takes its share of the softmax and adds no value."""
    scores = b.one("matmul", q, swap_last(b, k))
    scores = b.one("mul", scores, b.const(scale, like=scores))
    if softcap > 0:
        cap = b.const(softcap, like=scores)
        scores = b.one("mul", b.one("tanh", b.one("div", scores, cap)), cap)
    lowest = b.const(-np.inf, like=scores) if safe or any(m.type.dtype == DType.bool for m in masks) else None
    for m in masks:
        scores = b.one("where", m, scores, lowest) if m.type.dtype == DType.bool else b.one("add", scores, m)
    last = scores.type.rank - 1
    if sink is None:
        probs = b.one("softmax", scores, axis=last)
    else:
        batch, heads, seq, total = scores.type.shape
        column = b.one("expand", b.one("reshape", sink, shape=(1, heads, 1, 1)), shape=(batch, heads, seq, 1))
        probs = b.one("softmax", b.one("concat", scores, column, axis=last), axis=last)
        probs = b.one("slice", probs, axes=(last,), starts=(0,), ends=(total,), steps=(1,))
    if safe:
        dead = b.one("eq", b.one("reduce_max", scores, axes=(last,), keepdims=True), lowest)
        probs = b.one("where", dead, b.const(0, like=probs), probs)
    return b.one("matmul", probs, v)


# --- layout -----------------------------------------------------------------------------------

def pad(b: Any, v: Value, pads: Sequence[int], mode: str = "constant", value: float = 0.0) -> Value:
    """``v`` padded by ``pads`` (begins..., then ends...) in ``mode`` (constant, reflect, edge, or
    wrap: circular); a negative entry crops that side (constant mode): a slice after the pad."""
    rank = v.type.rank
    grow, crop = tuple(max(p, 0) for p in pads), tuple(max(-p, 0) for p in pads)
    if any(crop) and mode != "constant":
        raise UnsupportedError(f"{b.where}: negative pads (cropping) in {mode} mode are not supported")
    y = v if not any(grow) else _wrap_pad(b, v, grow) if mode == "wrap" else \
        b.one("pad", v, pads=grow, mode=mode, value=value)
    if any(crop):
        axes = tuple(k for k in range(rank) if crop[k] or crop[rank + k])
        ends = tuple(-crop[rank + k] if crop[rank + k] else END for k in axes)
        y = b.one("slice", y, axes=axes, starts=tuple(crop[k] for k in axes), ends=ends, steps=(1,) * len(axes))
    return y if y is not v else b.one("identity", v)


def _wrap_pad(b: Any, v: Value, pads) -> Value:
    """Pad mode 'wrap' (circular): each axis grows by its own last and first entries."""
    rank = v.type.rank
    for ax in range(rank):
        lo, hi, n = pads[ax], pads[ax + rank], v.type.shape[ax]
        if not lo and not hi:
            continue
        if not isinstance(n, int) or lo > n or hi > n:
            raise UnsupportedError(f"{b.where}: 'wrap' pads ({lo}, {hi}) beyond axis {ax} of size {n}")
        cut = lambda s, e: b.one("slice", v, axes=(ax,), starts=(s,), ends=(e,), steps=(1,))
        parts = ([cut(n - lo, n)] if lo else []) + [v] + ([cut(0, hi)] if hi else [])
        v = b.one("concat", *parts, axis=ax)
    return v


def compress(b: Any, v: Value, keep: Value, axis: int) -> Value:
    """``v``'s slices along ``axis`` where ``keep`` (a vector, at most as long) is nonzero: ONNX's
    Compress, torch's masked_select and x[mask].  How many is a size the data decides: ``nonzero``
    gives the kept positions under a fresh symbol (``b.fresh_symbol``), a gather takes them."""
    count = b.fresh_symbol("kept")
    where = b.one("reshape", b.one("nonzero", keep, count=count), shape=(count,))
    return b.one("gather", v, where, axis=axis)


# --- per-axis maps ----------------------------------------------------------------------------

def along(b: Any, v: Value, axis: int, weights: np.ndarray) -> Value:
    """y[..., i, ...] = sum_j weights[i, j] · v[..., j, ...] along ``axis`` (a matmul on the last axis)."""
    moved, back = move_last(b, v, axis)
    y = b.one("matmul", moved, b.const(np.ascontiguousarray(np.asarray(weights).T), like=v))
    return put_back(b, y, back)


def pick(b: Any, v: Value, axis: int, sources: np.ndarray) -> Value:
    """y[..., i, ...] = v[..., sources[i], ...] (a gather of constant indices)."""
    return b.one("gather", v, b.const(np.asarray(sources, dtype=np.int64)), axis=axis)


def repeat_each(b: Any, v: Value, axis: int, times: int) -> Value:
    """y[..., i, ...] = v[..., i // times, ...]: nearest upsampling by a whole factor, as a
    broadcast and a reshape, so the axis may be symbolic (``T`` becomes ``2*T``)."""
    shape = v.type.shape
    wide = b.one("expand", b.one("unsqueeze", v, axes=(axis + 1,)), shape=shape[:axis + 1] + (times,) + shape[axis + 1:])
    return b.one("reshape", wide, shape=shape[:axis] + (dim_mul(times, shape[axis]),) + shape[axis + 1:])


def whole_factor(sources: Callable[[int], np.ndarray], factor: float) -> int | None:
    """``factor`` as a whole number when a nearest map with it repeats each element that many
    times: ``sources(n)``, the source index of each output of an axis of ``n``, is ``i // factor``
    for n = 1..8.  Most coordinate maps do not read n; align_corners's does, and with a factor
    of 2 and rounding to nearest repeats for every n (``(2k+1)(n-1)/(2n-1) = k + (n-1-k)/(2n-1)``),
    with other factors for none (checked to n = 3,000)."""
    if not (factor >= 2 and float(factor).is_integer()):
        return None
    k = int(factor)
    return k if all(np.array_equal(sources(n), np.arange(n * k) // k) for n in range(1, 9)) else None


def adaptive_windows(n_in: int, n_out: int) -> list[tuple[int, int]]:
    """Output cell i covers floor(i·in/out) .. ceil((i+1)·in/out) - 1 (torch's adaptive windows)."""
    return [((i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)) for i in range(n_out)]


def adaptive_weights(n_in: int, n_out: int) -> np.ndarray:
    """The [out, in] map of an adaptive average: each row averages its window."""
    w = np.zeros((n_out, n_in), np.float64)
    for i, (lo, hi) in enumerate(adaptive_windows(n_in, n_out)):
        w[i, lo:hi] = 1.0 / (hi - lo)
    return w


def adaptive_max(b: Any, v: Value, out: Sequence[int]) -> Value:
    """Adaptive max pooling over the trailing ``len(out)`` axes, one axis at a time (a max over a
    box is the max over each axis in turn): a gather of each window's cells (a short window
    repeats its last cell: max does not mind) and a max over them."""
    first = v.type.rank - len(out)
    for k, o in enumerate(out):
        axis = first + k
        n = static(b, v, axis, "adaptive max pooling")
        if n == o:
            continue
        windows = adaptive_windows(n, o)
        width = max(hi - lo for lo, hi in windows)
        cells = np.array([[min(lo + j, hi - 1) for j in range(width)] for lo, hi in windows], np.int64)
        gathered = b.one("gather", v, b.const(cells), axis=axis)          # [..., o, width, ...]
        v = b.one("reduce_max", gathered, axes=(axis + 1,), keepdims=False)
    return v


# --- sorting ----------------------------------------------------------------------------------

def sorted_along(b: Any, x: Value, axis: int, descending: bool, k: int | None = None) -> tuple[Value, Value]:
    """(values, indices) of the first ``k`` (default all) elements of x sorted along ``axis``.

    Element i's rank is how many elements come before it (smaller — larger when descending —
    or equal and earlier: a stable order, NaN as the largest value, as torch orders it); the
    j-th output is the element whose rank is j.  One [n, n] comparison per row, no new op."""
    if x.type.dtype == DType.bool:                   # compared as 0/1
        values, indices = sorted_along(b, b.one("cast", x, dtype=DType.u8), axis, descending, k)
        return b.one("cast", values, dtype=DType.bool), indices
    rank = x.type.rank
    if rank == 0:
        return b.one("identity", x), b.const(np.array(0, np.int64))
    xt, back = move_last(b, x, axis)
    n = xt.type.shape[-1]
    xi, xj = b.one("unsqueeze", xt, axes=(rank,)), b.one("unsqueeze", xt, axes=(rank - 1,))  # [.., n, 1], [.., 1, n]
    before = b.one("gt" if descending else "lt", xj, xi)
    same = b.one("eq", xi, xj)
    if xt.type.dtype.is_float:                       # NaN is the largest value
        nan_i, nan_j = b.one("not", b.one("eq", xi, xi)), b.one("not", b.one("eq", xj, xj))
        first, second = (nan_j, nan_i) if descending else (nan_i, nan_j)
        before = b.one("or", before, b.one("and", first, b.one("not", second)))
        same = b.one("or", same, b.one("and", nan_i, nan_j))
    pos = b.one("range", shape=(n,), dtype=DType.i64)
    earlier = b.one("lt", b.one("unsqueeze", pos, axes=(0,)), b.one("unsqueeze", pos, axes=(1,)))   # [n, n]: j < i
    counted = b.one("or", before, b.one("and", same, earlier))
    ranks = b.one("reduce_sum", b.one("cast", counted, dtype=DType.i64), axes=(rank,), keepdims=False)
    if k is not None and not (isinstance(n, int) and 0 <= k <= n):
        raise UserError(f"{b.where}: k = {k} is outside 0..{n}")
    wanted = pos if k is None else b.one("range", shape=(k,), dtype=DType.i64)
    hit = b.one("eq", b.one("unsqueeze", ranks, axes=(rank - 1,)), b.one("unsqueeze", wanted, axes=(1,)))  # [.., k, n]
    indices = b.one("reduce_sum", b.one("where", hit, pos, b.const(np.array(0, np.int64))), axes=(rank,),
                    keepdims=False)                                                            # [.., k]
    values = b.one("gather_elements", xt, indices, axis=rank - 1)
    return put_back(b, values, back), put_back(b, indices, back)


# --- grid sampling --------------------------------------------------------------------------

GRID_TAPS = {"nearest": (0,), "linear": (0, 1), "cubic": (-1, 0, 1, 2)}


class Arith:
    """Elementwise arithmetic on values of the coordinates' type."""

    def __init__(self, b: Any, like: Value):
        self.b, self.like = b, like

    def c(self, value) -> Value:
        return self.b.const(value, like=self.like)

    def __getattr__(self, op):
        return lambda *xs: self.b.one(op, *[x if isinstance(x, Value) else self.c(x) for x in xs])


def reflect(o: Arith, v: Value, lo: float, hi: float) -> Value:
    """ONNX's reflection of v into [lo, hi] (as many bounces as it takes)."""
    span = hi - lo

    def bounce(dx: Value, near: float, far: float) -> Value:
        n = o.floor(o.div(dx, span))
        r = o.sub(dx, o.mul(n, span))
        even = o.eq(o.sub(n, o.mul(o.floor(o.div(n, 2.0)), 2.0)), 0.0)
        return o.where(even, o.add(near, o.mul(r, 1.0 if near == lo else -1.0)),
                       o.add(far, o.mul(r, 1.0 if far == lo else -1.0)))
    below = bounce(o.sub(lo, v), lo, hi)
    above = bounce(o.sub(v, hi), hi, lo)
    return o.where(o.lt(v, lo), below, o.where(o.gt(v, hi), above, v))


def keys_cubic(o: Arith, t: Value, k: int) -> Value:
    """Keys' cubic weight of tap k (-1..2) at fraction t in [0, 1)."""
    a = -0.75
    x = {-1: o.add(t, 1.0), 0: t, 1: o.sub(1.0, t), 2: o.sub(2.0, t)}[k]
    if k in (0, 1):                              # |x| <= 1: (a+2)|x|^3 - (a+3)|x|^2 + 1
        return o.add(o.mul(o.mul(o.sub(o.mul(x, a + 2), a + 3), x), x), 1.0)
    return o.sub(o.mul(o.add(o.mul(o.sub(o.mul(x, a), 5 * a), x), 8 * a), x), 4 * a)   # 1 < |x| < 2


def grid_sample(b: Any, data: Value, grid: Value, mode: str, padding_mode: str, align_corners: int) -> Value:
    """Sample data [N, C, *spatial] at grid [N, *out, d] (normalised coordinates, reversed axes):
    ONNX's GridSample, which torch's grid_sample means too.  Per spatial axis the coordinate
    becomes a pixel coordinate (``align_corners``), is rounded (nearest) and brought inside by
    the padding mode (border: clamped, reflection: reflected; not for cubic); each
    tap of the window — 1 (nearest), 2 (linear) or 4 (cubic, Keys with a = -0.75) per axis —
    gets an index per axis, a separable weight, and one ``gather_elements`` from the input
    flattened over its spatial axes; the weighted taps are summed."""
    mode, padding, align = mode, padding_mode, bool(align_corners)
    dims = data.type.shape[2:]
    d = len(dims)
    if any(not isinstance(s, int) for s in data.type.shape[1:]) or grid.type.shape[-1] != d:
        raise UnsupportedError(f"{b.where}: grid sampling needs static sizes and a grid of {d} coordinates, "
                               f"got {list(data.type.shape)} and {list(grid.type.shape)}")
    g = grid if grid.type.dtype in (DType.f32, DType.f64) else b.one("cast", grid, dtype=DType.f32)
    o = Arith(b, g)
    n, c = data.type.shape[:2]
    out = tuple(grid.type.shape[1:-1])
    points = int(np.prod(out))
    coords, fracs = [], []
    for i, size in enumerate(dims):               # grid's last axis is (x, y, z): the spatial axes reversed
        comp = b.one("squeeze", b.one("slice", g, axes=(g.type.rank - 1,), starts=(d - 1 - i,), ends=(d - i,),
                                      steps=(1,)), axes=(g.type.rank - 1,))
        v = o.mul(o.add(comp, 1.0), (size - 1) / 2.0) if align else o.div(o.sub(o.mul(o.add(comp, 1.0), size), 1.0), 2.0)
        if mode == "nearest":
            v = o.round(v)
        lo, hi = (0.0, size - 1.0) if align else (-0.5, size - 0.5)
        # cubic pads each of its taps only (below), as torch and ONNX Runtime do: padding the
        # coordinate too moves the window (ONNX's reference does, and differs for border)
        if padding == "border" and mode != "cubic":
            v = o.where(b.one("or", o.lt(v, lo), o.gt(v, hi)), o.min(o.max(v, 0.0), size - 1.0), v)
        elif padding == "reflection" and mode != "cubic":
            v = reflect(o, v, lo, hi)
        base = v if mode == "nearest" else o.floor(v)
        coords.append((base, lo, hi))
        fracs.append(o.sub(v, base))
    flat = b.one("reshape", data, shape=(n, c, int(np.prod(dims))))
    strides = [int(np.prod(dims[i + 1:])) for i in range(d)]
    total = None
    for taps in itertools.product(GRID_TAPS[mode], repeat=d):
        index, valid, weight = None, None, None
        for i, (k, (base, lo, hi), t, size) in enumerate(zip(taps, coords, fracs, dims)):
            pos = o.add(base, float(k)) if k else base
            if mode == "nearest":                 # the reference truncates the (rounded) coordinate
                pos = b.one("cast", b.one("cast", pos, dtype=DType.i64), dtype=g.type.dtype)
            if padding == "border":
                pos = o.min(o.max(pos, 0.0), size - 1.0)
            elif padding == "reflection":
                pos = b.one("cast", b.one("cast", reflect(o, pos, lo, hi), dtype=DType.i64), dtype=g.type.dtype)
            else:
                inside = b.one("and", b.one("not", o.lt(pos, 0.0)), o.lt(pos, float(size)))
                valid = inside if valid is None else b.one("and", valid, inside)
                pos = o.min(o.max(pos, 0.0), size - 1.0)
            term = b.one("mul", b.one("cast", pos, dtype=DType.i64), b.const(np.int64(strides[i])))
            index = term if index is None else b.one("add", index, term)
            if mode != "nearest":
                w = (o.sub(1.0, t) if k == 0 else t) if mode == "linear" else keys_cubic(o, t, k)
                weight = w if weight is None else o.mul(weight, w)
        index = b.one("expand", b.one("reshape", index, shape=(n, 1, points)), shape=(n, c, points))
        picked = b.one("gather_elements", flat, index, axis=2)
        if picked.type.dtype != g.type.dtype:
            picked = b.one("cast", picked, dtype=g.type.dtype)
        if valid is not None:
            picked = b.one("where", b.one("reshape", valid, shape=(n, 1, points)), picked, o.c(0.0))
        if weight is not None:
            picked = b.one("mul", picked, b.one("reshape", weight, shape=(n, 1, points)))
        total = picked if total is None else b.one("add", total, picked)
    y = b.one("reshape", total, shape=(n, c) + out)
    return y if y.type.dtype == data.type.dtype else b.one("cast", y, dtype=data.type.dtype)
