"""The paths a model can be debugged on, one entry each.

An entry names a backend of ``minic.backends`` and says what the debugging tools
need to know about it beyond the backend protocol:

* the options it runs with (``mlir-tosa`` is the ``mlir`` backend with ``via="tosa"``);
* the precisions it can run at, the backend option that selects one, and the
  tolerance each precision is judged by (``minic:f16-acc``);
* whether it runs an ONNX model (``runs_onnx``): then ``bisect`` compares the two
  paths on the graph minic imports from that same ONNX model, and exposes this
  path's intermediates by marking every node output of the model as a graph
  output, as Polygraphy does.

A path is added with one ``register`` call; a bridge that lands later (qnn, iree)
adds its line here.  A runner may also list the nodes it left on a CPU fallback
(``runner.fallback``: node descriptions, as the qnn runner does): ``coverage``
reports them as "fallback".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minic import backends
from minic.backends import ModelSource, Runner
from minic.verify.precision import TOLERANCE
from minic.verify.tolerance import F16, F32, QDQ16, QDQ8
from minic.errors import UserError

DEFAULT_TOLERANCE = dict(TOLERANCE)            # the one policy: minic/verify/precision.py


@dataclass(frozen=True)
class DebugPath:
    name: str                                    # what users type: "mlir-tosa"
    backend: str                                 # the minic.backends name: "mlir"
    options: dict[str, Any] = field(default_factory=dict)
    precisions: tuple[str, ...] = ("f32",)       # the first is the default
    precision_option: str = ""                   # the backend option a precision goes to ("" = none)
    tolerance: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCE))
    runs_onnx: bool = False                      # the path runs an ONNX model (see the module docstring)

    def compile(self, source: ModelSource, precision: str = "f32") -> Runner:
        """The backend's runner for ``source`` at ``precision``."""
        if precision not in self.precisions:
            raise UserError(f"path '{self.name}' runs at {', '.join(self.precisions)}, not '{precision}'")
        options = dict(self.options)
        if self.precision_option and precision != self.precisions[0]:
            options[self.precision_option] = precision
        return backends.get(self.backend)(source, **options)


@dataclass(frozen=True)
class Chosen:
    """A path at one precision, as given on the command line: ``minic:f16-acc``."""
    path: DebugPath
    precision: str

    @property
    def label(self) -> str:
        return self.path.name if self.precision == self.path.precisions[0] else f"{self.path.name}:{self.precision}"

    @property
    def tolerance(self) -> float:
        """The precision's bound; at the path's own precision, the bound verify judges by."""
        bound = self.path.tolerance.get(self.precision, F32)
        if self.precision != self.path.precisions[0]:
            return bound
        from minic.verify.matrix import backend_tolerance
        return backend_tolerance(self.path.backend, bound)

    def compile(self, source: ModelSource) -> Runner:
        return self.path.compile(source, self.precision)


PATHS: dict[str, DebugPath] = {}


def register(path: DebugPath) -> DebugPath:
    PATHS[path.name] = path
    return path


register(DebugPath("interp", "interp", precisions=("f32", "f16", "bf16", "int8"), precision_option="precision"))
register(DebugPath("minic", "minic", precisions=("f32", "f16", "f16-acc", "bf16", "int8"), precision_option="precision"))
register(DebugPath("onnxruntime", "onnxruntime", runs_onnx=True))
register(DebugPath("tvm", "tvm"))
register(DebugPath("openvino", "openvino"))
register(DebugPath("tinygrad", "tinygrad"))
register(DebugPath("mlir-linalg", "mlir", {"via": "linalg"}))
register(DebugPath("mlir-tosa", "mlir", {"via": "tosa"}))
register(DebugPath("iree-stablehlo", "iree", {"via": "stablehlo"}))
register(DebugPath("iree-linalg", "iree", {"via": "linalg"}))
register(DebugPath("iree-turbine", "iree", {"via": "turbine"}))
# The Hexagon HTP, emulated: fp16 by default, QDQ 8/16-bit; bounds as in bridges/qnn/tolerance.py.
register(DebugPath("qnn", "qnn", precisions=("fp16", "int8", "int16"), precision_option="mode",
                   tolerance={"fp16": F16, "int8": QDQ8, "int16": QDQ16}))
ALIASES = {"mlir": "mlir-linalg", "ort": "onnxruntime", "iree": "iree-stablehlo"}


def available() -> list[str]:
    """The registered paths whose backend exists here (a bridge not installed is left out)."""
    have = set(backends.names())
    return [name for name, p in PATHS.items() if p.backend in have]


def choose(spec: str) -> Chosen:
    """``NAME`` or ``NAME:PRECISION`` -> the path at that precision."""
    name, _, precision = spec.strip().partition(":")
    name = ALIASES.get(name, name)
    if name not in PATHS:
        raise UserError(f"unknown path '{name}'; available: {', '.join(available())}")
    path = PATHS[name]
    if path.backend not in backends.names():
        raise UserError(f"path '{name}' needs backend '{path.backend}', which is not installed here")
    precision = precision or path.precisions[0]
    if precision not in path.precisions:
        raise UserError(f"path '{name}' runs at {', '.join(path.precisions)}; '{precision}' is not one")
    return Chosen(path, precision)


def choose_all(specs: str | None, default: list[str] | None = None) -> list[Chosen]:
    """A comma-separated list of path specs (default: every available path)."""
    names = [s for s in (specs.split(",") if specs else default or available()) if s.strip()]
    if not names:
        raise UserError("no paths given")
    return [choose(s) for s in names]
