"""minic as an ``onnx.backend.base.Backend``, so the ONNX conformance suite
(``onnx.backend.test``) can run against it."""
from __future__ import annotations

from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep

from minic.frontend.onnx import NeedsConstantError, from_onnx, graph_input_names


class MinicRep(BackendRep):
    """A prepared model.  minic needs some integer and bool tensors (axes, pads,
    target shapes, flags) as compile-time attributes; when the model takes them
    as graph inputs, ``run`` compiles a version specialised on their values."""

    def __init__(self, model, backend: str):
        self.model, self.backend = model, backend
        self.specialised: dict[bytes, Any] = {}
        try:
            self.general = self._compile(from_onnx(model))
        except NeedsConstantError:
            self.general = None

    def _compile(self, graph):
        import minic
        return minic.compile(graph, backend=self.backend)

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        arrays = [np.asarray(x) for x in inputs]
        run = self.general
        if run is None:
            names = graph_input_names(self.model)
            bind = {n: a for n, a in zip(names, arrays) if a.dtype.kind in "iub"}
            key = b"".join(n.encode() + a.tobytes() for n, a in bind.items())
            if key not in self.specialised:
                self.specialised[key] = self._compile(from_onnx(self.model, bind=bind))
            run = self.specialised[key]
            arrays = [a for n, a in zip(names, arrays) if n not in bind]
        out = run(*arrays)
        return tuple(out) if isinstance(out, tuple) else (out,)


class MinicBackend(Backend):
    """Imports the ModelProto and compiles it with one of minic's backends."""
    backend = "minic"

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> MinicRep:
        return MinicRep(model, kwargs.get("backend", cls.backend))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"
