"""Post-training quantization: an f32 graph's matmuls put on int8, calibrated on data.

ONNX Runtime's ``quantize_static`` writes a QDQ model; this is the same recipe done by
minic on its own graph (``precision="int8"`` of the minic and interp backends), so the
two can be compared -- and with the QNN leg, which quantizes the same way:

    0. the float graph as quantization should see it (``PREPARE``): batch norms folded
       into their convolutions, constants folded (ONNX Runtime's ``quant_pre_process``);
    1. calibrate: run the graph (the interpreter) on the calibration inputs -- the
       example inputs and seeded random ones like them (``minic.inputs.calibration_inputs``)
       -- and keep the range [lo, hi] of every contraction's activations (min-max, 0
       included, so that zero is exact);
    2. quantize: in front of each matmul, gemm or conv2d with constant f32 weights, the
       QDQ pair of its activations, and its weights as integers:

         x  ->  (f32(q) - zx) · sx      q = u8(clip(round(x · rx) + zx, 0, 255))
                                         sx = (hi - lo) / 255, zx = round(-lo / sx), rx = 1 / sx
         @w ->  f32(@q) · @sw           @q = i8(round(@w / @sw)), @sw = max|w| / 127 per
                                         output channel (a matmul's column, a conv's filter)

       u8 activations with a zero point and symmetric s8 weights, one scale per output
       channel: the pair x86's VNNI multiplies, and ONNX Runtime's defaults on x86.  The
       activations are quantized by a product with the reciprocal scale rx, not a division
       by sx (ONNX's QuantizeLinear): a vector division is several times slower than a
       product, and every int8 kernel's epilogue quantizes each value it stores; the two
       differ by about an ulp of x / sx before rounding, far below the quantum;
    3. skip connections in 8 bits, where that costs no accuracy: a residual ``add(y, x)``
       whose skip input x is quantized for a contraction already (a ResNet block's input,
       read by the block's first conv and by its closing add) reads x's 8-bit copy too, so
       x's f32 is never stored -- only its bytes, a quarter of the traffic -- and no kernel
       requantizes the sum for the next block.  ONNX Runtime's quantizer puts every Add on
       8 bits; here it is kept only if the quantized graph's error against f32 on the
       calibration inputs grows by at most ``SKIP_ERROR_GROWTH`` (NNCF's and Intel Neural
       Compressor's accuracy-aware tuning likewise send back to float what costs accuracy):
       ResNet-50 loses nothing by it, BERT's post-norm stream (its outputs *are* the stream,
       and out-of-range tokens clip) loses 15-50 %, and keeps f32;
    4. the ``-O2`` rule fake-quantization-to-integer (``quantized.py``) then finds the
       pairs and runs each contraction on integers, exactly as for a QDQ file ONNX Runtime wrote.

Besides the contractions (and the skip connections of step 3), norms, softmax and activations
stay in f32, where quantizing them would cost accuracy for little speed.  The error against f32
is judged by ``minic.verify.tolerance.QDQ8``.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from minic.debug.stats import diff
from minic.ir.graph import Graph, Node, Value
from minic.ir.interpret import interpret
from minic.ir.types import DType
from minic.passes.quantized import dequantized, known
from minic.passes.rewrite import Match, clone, rewrite, rule

CONTRACTIONS = ("matmul", "gemm", "conv2d")
SKIP_ERROR_GROWTH = 1.10          # step 3 is kept if the calibration error grows by at most 10 %
PREPARE = ["fold-constant-gather", "fold-constants", "eliminate-identity", "fold-batchnorm", "eliminate-dead-code"]


def calibrate(graph: Graph, feeds: Sequence[Sequence[np.ndarray]]) -> dict[str, tuple[float, float]]:
    """The range [lo, hi] (0 included) of every contraction's f32 activations over ``feeds``, by value name."""
    return observe(graph, feeds)[0]


def observe(graph: Graph, feeds: Sequence[Sequence[np.ndarray]]) -> tuple[dict[str, tuple[float, float]],
                                                                        list[list[np.ndarray]]]:
    """One run of ``graph`` on each of ``feeds``: the calibrated ranges, and its outputs."""
    g = clone(graph)
    wanted = list(dict.fromkeys(n.inputs[0] for n in g.nodes
                                if n.op in CONTRACTIONS and n.inputs[0].type.dtype == DType.f32
                                and not n.inputs[0].is_constant))
    outputs, g.outputs = g.outputs, wanted + g.outputs
    ranges: dict[str, tuple[float, float]] = {}
    results = []
    for inputs in feeds:
        arrays = interpret(g, list(inputs))
        for v, a in zip(wanted, arrays):
            finite = a[np.isfinite(a)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
            old = ranges.get(v.name, (0.0, 0.0))
            ranges[v.name] = (min(old[0], lo), max(old[1], hi))
        results.append(arrays[len(wanted):])
    return ranges, results


def quantize_int8(graph: Graph, feeds: Sequence[Sequence[np.ndarray]]) -> Graph:
    """``graph`` with each contraction's activations and constant weights quantized to 8 bits
    (QDQ pairs, calibrated on ``feeds``), and its skip connections where that costs no accuracy
    (step 3), ready for the fake-quantization-to-integer rule."""
    from minic.passes.manager import optimize
    graph = optimize(graph, passes=PREPARE)
    ranges, reference = observe(graph, feeds)
    contraction = quantize_contraction_rule(ranges)
    quantized = rewrite(graph, [contraction])
    streamed = rewrite(graph, [contraction, skip_in_8_bits])
    if _reads(streamed) == _reads(quantized):                 # no skip connection to read in 8 bits
        return quantized
    def measured(g: Graph) -> float:              # its weights dequantized once, not once a feed
        return error(optimize(g, passes=["fold-constants"]), feeds, reference)
    return streamed if measured(streamed) <= SKIP_ERROR_GROWTH * measured(quantized) else quantized


def _reads(graph: Graph) -> list[list[str]]:
    return [[v.name for v in n.inputs] for n in graph.nodes]


def error(graph: Graph, feeds: Sequence[Sequence[np.ndarray]], reference: list[list[np.ndarray]]) -> float:
    """The largest difference of ``graph``'s outputs from ``reference`` over ``feeds``, over each
    output's largest magnitude (``minic.debug.stats.diff``'s max_rel, as bisect measures); an
    element that turns inf or NaN counts as infinitely wrong."""
    worst = 0.0
    for inputs, want in zip(feeds, reference):
        for got, ref in zip(interpret(graph, list(inputs)), want):
            d = diff(ref, got)
            worst = max(worst, math.inf if d.lost else d.max_rel)
    return worst


def quantize_contraction_rule(ranges: dict[str, tuple[float, float]]):
    @rule(*CONTRACTIONS)
    def quantize_contraction(m: Match) -> Node | None:
        """matmul(x, @w) -> matmul((f32(q(x)) - zx) · sx, f32(@q) · @sw);  gemm, conv2d alike"""
        node = m.node
        x, w = node.inputs[0], node.inputs[1]
        if (x.name not in ranges or dequantized(m, x) is not None or w.type.dtype != DType.f32
                or w.type.rank != (4 if node.op == "conv2d" else 2)):
            return None
        if node.op == "gemm" and node.attrs.trans_a:
            return None
        data = known(m, w)
        if data is None:
            return None
        contracted = (1, 2, 3) if node.op == "conv2d" else (1,) if node.op == "gemm" and node.attrs.trans_b else (0,)
        base = node.outputs[0].name
        return m.rebuilt(node.op, [_activations(m, x, ranges[x.name], base), _weights(m, data, contracted, base),
                                   *node.inputs[2:]], **vars(node.attrs))
    return quantize_contraction


@rule("add")
def skip_in_8_bits(m: Match) -> Node | None:
    """add(y, x) -> add(y, (f32(q(x)) - zx) · sx), where x is quantized for a contraction already"""
    y, x = m.node.inputs if len(m.node.inputs) == 2 else (None, None)
    if x is None or y.type != x.type or y.type.dtype != DType.f32 or x.is_constant or y.is_constant:
        return None
    here = m.graph.nodes.index(m.node)
    copies = [m.memo.get(("activations", v)) for v in (y, x)]
    copies = [c if c is not None and m.graph.nodes.index(m.producer(c)) < here else None for c in copies]
    if copies == [None, None]:
        return None
    return m.rebuilt("add", [c or v for c, v in zip(copies, (y, x))])


def _activations(m: Match, x: Value, bounds: tuple[float, float], base: str) -> Value:
    """x's QDQ pair at u8: scale and zero point from its calibrated range; one pair for every
    contraction that reads x (``m.memo``), as a QDQ file has one per tensor."""
    if ("activations", x) in m.memo:
        return m.memo["activations", x]
    lo, hi = bounds
    scale = np.float32((hi - lo) / 255) if hi > lo else np.float32(1.0)
    zero = np.float32(np.clip(np.rint(-lo / scale), 0, 255))
    s, z = m.constant(base + "_sx", np.array(scale)), m.constant(base + "_zx", np.array(zero))
    inverse = m.constant(base + "_rx", np.array(np.float32(1) / scale))
    q = m.emit("add", [m.emit("round", [m.emit("mul", [x, inverse], base + "_xs")], base + "_xr"), z], base + "_xz")
    q = m.emit("min", [m.emit("max", [q, m.constant(base + "_lo", np.array(0, np.float32))], base + "_xc"),
                       m.constant(base + "_hi", np.array(255, np.float32))], base + "_xc")
    q = m.emit("cast", [q], base + "_xq", dtype=DType.u8)
    back = m.emit("sub", [m.emit("cast", [q], base + "_xf", dtype=DType.f32), z], base + "_xd")
    m.memo["activations", x] = m.emit("mul", [back, s], base + "_xdq")
    return m.memo["activations", x]


def _weights(m: Match, w: np.ndarray, contracted: tuple[int, ...], base: str) -> Value:
    """The constant weights as s8, symmetric, one scale per output channel: the max over the
    ``contracted`` axes (a matmul's K of [K, N], a gemm's transposed [N, K], a conv's C, kh, kw)."""
    peak = np.abs(w).max(axis=contracted, keepdims=True).astype(np.float32)
    scale = np.where(peak > 0, peak / np.float32(127), np.float32(1)).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    f = m.emit("cast", [m.constant(base + "_wq", q)], base + "_wf", dtype=DType.f32)
    return m.emit("mul", [f, m.constant(base + "_sw", scale)], base + "_wdq")
