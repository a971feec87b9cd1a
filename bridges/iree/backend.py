"""Backend ``iree`` of ``minic.compile``: torch -> MLIR (``via``) -> ``iree-compile`` -> IREE runtime.

``via`` picks the front door into IREE:

    stablehlo   torch-mlir's StableHLO (the default)
    linalg      torch-mlir's linalg on tensors
    turbine     iree-turbine's torch dialect (exported in a child process)

IREE's kernels are compiled for static shapes; a call with new input shapes
exports and compiles again (once per distinct set of shapes, then cached).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from bridges.iree import importers
from bridges.iree.compiler import HOST, Target, compile_vmfb
from bridges.iree.runtime import IreeModule
from minic.backends import ModelSource
from minic.errors import UnsupportedError, UserError

VIAS = ("stablehlo", "linalg", "turbine")
# torch-mlir's TOSA goes to --emit only: IREE 3.13 rejects it (docs/production-bugs.md).


def mlir_text(module, inputs: Sequence[np.ndarray], via: str) -> str:
    """The MLIR text IREE starts from, for ``module`` at the shapes of ``inputs``."""
    if via == "turbine":
        return importers.turbine_text(module, inputs)
    return importers.torch_mlir_text(module, inputs, via)


class IreeModel:
    """The callable ``compile`` returns: numpy arrays in, numpy array(s) out."""

    def __init__(self, source: ModelSource, via: str = "stablehlo", target: Target = HOST,
                 threads: int | None = None):
        if via not in VIAS:
            raise UserError(f"iree backend: via={via!r}; choose from {', '.join(VIAS)}")
        if source.module is None:
            raise UnsupportedError(f"{source.name}: the iree backend starts from a torch model "
                                   "(torch-mlir / iree-turbine import torch programs)")
        self.source, self.via, self.target, self.threads = source, via, target, threads
        self.modules: dict[tuple, IreeModule] = {}
        self.compile_s = 0.0                       # iree-compile's own time, summed
        self.module_for(source.example_inputs)

    def module_for(self, arrays: Sequence[np.ndarray]) -> IreeModule:
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        if key not in self.modules:
            compiled = compile_vmfb(mlir_text(self.source.module, arrays, self.via), self.target)
            self.compile_s += compiled.seconds
            self.modules[key] = IreeModule(compiled.vmfb, threads=self.threads)
        return self.modules[key]

    def __call__(self, *arrays):
        arrays = tuple(np.asarray(a) for a in arrays)
        return self.module_for(arrays)(*arrays)


def compile(source: ModelSource, **options) -> Callable:
    """``minic.compile(model, backend="iree")``; options ``via``: stablehlo (default), linalg,
    turbine; ``threads``: IREE's task-system workers (default: one per core; set once per process)."""
    unknown = set(options) - {"via", "threads"}
    if unknown:
        raise UserError(f"iree backend: unknown option(s) {sorted(unknown)}; it takes via, threads")
    return IreeModel(source, **options)
