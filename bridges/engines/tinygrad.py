"""The ``tinygrad`` backend: tinygrad's ONNX runner on the model's ONNX export,
on tinygrad's CPU device (which compiles its kernels with Debian's ``clang``).

The runner is wrapped in ``TinyJit``: the first calls schedule and compile the
kernels, later ones replay them (what tinygrad's own benchmarks time).  Threads:
tinygrad's CPU device reads ``NUM_CPU_THREADS`` from the environment when it is
imported; it takes no option here.  Options: ``opset`` (default 17).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from minic.backends import ModelSource, Runner
from minic.errors import UserError

OPTIONS = {"opset"}
JIT_CALLS = 3          # TinyJit captures on its second call and replays from the third


def compile(source: ModelSource, **options: Any) -> Runner:
    unknown = set(options) - OPTIONS
    if unknown:
        raise UserError(f"backend 'tinygrad' has no option '{sorted(unknown)[0]}' (options: opset)")
    from minic import tools
    tools.clang("backend 'tinygrad' (its CPU device compiles its kernels with clang)")
    import onnx
    from tinygrad import Tensor, TinyJit
    from tinygrad.nn.onnx import OnnxRunner

    from bridges.onnx.backend import model_input_names, to_onnx
    model = to_onnx(source, options.get("opset", 17))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, str(path))
        runner = OnnxRunner(path)                     # the weights are read here
    names = list(model_input_names(source, model))
    used = set(runner.graph_inputs)
    outputs = [o.name for o in model.graph.output]

    @TinyJit
    def step(**feed: Tensor) -> list[Tensor]:
        result = runner(feed)
        return [result[o].realize() for o in outputs]

    def run(*arrays: np.ndarray):
        if len(arrays) != len(names):
            raise UserError(f"the model takes {len(names)} input(s) ({', '.join(names)}), got {len(arrays)}")
        feed = {n: Tensor(np.ascontiguousarray(a)).realize() for n, a in zip(names, arrays) if n in used}
        outs = tuple(t.numpy() for t in step(**feed))
        return outs[0] if len(outs) == 1 else outs
    for _ in range(JIT_CALLS):                        # compile now, not in the first timed call
        run(*source.example_inputs)
    return run
