"""explicit-padding: ``conv2d(x){padding=p} -> conv2d(pad(x, p, 0)){padding=0}``, and
``max_pool2d(x){padding=p} -> max_pool2d(pad(x, p, -inf)){padding=0}``.

A padded window reads some taps outside its input; lowered as it is, every tap
tests its row and column against the input's bounds, inside the innermost loop
of the convolution.  With the padding made a node of its own, the window's taps
are all in bounds and its loops run unguarded.  The ``pad`` itself costs nothing
extra after fusion: ``fuse-groups`` gives it to its producer's kernel, which then
stores straight into the interior of the padded buffer and fills the border.
"""
from __future__ import annotations

import math
from dataclasses import replace

from minic.ir.graph import Node
from minic.passes.rewrite import Match, rule

# The value each window reads from its padding: 0 adds nothing to a sum, -inf never wins a max.
PAD_VALUE = {"conv2d": 0.0, "max_pool2d": -math.inf}


@rule(*PAD_VALUE)
def pad_apart(m: Match) -> Node | None:
    """conv2d(x){padding=p} -> conv2d(pad(x, p, 0)){padding=0};  max_pool2d alike with -inf"""
    node, x = m.node, m.node.inputs[0]
    if not any(node.attrs.padding) or not all(isinstance(d, int) for d in x.type.shape[2:]):
        return None
    if node.op == "max_pool2d" and node.attrs.ceil_mode:     # its last window may overhang the padding too
        return None
    top, left, bottom, right = node.attrs.padding
    key = ("pad", id(x), node.attrs.padding, PAD_VALUE[node.op])   # two windows may share one pad
    if key not in m.memo:
        m.memo[key] = m.emit("pad", [x], f"{x.name}_padded", pads=(0, 0, top, left, 0, 0, bottom, right),
                             value=PAD_VALUE[node.op])
    return replace(node, inputs=[m.memo[key], *node.inputs[1:]], attrs=replace(node.attrs, padding=(0,) * 4))
