"""One protocol for every path that can run a model.

A backend is a function ``compile(source, **options) -> callable``.  The callable
takes numpy arrays (one per model input) and returns one numpy array, or a tuple
when the model has several outputs.

Backends register by name: minic's own with ``@register("name")``; the bridges
(which minic never imports) through the ``minic.backends`` entry-point group in
pyproject.toml, loaded only when asked for.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import import_module
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable

import numpy as np

from minic.errors import MissingBridgeError, UserError

Runner = Callable[..., "np.ndarray | tuple[np.ndarray, ...]"]
BackendFn = Callable[..., Runner]


@dataclass
class ModelSource:
    """Everything a backend may start from; each takes what it understands.

    ``module`` is set for torch models (zoo or user), ``onnx_path`` for ONNX
    files, ``graph`` for text IR or a Graph given directly.  ``graph_of()``
    derives the minic Graph from whichever is present (and caches it).
    """

    name: str
    example_inputs: tuple[np.ndarray, ...]
    module: Any = None                      # torch.nn.Module
    onnx_path: Path | None = None
    graph: Any = None                       # minic.ir.graph.Graph
    dynamic_axes: tuple[dict[int, str], ...] = ()
    input_names: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def graph_of(source: ModelSource):
    """The minic Graph of ``source``: given, or imported from its torch module on first use (then kept).
    An ONNX file minic does not import (``extra["minic_refused"]``) raises the importer's refusal."""
    if source.graph is None and "symbolic inputs" in source.extra:     # an ONNX file that needs static sizes
        from minic.runtime.specialize import import_at_examples
        source.graph = import_at_examples(source)
    if source.graph is None and source.module is None and source.onnx_path is not None:
        from minic.frontend.onnx import from_onnx_file
        source.graph = from_onnx_file(source.onnx_path)
    if source.graph is None:
        if source.module is None:
            raise UserError(f"model '{source.name}' has neither a graph nor a torch module")
        from minic.frontend.torch import from_torch
        from minic.frontend.torch_arrays import tensor_of
        source.graph = from_torch(source.module, tuple(tensor_of(a) for a in source.example_inputs),
                                  source.dynamic_axes or None, name=source.name.replace("-", "_"))
    return source.graph


def quantized_int8(source: ModelSource, seed: int = 0) -> ModelSource:
    """``source`` with its graph's contractions (matmul, gemm, conv2d) quantized to 8 bits by
    minic's post-training quantization, calibrated on its example inputs and seeded random ones
    (``precision="int8"`` of the minic and interp backends; minic/passes/post_training.py)."""
    from dataclasses import replace
    from minic.inputs import calibration_inputs
    from minic.passes.post_training import quantize_int8
    graph = quantize_int8(graph_of(source), calibration_inputs(source.example_inputs, seed))
    return replace(source, name=f"{source.name}-int8", graph=graph, module=None, onnx_path=None, extra={})


def at_precision(source: ModelSource, precision: str) -> tuple[ModelSource, str]:
    """(source, precision) as minic's compiler and interpreter take them: ``"int8"`` is a rewrite of
    the graph, not a way to generate code, so it gives the source ``quantized_int8`` made, at f32;
    any other precision is passed through."""
    return (quantized_int8(source), "f32") if precision == "int8" else (source, precision)


def reference_name(source: ModelSource) -> str:
    """The backend every other path is checked against: PyTorch eager for a torch
    model, minic's interpreter (each op's numpy reference) otherwise, and ONNX Runtime
    for an ONNX file that minic does not import."""
    if source.module is not None:
        return "torch"
    return "onnxruntime" if "minic_refused" in source.extra else "interp"


def reference(source: ModelSource, inputs=None) -> tuple[str, tuple[np.ndarray, ...]]:
    """The reference backend's name and its outputs on ``inputs`` (default: the example inputs)."""
    from minic.compare import as_tuple
    name = reference_name(source)
    inputs = source.example_inputs if inputs is None else inputs
    return name, as_tuple(get(name)(source)(*inputs))


_BACKENDS: dict[str, BackendFn] = {}
# minic's own backends that live in modules imported only when asked for.
_LAZY = {"minic": "minic.runtime.backend", "interp": "minic.api"}


def register(name: str) -> Callable[[BackendFn], BackendFn]:
    """Decorator: make ``fn`` the backend called ``name``."""
    def wrap(fn: BackendFn) -> BackendFn:
        _BACKENDS[name] = fn
        return fn
    return wrap


def _plugins() -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group="minic.backends")}


def extra_of(entry_point_value: str) -> str:
    """The pip extra that installs a bridge's stack, from where the bridge lives:
    ``bridges.tvm.backend:compile`` -> ``tvm``; ``bridges.engines.openvino:compile`` -> ``openvino``."""
    parts = entry_point_value.split(":")[0].split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "engines" else parts[1]


def missing_stack(e: ModuleNotFoundError, what: str, extra: str) -> MissingBridgeError | None:
    """The one-line error for ``e`` when the missing module is a production stack's (not minic's)."""
    top = (e.name or "").split(".")[0]
    if not top or top in ("minic", "bridges"):
        return None                     # a module of minic's own missing is a bug, not an extra to install
    return MissingBridgeError(f"{what} needs the module '{e.name}', which is not installed: "
                              f"pip install 'minic[{extra}]' (or 'minic[bridges]' for every bridge)")


def _with_install_hint(name: str, fn: BackendFn, extra: str) -> BackendFn:
    """``fn`` whose lazily imported stack, when missing, is named with its extra."""
    @functools.wraps(fn)
    def compile_with(source: ModelSource, **options: Any) -> Runner:
        try:
            return fn(source, **options)
        except ModuleNotFoundError as e:
            err = missing_stack(e, f"backend '{name}'", extra)
            if err is None:
                raise
            raise err from None
    return compile_with


def recipe(name: str) -> Callable[[ModelSource, int], ModelSource] | None:
    """The model transform of a precision that changes the model rather than an engine's
    option (``int8``: ONNX Runtime's quantizer writes a QDQ file, which every engine that
    reads ONNX then runs), from the bridges' ``minic.recipes`` entry points; None when
    ``name`` is not one.  Called as ``recipe(source, seed) -> source``."""
    found = {ep.name: ep for ep in entry_points(group="minic.recipes")}
    return found[name].load() if name in found else None


def names() -> list[str]:
    """All backend names, minic's own and the bridges' (installed or not)."""
    return sorted(set(_BACKENDS) | set(_LAZY) | set(_plugins()))


def get(name: str) -> BackendFn:
    """The compile function of backend ``name`` (bridges are imported here, lazily)."""
    if name in _LAZY and name not in _BACKENDS:
        import_module(_LAZY[name])          # registers itself with @register
    if name in _BACKENDS:
        return _BACKENDS[name]
    plugin = _plugins().get(name)
    if plugin is None:
        raise UserError(f"unknown backend '{name}'; available: {', '.join(names())}")
    extra = extra_of(plugin.value)
    try:
        fn = plugin.load()
    except ModuleNotFoundError as e:
        err = missing_stack(e, f"backend '{name}'", extra)
        if err is None:
            raise
        raise err from None
    _BACKENDS[name] = _with_install_hint(name, fn, extra)
    return _BACKENDS[name]
