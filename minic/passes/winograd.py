"""winograd-conv2d: ``conv2d(x, w, b){3x3, stride 1} -> A^T [ (G w G^T) ⊙ (B^T d B) ] A + b``, Winograd's
F(2x2, 3x3) (Lavin & Gray, 2016).

A 3x3 convolution's 2x2 block of outputs reads a 4x4 tile ``d`` of its input.  Moved into
Winograd's basis, the tile and the filter multiply point by point: 16 multiplies per block
and input channel where the direct form does 36.  Summed over the input channels, the
16 points are 16 independent matmuls, ``M[p] = U[p] @ V[p]`` with ``U[p]``: [Cout, Cin]
the filter transformed once here (``G g G^T``, a constant) and ``V[p]``: [Cin, tiles] the
input tiles transformed (``B^T d B``).  The matmuls run on minic's matmul kernels (the
weights as vector lanes, like a conv2d's); the transforms are sums of strided slices, a row
pass then a column pass each, and fuse into four small memory-bound kernels:

    xp = pad(x)                                   tiles of 4 at stride 2 cover the output
    R  = B^T over xp's rows     [4 a, N, C, th, Wp]
    V  = B over R's columns     [4 b, 4 a, N, C, th·tw]
    M  = matmul(U, V)           [4 b, 4 a, N, Cout, th·tw]
    Z  = A^T over M's a points  [2 i, 4 b, ...]
    y  = A over Z's b points, interleaved to [N, Cout, 2 th, 2 tw], cut to [N, Cout, H, W], + b

It pays where the image is large against the filter (``pays``): transformed, the filter is
16/9 as large, and at B = 1 a 7x7 image's convolution mostly streams its weights.
"""
from __future__ import annotations

import numpy as np

from minic.ir.graph import Value
from minic.passes.rewrite import Match, rule

# F(2x2, 3x3): y = A^T [(G g G^T) ⊙ (B^T d B)] A, for a 4x4 tile d and a 3x3 filter g.
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], dtype=np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], dtype=np.float64)

MIN_OUTPUT = 14          # the smallest output side it pays on (benchmarks/RESULTS.md, "Sixth session")


def pays(out: Value) -> bool:
    """Outputs of at least 14x14 (49 tiles); on fewer tiles the 16/9 larger filter costs what the
    multiplies save (resnet50's 7x7 stage measured no faster)."""
    return min(out.type.shape[2:]) >= MIN_OUTPUT


def _combine(m: Match, x: Value, axis: int, rows: np.ndarray, step: int, count: int, base: str) -> Value:
    """sum_k rows[r, k] · x[.., k : k + step·count : step, ..] (along ``axis``) for every row r of
    ``rows`` (a transform's matrix: entries 0 and ±1, the same number of them in each row), stacked
    on a new axis 0.  Step 2 transforms every tile at once (tile t's entry k lies at 2t + k); step 1
    (count 1) the points along an axis that holds them.  Spelled as sum_j sign_j · S_j, S_j the j-th
    term of every row stacked (a concat of slices, which fuses into the sum): the kernel ends at
    the sum, a stored result that the next contraction reads as it is."""
    terms = [sorted(map(int, np.flatnonzero(r)), key=lambda k: -r[k]) for r in rows]   # each row's + terms first
    total = None
    for ks in zip(*terms):                          # the j-th term of every row
        stacked = m.emit("concat", [m.emit("unsqueeze", [m.emit("slice", [x], f"{base}_s", axes=(axis,), starts=(k,),
                                                                   ends=(k + step * (count - 1) + 1,), steps=(step,))],
                                           f"{base}_s", axes=(0,)) for k in ks], f"{base}_s", axis=0)
        signs = np.array([r[k] for r, k in zip(rows, ks)], dtype=x.type.dtype.numpy)
        if (signs < 0).any():
            key = ("winograd sign", tuple(signs), x.type.rank)       # one constant per sign pattern
            if key not in m.memo:
                m.memo[key] = m.constant("winograd_sign", signs.reshape((-1,) + (1,) * x.type.rank))
            stacked = m.emit("mul", [stacked, m.memo[key]], f"{base}_t")
        total = stacked if total is None else m.emit("add", [total, stacked], f"{base}_t")
    return total


@rule("conv2d")
def winograd_f2x3(m: Match) -> Value | None:
    """conv2d(x, w, b){3x3, stride 1} -> A^T [(G w G^T) ⊙ (B^T d B)] A + b, per 4x4 tile d"""
    node, a, out = m.node, m.node.attrs, m.node.outputs[0]
    x, w, *bias = node.inputs
    # A constant 3x3 filter (and bias), stride 1, one group, static output sides, and large enough to pay.
    if not (w.is_constant and all(v.is_constant for v in bias) and w.type.shape[2:] == (3, 3)
            and a.stride == (1, 1) and a.dilation == (1, 1) and a.groups == 1
            and all(isinstance(d, int) for d in out.type.shape[2:]) and pays(out)):
        return None
    n, c, height, width = x.type.shape
    cout = w.type.shape[0]
    out_h, out_w = out.type.shape[2:]
    th, tw = -(-out_h // 2), -(-out_w // 2)                     # tiles down and across
    top, left, bottom, right = a.padding
    pads = (0, 0, top, left, 0, 0, 2 * th + 2 - height - top, 2 * tw + 2 - width - left)
    xp = m.emit("pad", [x], f"{x.name}_tiles", pads=tuple(max(p, 0) for p in pads))
    if min(pads) < 0:                                        # padding past the last tile: cut it off
        xp = m.emit("slice", [xp], f"{x.name}_tiles", axes=(2, 3), starts=(0, 0), ends=(2 * th + 2, 2 * tw + 2),
                    steps=(1, 1))
    rows = _combine(m, xp, 2, BT, 2, th, f"{x.name}_bt")                    # [4 a, N, C, th, 2 tw + 2]
    v = _combine(m, rows, 4, BT, 2, tw, f"{x.name}_v")                       # [4 b, 4 a, N, C, th, tw]
    # the matmul reads the tiles as one axis, in its row loop (the division hoisted out of its reduction)
    v = m.emit("reshape", [v], f"{x.name}_v", shape=(4, 4, n, c, th * tw))
    # U[b, a] = (G g G^T)[a, b], in float64 and rounded once
    u = np.einsum("ai,ocij,bj->baoc", G, w.data.astype(np.float64), G)[:, :, None]
    mm = m.emit("matmul", [m.constant(f"{w.name}_winograd", u.astype(w.data.dtype)), v], f"{out.name}_m")
    z = _combine(m, mm, 1, AT, 1, 1, f"{out.name}_z")    # over a: [2 i, 4 b, 1, N, Cout, tiles]
    y = _combine(m, z, 1, AT, 1, 1, f"{out.name}_y")     # over b: [2 j, 2 i, 1, 1, N, Cout, tiles]
    y = m.emit("reshape", [y], f"{out.name}_y", shape=(2, 2, n, cout, th, tw))   # [j, i, N, Cout, ty, tx]
    y = m.emit("transpose", [y], f"{out.name}_y", perm=(2, 3, 4, 1, 5, 0))         # [N, Cout, ty, i, tx, j]
    y = m.emit("reshape", [y], f"{out.name}_y", shape=(n, cout, 2 * th, 2 * tw))
    if (2 * th, 2 * tw) != (out_h, out_w):                  # odd sizes: the last tiles' second row or column
        y = m.emit("slice", [y], f"{out.name}_y", axes=(2, 3), starts=(0, 0), ends=(out_h, out_w),
                   steps=(1, 1))
    if bias:
        y = m.emit("add", [y, m.constant(f"{bias[0].name}_hw", bias[0].data[:, None, None])], f"{out.name}_b")
    m.retire(w, *bias)
    return y
