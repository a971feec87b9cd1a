"""minic as an ``onnx.backend.base.Backend``, so the ONNX conformance suite
(``onnx.backend.test``) can run against it."""
from __future__ import annotations

from typing import Any

import numpy as np
from onnx.backend.base import Backend, BackendRep

from minic.frontend.onnx import NeedsConstantError, from_onnx, graph_input_names, input_value
from minic.frontend.onnx_sequence import flatten, regroup, signature
from minic.frontend.onnx_storage import Storage, storage_of


class MinicRep(BackendRep):
    """A prepared model.  minic needs the values that decide shapes (a target
    shape, pads, split sizes, range bounds, axes) at compile time; when the model
    computes them from graph inputs, ``run`` compiles a version specialised on
    those inputs' values at the first call with them, and caches it per value
    (as the runtime keeps one arena per input shape).  Sequence and optional inputs
    (lists of arrays, None for an empty optional) are imported per signature, their
    lengths and elements' shapes and dtypes (onnx_sequence.py), and flattened into the
    compiled model's inputs; sequence outputs are regrouped into lists."""

    def __init__(self, model, backend: str):
        self.model, self.backend = model, backend
        self.names = graph_input_names(model)
        # graph inputs and outputs of a storage-only type (f8, int4, ...) travel as their carriers
        initializers = {i.name for i in model.graph.initializer}
        self.in_storage = [_storage(i) for i in model.graph.input if i.name not in initializers]
        self.out_storage = [_storage(o) for o in model.graph.output]
        self.structured = frozenset(i.name for i in model.graph.input if i.name not in initializers
                                    and i.type.WhichOneof("value") in ("sequence_type", "optional_type"))
        self.specialised: dict[tuple, Any] = {}
        self.bound: frozenset[str] = frozenset()        # the inputs that decide shapes
        self.general = self.layout = None
        if self.structured:
            return                                      # imported at each signature (_specialised)
        try:
            self.layout = []
            self.general = self._compile(from_onnx(model, layout=self.layout))
        except NeedsConstantError as e:
            self.general, self.bound = None, e.inputs
            if not e.inputs:
                raise

    def _compile(self, graph):
        import minic
        return minic.compile(graph, backend=self.backend)

    def _specialised(self, arrays: list[Any]):
        from minic.runtime.specialize import import_bound
        named = dict(zip(self.names, arrays))
        sequences = {n: signature(named[n]) for n in self.structured}
        dims = self._sizes(named) if self.structured else {}    # imported at these inputs: at their sizes too

        def key() -> tuple:
            return tuple((n, named[n].dtype.str, named[n].shape, named[n].tobytes()) for n in sorted(self.bound)) \
                + tuple(sorted(sequences.items(), key=str)) + tuple(sorted(dims.items()))
        if key() not in self.specialised:
            layout: list = []

            def importer(bind):
                layout.clear()
                return from_onnx(self.model, bind=bind, dims=dims, sequences=sequences, layout=layout)
            graph, self.bound = import_bound(importer, named, self.bound)
            self.specialised[key()] = self._compile(graph), layout     # (the import may have bound more inputs)
        run, layout = self.specialised[key()]
        rest = [y for n, a in zip(self.names, arrays) if n not in self.bound
                for y in (flatten(a) if n in self.structured else [a])]
        return run, rest, layout

    def _sizes(self, named: dict[str, Any]) -> dict[str, int]:
        """The symbolic dims of the tensor inputs bound to the sizes of ``named``'s arrays."""
        sizes: dict[str, int] = {}
        for inp in self.model.graph.input:
            if inp.name in named and inp.name not in self.structured:
                for d, n in zip(input_value(inp, {}).type.shape, np.shape(named[inp.name])):
                    if isinstance(d, str):
                        sizes.setdefault(d, n)
        return sizes

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        kinds = self.in_storage + [None] * max(0, len(inputs) - len(self.in_storage))
        arrays = [x if n in self.structured else np.asarray(x) if st is None else st.to_carrier(x)
                  for n, x, st in zip(self.names + [""] * len(inputs), inputs, kinds)]
        if self.general is not None:
            out, layout = self.general(*arrays), self.layout
        else:
            run, rest, layout = self._specialised(arrays)
            out = run(*rest)
        out = regroup(tuple(out) if isinstance(out, tuple) else (out,), layout)
        return tuple(y if st is None else st.from_carrier(y) for y, st in zip(out, self.out_storage))


def _storage(value_info) -> Storage | None:
    t = value_info.type
    return storage_of(t.tensor_type.elem_type) if t.HasField("tensor_type") else None


class MinicBackend(Backend):
    """Imports the ModelProto and compiles it with one of minic's backends."""
    backend = "minic"

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs: Any) -> MinicRep:
        return MinicRep(model, kwargs.get("backend", cls.backend))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"
