"""The ``qnn`` backend of ``minic.compile``: ONNX -> QNN HTP (emulated on x86).

    run = minic.compile("llama-tiny", backend="qnn", mode="int8", fallback=False)

A torch model is exported by the ONNX bridge (``bridges.onnx.backend.to_onnx``);
an ``.onnx`` file is read as it is.  Options (``QnnConfig``):

* ``mode``: "fp16" (default; the fp32 graph runs as fp16), "int8" or "int16" (QDQ);
* ``activation_type`` / ``weight_type``: uint8, int8, uint16, int16 (QDQ modes);
* ``fallback`` (default True): let nodes QNN cannot take run on ORT's CPU provider;
  False refuses such a model, naming the nodes;
* ``io_quant``: "htp" (default) or "cpu": where graph-input Q / graph-output DQ run;
* ``rewrites`` (default True): the QNN rewrites (``bridges/qnn/rewrites.py``);
* ``calibration`` (default 8): random calibration inputs beside the examples;
  ``calibration_seed``, ``per_channel``; ``opset`` of the export (default 17).

The HTP runs static graphs: the model is prepared for the examples' shapes, and
again (once, cached) for each other set of input shapes it is called with.
The runner's ``placement`` maps node -> provider for the first graph, and its
``fallback`` lists the nodes left on the CPU (what ``minic.debug`` coverage reads).
"""
from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np

from minic.backends import ModelSource, Runner
from minic.errors import UserError
from bridges.qnn.prepare import QnnConfig
from bridges.qnn.tolerance import FP16

OPTIONS = {f.name for f in fields(QnnConfig)} | {"opset"}


def config_of(options: dict[str, Any]) -> QnnConfig:
    unknown = set(options) - OPTIONS
    if unknown:
        raise UserError(f"backend 'qnn' has no option '{sorted(unknown)[0]}' "
                        f"(options: {', '.join(sorted(OPTIONS))})")
    return QnnConfig(**{k: v for k, v in options.items() if k != "opset"})


def compile(source: ModelSource, **options: Any) -> Runner:
    from bridges.onnx.backend import model_input_names, to_onnx
    from bridges.qnn.prepare import prepare
    from bridges.qnn.provider import CPU_NAME, session

    config = config_of(options)
    model = to_onnx(source, options.get("opset", 17))
    names = tuple(model_input_names(source, model))
    examples = tuple(np.asarray(x) for x in source.example_inputs)
    compiled: dict[tuple, Any] = {}

    def graph_for(arrays: tuple[np.ndarray, ...]):
        key = tuple((x.shape, x.dtype.str) for x in arrays)
        if key not in compiled:
            prepared = prepare(model, names, arrays, config, calibrate_on=examples)
            compiled[key] = session(prepared.model, fallback=config.fallback,
                                    io_quant=config.io_quant)
        return compiled[key]

    first = graph_for(examples)
    used = {i.name for i in first.session.get_inputs()}

    def run(*arrays: np.ndarray):
        if len(arrays) != len(names):
            raise UserError(f"the model takes {len(names)} input(s) ({', '.join(names)}), "
                            f"got {len(arrays)}")
        arrays = tuple(np.asarray(a, order="C") for a in arrays)
        qnn = graph_for(arrays)
        outs = qnn.run({n: a for n, a in zip(names, arrays) if n in used})
        return outs[0] if len(outs) == 1 else tuple(outs)

    run.placement = first.placed
    run.fallback = [f"{n} ({first.op_types[n]})" for n in first.nodes_on(CPU_NAME)]   # minic.debug coverage
    run.config = config
    return run


# minic verify and run judge this backend by its own policy (fp16, the default mode),
# and label its latency as the emulator's.
compile.tolerance = FP16
compile.emulated = "HTP emulated on x86-64 (libQnnHtp.so)"
