"""The ``openvino`` backend: OpenVINO's CPU plugin on the model's ONNX export.

torch model -> ``torch.onnx.export(opset 17, dynamo=False)`` (the export the
``onnxruntime`` backend uses) -> ``Core.read_model`` -> ``compile_model("CPU")``.
An ``.onnx`` file is read by OpenVINO's own ONNX front end (``read_model(path)``),
never through minic's importer, so the cell is OpenVINO's own answer, and reshaped to
the shapes of the inputs it is called with (compiled once per input-shape signature).
Options:

* ``precision`` ("f32" | "bf16", default "f32"): OpenVINO's inference precision
  hint.  On a CPU with AMX or AVX-512 BF16 the plugin's own default is bf16
  (errors ~3e-3), so an f32 comparison has to ask for f32;
* ``threads`` (default: the plugin's choice): ``INFERENCE_NUM_THREADS``;
* ``opset`` (default 17): the export's opset.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from minic.backends import ModelSource, Runner
from minic.errors import UnsupportedError, UserError

OPTIONS = {"precision", "threads", "opset"}
PRECISIONS = ("f32", "bf16")


def config(precision: str = "f32", threads: int | None = None) -> dict[str, Any]:
    """The CPU plugin's properties for ``compile_model``."""
    if precision not in PRECISIONS:
        raise UserError(f"backend 'openvino': precision must be one of {', '.join(PRECISIONS)}, not '{precision}'")
    props: dict[str, Any] = {"INFERENCE_PRECISION_HINT": precision}
    if threads is not None:
        if not isinstance(threads, int) or threads < 1:
            raise UserError(f"backend 'openvino': threads must be a positive integer, not {threads!r}")
        props["INFERENCE_NUM_THREADS"] = threads
    return props


def compile(source: ModelSource, **options: Any) -> Runner:
    unknown = set(options) - OPTIONS
    if unknown:
        raise UserError(f"backend 'openvino' has no option '{sorted(unknown)[0]}' "
                        f"(options: {', '.join(sorted(OPTIONS))})")
    import onnx
    import openvino as ov

    from bridges.onnx.backend import model_input_names, to_onnx
    props = config(options.get("precision", "f32"), options.get("threads"))
    core = ov.Core()
    if source.module is None and source.onnx_path is not None:
        from minic.frontend.onnx import graph_input_names
        names = graph_input_names(onnx.load(str(source.onnx_path), load_external_data=False))
        try:
            read = core.read_model(str(source.onnx_path))           # OpenVINO's own importer
        except Exception as e:  # noqa: BLE001 - OpenVINO raises its generic error for ops it lacks
            raise UnsupportedError(f"{source.onnx_path}: OpenVINO's ONNX front end cannot read it: "
                                   f"{_first_line(e)}") from None
    else:
        model = to_onnx(source, options.get("opset", 17))
        # torch.onnx.export drops inputs the graph never reads: accepted, not fed.
        names = list(model_input_names(source, model))
        with tempfile.TemporaryDirectory() as tmp:      # read_model takes a path (weights stay in one file)
            path = Path(tmp) / "model.onnx"
            onnx.save(model, str(path))
            read = core.read_model(str(path))
    reshape = source.module is None and source.onnx_path is not None
    compiled_for: dict[tuple, tuple[Any, Any, dict[int, int]]] = {}

    def compiled_at(arrays) -> tuple[Any, Any, dict[int, int]]:
        key = tuple(a.shape for a in arrays) if reshape else ()
        if key not in compiled_for:
            model = read
            if reshape:
                model = read.clone()
                model.reshape({port: ov.PartialShape(list(arrays[i].shape))
                               for port, i in input_ports(model, names).items()})
            compiled = core.compile_model(model, "CPU", props)
            compiled_for[key] = compiled, compiled.create_infer_request(), input_ports(compiled, names)
        return compiled_for[key]

    def run(*arrays: np.ndarray):
        if len(arrays) != len(names):
            raise UserError(f"the model takes {len(names)} input(s) ({', '.join(names)}), got {len(arrays)}")
        arrays = [np.asarray(a, order="C") for a in arrays]
        compiled, request, ports = compiled_at(arrays)
        results = request.infer({port: arrays[i] for port, i in ports.items()})
        outs = tuple(np.array(results[o]) for o in compiled.outputs)
        return outs[0] if len(outs) == 1 else outs
    compiled, _, _ = compiled_at([np.asarray(a) for a in source.example_inputs])
    # What the plugin says it compiled with (f32, the thread count), for the caller to check.
    precision = compiled.get_property("INFERENCE_PRECISION_HINT")        # an ov.Type: f32, bf16
    run.settings = {"INFERENCE_PRECISION_HINT": precision.get_type_name() if hasattr(precision, "get_type_name")
                    else str(precision), "INFERENCE_NUM_THREADS": compiled.get_property("INFERENCE_NUM_THREADS")}
    return run


def _first_line(e: BaseException) -> str:
    lines = [line for line in str(e).splitlines() if line.strip()]
    return (lines[-1] if lines else type(e).__name__)[:300]      # OpenVINO puts the reason last


def input_ports(compiled, names: list[str]) -> dict[int, int]:
    """Each input port of the (compiled) model -> the position of the caller's array it takes.

    A port has a set of tensor names: OpenVINO merges the names of tensors its
    front end folds together (``x`` and ``/Cast_output_0`` of a no-op Cast), and
    ``get_any_name()`` may return the other one, so a port is matched by any of
    its names.  Every port must be fed: an unfed port holds whatever its tensor
    held, and OpenVINO runs on it without a word."""
    position = {n: i for i, n in enumerate(names)}
    ports = {}
    for index, port in enumerate(compiled.inputs):
        found = [position[n] for n in port.get_names() if n in position]
        if not found:
            raise UnsupportedError(f"backend 'openvino': the compiled model's input {sorted(port.get_names())} "
                                   f"is none of the model's inputs ({', '.join(names)})")
        ports[index] = found[0]
    return ports
