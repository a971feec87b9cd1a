"""The ``onnxruntime`` backend of ``minic.compile``.

torch model -> ``torch.onnx.export`` (checked) -> homemade passes -> ONNX Runtime;
an ``.onnx`` file is run as it is (no export, no minic importer, no homemade passes
unless asked), so its cell is ONNX Runtime's own answer.  Options:

* ``optimize`` (default True for a torch model, False for a file): run the homemade passes first;
* ``opset`` (default 17): the export's opset;
* ``level`` ("disabled" | "basic" | "all", default "all"): ORT's own optimizer;
* ``provider`` (default "CPUExecutionProvider");
* ``threads`` (default: one per core): intra-op threads.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from minic.backends import ModelSource, Runner
from minic.errors import DataError, UnsupportedError, UserError

OPTIONS = {"optimize", "opset", "level", "provider", "threads"}


def to_onnx(source: ModelSource, opset: int = 17):
    """The ONNX model of ``source``: exported from its torch module, or read from its file."""
    from bridges.onnx.export import export_module, load

    if source.module is not None:
        names = model_input_names(source, None)
        axes = source.dynamic_axes or tuple({} for _ in names)
        return export_module(source.module, source.example_inputs, input_names=names,
                             dynamic_axes=axes, opset=opset).model
    if source.onnx_path is not None:
        return load(source.onnx_path)
    raise UnsupportedError(f"backend 'onnxruntime' needs a torch model or an .onnx file; "
                           f"'{source.name}' is neither")


def model_input_names(source: ModelSource, model) -> tuple[str, ...]:
    """The names of the inputs the caller passes, in order."""
    if source.module is not None:
        return source.input_names or tuple(f"input{i}" for i in range(len(source.example_inputs)))
    from minic.frontend.onnx import graph_input_names
    return tuple(graph_input_names(model))


def compile(source: ModelSource, **options: Any) -> Runner:
    unknown = set(options) - OPTIONS
    if unknown:
        raise UserError(f"backend 'onnxruntime' has no option '{sorted(unknown)[0]}' "
                        f"(options: {', '.join(sorted(OPTIONS))})")
    from bridges.onnx.compare import ort_session
    from bridges.onnx.optimize import homemade

    model = to_onnx(source, options.get("opset", 17))
    if options.get("optimize", source.module is not None or source.onnx_path is None):
        model, _ = homemade(model)
    import onnxruntime as ort
    provider = options.get("provider", "CPUExecutionProvider")
    if provider not in ort.get_available_providers():
        raise UnsupportedError(f"ONNX Runtime provider '{provider}' is not available here "
                               f"(available: {', '.join(ort.get_available_providers())})")
    level = options.get("level", "all")
    if level not in ("disabled", "basic", "all"):
        raise UserError(f"level must be disabled, basic or all, not '{level}'")
    threads = options.get("threads")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise UserError(f"backend 'onnxruntime': threads must be a positive integer, not {threads!r}")
    session = ort_session(model, provider, level, threads)
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
    used = {i.name for i in session.get_inputs()}
    # The model's inputs as the caller passes them; torch.onnx.export drops inputs
    # the graph never reads, so those are accepted and not fed.
    names = list(model_input_names(source, model))

    def run(*arrays: np.ndarray):
        if len(arrays) != len(names):
            raise UserError(f"the model takes {len(names)} input(s) ({', '.join(names)}), "
                            f"got {len(arrays)}")
        feed = {n: np.asarray(a, order="C") for n, a in zip(names, arrays) if n in used}
        try:
            outs = session.run(None, feed)
        except InvalidArgument as e:         # the data, not the model: a gather index out of bounds ...
            raise DataError(f"ONNX Runtime: {str(e).splitlines()[0][:300]}") from None
        return outs[0] if len(outs) == 1 else tuple(outs)

    def op_times(*arrays: np.ndarray, repeat: int = 10) -> list[tuple[str, str, float]]:
        """(node, op type, seconds per run) from ORT's own profiler, on a profiling session."""
        feed = {n: np.asarray(a, order="C") for n, a in zip(names, arrays) if n in used}
        return profile_nodes(model, provider, level, feed, repeat)

    run.op_times = op_times
    return run


def profile_nodes(model, provider: str, level: str, feed: dict, repeat: int) -> list[tuple[str, str, float]]:
    """Run ``model`` ``repeat`` times after a warm-up with ORT's profiler on; each node's
    median kernel time over the runs (nodes as ORT ran them: after its fusions).  The
    median, not the mean: on a busy machine a run that loses its core adds milliseconds."""
    import json
    import statistics
    import tempfile
    from pathlib import Path

    from bridges.onnx.compare import ort_session
    with tempfile.TemporaryDirectory() as tmp:
        session = ort_session(model, provider, level, profile_prefix=str(Path(tmp) / "ort"))
        for _ in range(repeat + 1):
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[1:]
    per_run: dict[tuple[str, str], list[float]] = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        run = next((i for i, (start, end) in enumerate(runs) if start <= e["ts"] <= end), None)
        if run is None:
            continue                                    # the warm-up run
        key = (e["name"][: -len("_kernel_time")], e["args"].get("op_name", ""))
        times = per_run.setdefault(key, [0.0] * len(runs))
        times[run] += e["dur"] * 1e-6
    return [(name, op, statistics.median(times)) for (name, op), times in per_run.items()]
