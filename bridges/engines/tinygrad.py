"""The ``tinygrad`` backend: tinygrad's ONNX runner on the model's ONNX export,
on tinygrad's CPU device (which compiles its kernels with Debian's ``clang``).

The runner is wrapped in ``TinyJit``: the first calls schedule and compile the
kernels, later ones replay them (what tinygrad's own benchmarks time).  Both are
shape-specific: ``OnnxRunner`` fixes each symbolic dim on the first call and
caches the values its ``Shape`` nodes compute, and a jitted step replays the
kernels of the shapes it captured (another shape is a ``JitError``, or a replay
of the old shape's result).  So a model with symbolic dims gets a runner and a
jitted step per input-shape signature, built on first sight, as the ``tvm``
bridge compiles once per shape.  A graph TinyJit cannot replay (``UNJITTABLE``) runs
unjitted.

Threads: tinygrad's CPU device reads ``NUM_CPU_THREADS`` from the environment
when it is imported; it takes no option here.  Options: ``opset`` (default 17).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from minic.backends import ModelSource, Runner
from minic.errors import UnsupportedError, UserError

OPTIONS = {"opset"}
JIT_CALLS = 3          # TinyJit captures on its second call and replays from the third
# TinyJit's refusals of a step it cannot replay: no kernel at all (a squeeze of an input), or a
# runner that reads a tensor's data while capturing (a Reshape to a shape computed from Shape,
# which the exporter writes for a flatten over a symbolic batch).  Either runs unjitted.
UNJITTABLE = ("didn't JIT anything", "cannot access tensor data during JIT capture")


def compile(source: ModelSource, **options: Any) -> Runner:
    unknown = set(options) - OPTIONS
    if unknown:
        raise UserError(f"backend 'tinygrad' has no option '{sorted(unknown)[0]}' (options: opset)")
    from minic import tools
    tools.clang("backend 'tinygrad' (its CPU device compiles its kernels with clang)")

    from bridges.onnx.backend import model_input_names, to_onnx
    model = to_onnx(source, options.get("opset", 17))
    names = list(model_input_names(source, model))
    outputs = [o.name for o in model.graph.output]
    serialized = model.SerializeToString()
    steps: dict[tuple, Callable[[list[np.ndarray]], list[np.ndarray]]] = {}

    def run(*arrays: np.ndarray):
        if len(arrays) != len(names):
            raise UserError(f"the model takes {len(names)} input(s) ({', '.join(names)}), got {len(arrays)}")
        # np.asarray, not np.ascontiguousarray: that one makes a 0-d array 1-d.
        arrays = [np.asarray(a, order="C") for a in arrays]
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        if key not in steps:
            try:
                steps[key] = specialize(serialized, names, outputs, arrays)
            except NotImplementedError as e:          # tinygrad's word for an op its runner lacks
                raise UnsupportedError(f"backend 'tinygrad': {e}") from None
        outs = tuple(steps[key](arrays))
        return outs[0] if len(outs) == 1 else outs
    run(*source.example_inputs)                       # compile now, not in the first timed call
    return run


def specialize(serialized: bytes, names: list[str], outputs: list[str],
               arrays: list[np.ndarray]) -> Callable[[list[np.ndarray]], list[np.ndarray]]:
    """A runner and its jitted step for the shapes of ``arrays``, warmed up on them."""
    from tinygrad import Tensor, TinyJit
    from tinygrad.engine.jit import JitError
    from tinygrad.nn.onnx import OnnxRunner

    runner = OnnxRunner(Tensor(np.frombuffer(serialized, dtype=np.uint8)))   # the weights are read here
    used = set(runner.graph_inputs)

    def feed(arrays: list[np.ndarray]) -> dict[str, Tensor]:
        # clone(): a 0-d array becomes a constant, which a jitted step cannot take as an input
        return {n: Tensor(a).clone().realize() for n, a in zip(names, arrays) if n in used}

    def plain(**inputs: Tensor) -> list[Tensor]:
        result = runner(inputs)
        return [result[o].realize() for o in outputs]

    jitted = TinyJit(plain)

    def step(arrays: list[np.ndarray]) -> list[np.ndarray]:
        return [t.numpy() for t in chosen(**feed(arrays))]
    chosen = jitted
    try:
        for _ in range(JIT_CALLS):
            step(arrays)
    except JitError as e:
        if not any(why in str(e) for why in UNJITTABLE):
            raise
        chosen = plain                                # nothing to replay, or a value to read: run it as it is
    return step
