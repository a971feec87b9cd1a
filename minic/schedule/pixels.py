"""A 1x1 convolution's image as one row of pixels, for the int8 template's columns as lanes.

A 1x1 conv of stride 1 is a matmul of its weights by the image's pixels: which row a pixel
is on does not matter to it.  NCHW keeps a plane's rows one after another, so the same bytes
read as ``[N, C, 1, H·W]`` are one row of H·W pixels, and a tile of 32 columns (the VNNI
template's columns as lanes: ``schedule.templates._columns_as_lanes``) runs across the rows:

    for h < H: for w < W:                          for h < 1: for w < H·W:
      acc += (i32)x[n, c, h + p, w + q] * ..   ->    acc += (i32)x[n, c, h + p, w + q] * ..   x: [N, C, 1, H·W]
      y[n, o, h, w] = epilogue(acc, r[n, o, h, w])   y[n, o, h, w] = epilogue(..)             y, r: [N, O, 1, H·W]

The indices do not change: with h = 0 and the window's loops p, q of one iteration each,
``[.., h, w]`` of a ``[.., 1, H·W]`` buffer is the pixel w of the plane.
"""
from __future__ import annotations

from dataclasses import replace

from minic.ir.loops import Const, Expr, For, Function, Load, Stmt, Store, free_vars, map_expr, map_stmt, substitute
from minic.ir.loops_simplify import simplify
from minic.schedule.nest import at_zero, loads, stores


def flat_pixels(f: Function, h: For, w: For, lanes: int) -> Function:
    """``f`` (a conv with rows ``h`` and columns ``w``) run on one row of H·W pixels, when every
    buffer it reads or writes at a pixel is indexed ``[.., h, w]`` there (a 1x1 window of stride
    1, no padding) and tiles of ``lanes`` pixels then waste fewer lanes: no more than 1/16 of the
    pixels, and fewer than rows of W columns do (resnet50's 56 x 56 planes: 3,136 pixels are 98
    whole tiles, where each row of 56 is two tiles that overlap by 8 columns; its 28 x 28 ones,
    too short for columns as lanes, 25 tiles for 784 pixels).  Else ``f`` as it was."""
    if not all(isinstance(t.extent, Const) and t.start == Const(0) for t in (h, w)):
        return f
    H, W = h.extent.value, w.extent.value
    flat_waste = -(H * W) % lanes
    row_waste = H * (-W % lanes) if W >= lanes else H * W
    if H == 1 or flat_waste * 16 > H * W or flat_waste >= row_waste:
        return f
    once, pixel = at_zero(f.body), {h.var.name, w.var.name}
    touched = (*loads(f.body), *stores(f.body))
    accesses = [(a.buffer, a.index) for a in touched if any(free_vars(e) & pixel for e in a.index)]
    if not accesses or not all(len(index) >= 2 and tuple(b.shape[-2:]) == (H, W)
                               and not any(free_vars(e) & pixel for e in index[:-2])
                               and simplify(substitute(index[-2], once)) == h.var
                               and simplify(substitute(index[-1], once)) == w.var for b, index in accesses):
        return f
    flat = {b.name: replace(b, shape=tuple(b.shape[:-2]) + (1, H * W)) for b, _ in accesses}
    if len(accesses) != sum(a.buffer.name in flat for a in touched):
        return f                     # a buffer also read elsewhere than at a pixel

    def expr(e: Expr) -> Expr:
        return map_expr(e, lambda x: replace(x, buffer=flat[x.buffer.name])
                        if isinstance(x, Load) and x.buffer.name in flat else None)

    def stmt(s: Stmt) -> Stmt:
        s = map_stmt(s, expr, stmt)
        if isinstance(s, Store) and s.buffer.name in flat:
            return replace(s, buffer=flat[s.buffer.name])
        if isinstance(s, For) and s.var.name in pixel:
            return replace(s, extent=Const(1 if s.var == h.var else H * W))
        return s
    return replace(f, params=tuple(flat.get(b.name, b) for b in f.params), body=stmt(f.body))
