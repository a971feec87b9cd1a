"""Shapes known at run time: one compiled model per run-time shape, where kernels need it.

A model's inputs may have symbolic dims (``f32[N, 3, H, W]``).  Where every op
keeps them simple (products such as ``B*T``), minic compiles the graph once with
symbolic loop extents and binds the symbols at each call (``CompiledModel``).
Where an op needs a static size (a convolution's H and W, a pad or slice on a
symbolic axis), the model is *specialized*: the symbols are bound to the sizes of
the call's inputs, the model is imported again with those sizes (a static graph)
and compiled; the result is kept per shape signature, in memory (the last
``CAPACITY`` signatures) and in the compile cache on disk (as any static graph).

    run = minic.compile("cnn_dyn.onnx", [x])      # x: 2x3x40x48, the file says N, 3, H, W
    run(x)                                        # compiled at compile time for (N=2, H=40, W=48)
    run(np.zeros((1, 3, 64, 64), np.float32))     # compiled on first sight of (1, 64, 64)

``dynamic=`` says which dims stay symbolic: ``None`` (the default) keeps all of them
when the symbolic graph compiles and otherwise as many as compile (``_widest``); ``True`` insists on
one symbolic compilation; ``False`` specializes every symbol; ``{"x": {0: "N"}}`` (or
``{"x": [0]}``) keeps the symbols of those dims and specializes the others.
An ONNX import that needs an input's *value* (a shape read from data, an ``If`` on a graph
input whose branches make sequences) specializes the same way on that input's data
(``import_onnx``; inputs of at most ``VALUE_LIMIT`` elements).
A static model never comes here: it compiles to exactly the code it always did.
See docs/dynamic.md (and compare torch.compile's guards, TensorRT's profiles).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Mapping

import numpy as np

from minic.backends import ModelSource, Runner, graph_of
from minic.errors import MinicError, UserError
from minic.ir.build import make_node
from minic.ir.graph import Graph, Value
from minic.ir.interpret import bind_symbols
from minic.ir.types import Dim, TensorType, dim_bind, symbols

CAPACITY = 8          # specializations kept in memory per model (least recently used goes first)

Build = Callable[[Graph], Runner]


def compile(source: ModelSource, build: Build, dynamic: Any = None) -> Runner:
    """``build`` (Graph -> callable) applied to ``source`` so that the callable serves
    every input shape the model admits: ``build(graph)`` itself where the graph is
    static or compiles with its symbols, else a ``Specialized`` model."""
    if source.module is not None and source.graph is None and isinstance(dynamic, Mapping):
        source.dynamic_axes = torch_axes(source, dynamic)    # a torch model is exported with these axes
    inputs = model_inputs(source)
    every = _symbols_in_order(inputs)
    if "symbolic inputs" in source.extra:
        graph_of(source)                 # imported at the examples: finds the inputs whose values it needs
    values = source.extra.get("value inputs")
    if not every and not values:
        return build(graph_of(source))                   # a static model: nothing changes
    keep = kept_symbols(inputs, dynamic)
    if not every:
        return Specialized(source, build, inputs, frozenset())
    general = _general_graph(source, inputs)
    if keep is None:                                     # auto: symbolic if it compiles, else as much as does
        if general is not None:
            try:
                return build(general)
            except MinicError:       # an op needs a static size; were it anything else, specializing says it again
                pass
        return _widest(source, build, inputs, every, tried_all=general is not None)
    if keep == set(every) and not values:
        return build(general if general is not None else static_graph(source, {}, inputs))
    return Specialized(source, build, inputs, keep)


def one_graph(source: ModelSource, dynamic: Any = None) -> Graph:
    """The one graph of ``source`` whose kept dims (``dynamic``, as for ``compile``; None:
    every symbolic dim the model declares) stay symbolic, the others bound to the example
    inputs' sizes: what a saved model or a cross build holds (no specialization later)."""
    if source.module is not None and source.graph is None and isinstance(dynamic, Mapping):
        source.dynamic_axes = torch_axes(source, dynamic)
    inputs = model_inputs(source)
    keep = kept_symbols(inputs, dynamic)
    if keep is None:            # as the model declares (a file that needs static sizes: the examples')
        return graph_of(source)
    example = bind_symbols(inputs, source.example_inputs)
    return static_graph(source, {k: n for k, n in example.items() if k not in keep}, inputs)


def _symbols_in_order(inputs: list[Value]) -> list[str]:
    """The symbols of the inputs' dims, in the order they first appear."""
    return list(dict.fromkeys(s for v in inputs for d in v.type.shape for s in sorted(symbols(d))))


def _widest(source: ModelSource, build: Build, inputs: list[Value], every: list[str],
            tried_all: bool) -> "Specialized":
    """Keep symbolic as many symbols as compile: each in turn (input order) is tried kept
    with those kept so far, the others bound to the example's sizes; one that makes the
    compilation fail is specialized.  A CNN over (N, 3, H, W) keeps N: one compilation
    serves every batch at a given H and W.  (torch.compile's "automatic dynamic" makes a
    dim dynamic once it changes; here the example decides at compile time.)"""
    example = bind_symbols(inputs, source.example_inputs)
    keep, first, pool = frozenset(), None, {}
    for symbol in every:
        trial = keep | {symbol}
        if trial == set(every) and tried_all:            # all of them together failed already
            continue
        try:
            graph = static_graph(source, {k: n for k, n in example.items() if k not in trial}, inputs)
            run = build(share_constants(graph, pool))
        except MinicError:
            continue
        keep, first = trial, run
    return Specialized(source, build, inputs, keep, first, pool)


def share_constants(graph: Graph, pool: dict[str, np.ndarray]) -> Graph:
    """``graph`` with each constant that equals one in ``pool`` (same name, same data) holding
    the pool's array: every import makes new arrays of the same weights, and without this
    each specialization would keep a copy of them all.  New ones join the pool (owned by numpy,
    so that a compiled model keeps them without copying)."""
    from minic.runtime.compiled import owned
    for c in graph.constants:
        known = pool.get(c.name)
        if known is not None and known.dtype == c.data.dtype and known.shape == c.data.shape \
                and np.array_equal(known, c.data):
            c.data = known
        elif known is None:
            c.data = pool[c.name] = owned(c.data)
    return graph


class Specialized:
    """A model compiled once per run-time signature, on first sight of each: the values of
    the symbols it specializes and, for an ONNX file whose import needs the values of some
    inputs (``extra["value inputs"]``: a shape computed from one, an ``If`` of sequences on
    one), those values, which the compiled model then holds as constants; the last
    ``CAPACITY`` are kept."""

    def __init__(self, source: ModelSource, build: Build, inputs: list[Value], keep: frozenset[str],
                 first: Runner | None = None, pool: dict[str, np.ndarray] | None = None):
        self.source, self.build, self.inputs, self.keep = source, build, inputs, keep
        self.pool = {} if pool is None else pool         # the weights, one copy for every specialization
        self.compiled: OrderedDict[tuple, Runner] = OrderedDict()
        self.compilations = 0                            # how many signatures were compiled (tests read it)
        self._lock = threading.Lock()                    # a model is a value: threads may call it at once
        self._keys: dict[tuple, tuple] = {}              # input shapes seen -> their signature
        if first is not None:                            # compiled already, for the example's signature
            self.compiled[self.signature(source.example_inputs)] = first
            self.compilations = 1
        elif source.example_inputs:
            self.runner(source.example_inputs)           # errors show at compile time, not first call

    @property
    def values(self) -> frozenset[str]:
        """The inputs whose values are compiled in (found by the imports so far)."""
        return self.source.extra.get("value inputs", frozenset())

    def signature(self, arrays) -> tuple:
        """The sizes of the specialized symbols in ``arrays`` (checked: dtypes, ranks,
        and every input agreeing on each symbol's value), then the value inputs' data."""
        env = bind_symbols(self.inputs, arrays)
        sizes = tuple(sorted((s, n) for s, n in env.items() if s not in self.keep))
        return sizes + tuple((v.name, a.dtype.str, a.shape, a.tobytes())
                             for v, a in zip(self.inputs, arrays) if v.name in self.values)

    def runner(self, arrays) -> Runner:
        key = self.signature(arrays)
        if not self.values:
            if len(self._keys) >= 16 * CAPACITY:
                self._keys.clear()
            self._keys[tuple(np.shape(a) for a in arrays)] = key
        with self._lock:
            run = self.compiled.get(key)
            if run is None:
                sizes = {e[0]: e[1] for e in key if len(e) == 2}     # (symbol, size); values come as 4-tuples
                run = self.build(share_constants(static_graph(self.source, sizes, self.inputs, arrays), self.pool))
                key = self.signature(arrays)             # the import may have found more value inputs
                self.compilations += 1
                if len(self.compiled) >= CAPACITY:
                    self.compiled.popitem(last=False)
                self.compiled[key] = run
            else:
                self.compiled.move_to_end(key)
        return run

    def __call__(self, *arrays: np.ndarray):
        # Shapes seen before name their signature at once (the compiled model checks dtypes
        # and sizes itself); new shapes are bound and checked by signature().
        key = self._keys.get(tuple(np.shape(a) for a in arrays))
        run = self.compiled.get(key) if key is not None else None
        if run is not None:
            try:
                self.compiled.move_to_end(key)           # the most recently used
            except KeyError:                             # another thread let it go just now
                run = None
        if run is None:
            arrays = tuple(np.asarray(a) for a in arrays)
            run = self.runner(arrays)
        if self.values:                                  # compiled in: not inputs of the compiled model
            arrays = tuple(a for v, a in zip(self.inputs, arrays) if v.name not in self.values)
        return run(*arrays)

    def __repr__(self) -> str:
        kept = f", symbolic {sorted(self.keep)}" if self.keep else ""
        values = f", values of {sorted(self.values)}" if self.values else ""
        return f"Specialized({self.source.name}, {len(self.compiled)} signatures{kept}{values})"


def kept_symbols(inputs: list[Value], dynamic: Any) -> frozenset[str] | None:
    """The symbols ``dynamic`` keeps symbolic (None: decide automatically)."""
    if dynamic is None or dynamic is True:
        return None if dynamic is None else frozenset(_symbols_in_order(inputs))
    if dynamic is False:
        return frozenset()
    if not isinstance(dynamic, Mapping):
        raise UserError(f"dynamic= takes None, True, False or {{input: {{axis: name}}}}, got {type(dynamic).__name__}")
    by_name = {v.name: v for v in inputs}
    keep = set()
    for key, axes in dynamic.items():
        v = inputs[key] if isinstance(key, int) and 0 <= key < len(inputs) else by_name.get(key)
        if v is None:
            raise UserError(f"dynamic: the model has no input {key!r}; its inputs are {', '.join(by_name)}")
        for axis in axes:
            if not isinstance(axis, int) or not -v.type.rank <= axis < v.type.rank:
                raise UserError(f"dynamic: input '{v.name}' ({v.type}) has no axis {axis!r}")
            d = v.type.shape[axis]
            if isinstance(d, int):
                raise UserError(f"dynamic: input '{v.name}' axis {axis} is static ({d}) in the model")
            keep |= symbols(d)
    return frozenset(keep)


def torch_axes(source: ModelSource, dynamic: Mapping) -> tuple[dict[int, str], ...]:
    """``dynamic`` as a torch model's dynamic axes: inputs by position or by ``forward``'s
    parameter names, axes named by the user (or ``<input>_<axis>``)."""
    import inspect
    names = list(source.input_names or inspect.signature(source.module.forward).parameters)
    axes: list[dict[int, str]] = [{} for _ in source.example_inputs]
    for key, dims in dynamic.items():
        i = key if isinstance(key, int) else names.index(key) if key in names else -1
        if not 0 <= i < len(axes):
            raise UserError(f"dynamic: the model has no input {key!r}; its inputs are {', '.join(names[:len(axes)])}")
        rank = np.ndim(source.example_inputs[i])
        for axis in dims:
            if not isinstance(axis, int) or not 0 <= axis < rank:
                raise UserError(f"dynamic: input {key!r} (rank {rank}) has no axis {axis!r}")
        named = dims if isinstance(dims, Mapping) else {}
        axes[i] = {a: named.get(a) or f"{names[i]}_{a}" for a in dims}
    return tuple(axes)


def model_inputs(source: ModelSource) -> list[Value]:
    """The model's inputs with their symbolic dims (an ONNX file whose symbolic import
    failed was loaded at its example shapes: its own inputs are kept in ``extra``)."""
    return source.extra.get("symbolic inputs") or graph_of(source).inputs


def _general_graph(source: ModelSource, inputs: list[Value]) -> Graph | None:
    """The source's graph when it has the model's symbolic inputs (not a specialization)."""
    if "symbolic inputs" in source.extra:
        return None
    return graph_of(source)


def static_graph(source: ModelSource, sizes: Mapping[str, int], inputs: list[Value],
                 arrays: tuple | None = None) -> Graph:
    """The model with the symbols in ``sizes`` bound: an ONNX file imported again with
    those input sizes (its shape computations then fold; the value inputs' data taken from
    ``arrays``, else the examples), a torch module exported again, or a given graph with
    its types inferred again."""
    given = graph_of(source)
    if not source.extra.get("value inputs") and \
            [v.type for v in given.inputs] == [bound_type(v.type, sizes) for v in inputs]:
        return given                                     # it is this specialization already
    if source.onnx_path is not None:
        graph = import_onnx(source, sizes, source.example_inputs if arrays is None else arrays)
        graph.name = given.name
        return graph
    if source.module is not None:
        from minic.frontend.torch import from_torch
        from minic.frontend.torch_arrays import tensor_of
        arrays = [np.zeros([_size(d, sizes, v) for d in v.type.shape], v.type.dtype.numpy) for v in inputs]
        axes = tuple({i: d for i, d in enumerate(v.type.shape) if isinstance(d, str) and d not in sizes}
                     for v in inputs)
        return from_torch(source.module, tuple(tensor_of(a) for a in arrays),
                          axes if any(axes) else None, name=given.name)
    return bind_graph(given, sizes)


def _size(d: Dim, sizes: Mapping[str, int], v: Value) -> int:
    d = dim_bind(d, sizes)
    return d if isinstance(d, int) else 2               # a kept symbol: any example size (torch wants >= 2)


def bound_type(t: TensorType, sizes: Mapping[str, int]) -> TensorType:
    return TensorType(tuple(dim_bind(d, sizes) for d in t.shape), t.dtype)


def _bound_attrs(attrs: Any, sizes: Mapping[str, int]) -> Any:
    """An attribute dataclass with its symbolic dims bound (they sit in tuple fields only)."""
    from dataclasses import fields, is_dataclass, replace
    if not is_dataclass(attrs):
        return attrs
    changes = {}
    for f in fields(attrs):
        value = getattr(attrs, f.name)
        if isinstance(value, tuple) and any(isinstance(x, str) for x in value):
            changes[f.name] = tuple(dim_bind(x, sizes) if isinstance(x, str) else x for x in value)
    return replace(attrs, **changes) if changes else attrs


def bind_graph(graph: Graph, sizes: Mapping[str, int]) -> Graph:
    """``graph`` with the symbols in ``sizes`` bound, every node's types inferred again
    (constants are shared, not copied)."""
    new: dict[Value, Value] = {c: c for c in graph.constants}
    inputs = []
    for v in graph.inputs:
        new[v] = Value(v.name, bound_type(v.type, sizes))
        inputs.append(new[v])
    nodes = []
    for node in graph.nodes:
        made = make_node(node.op, [new[v] for v in node.inputs], _bound_attrs(node.attrs, sizes),
                         names=[o.name for o in node.outputs], group=node.group, source=node.source,
                         scope=node.scope)
        new.update(zip(node.outputs, made.outputs))
        nodes.append(made)
    return Graph(graph.name, inputs, [new[v] for v in graph.outputs], nodes, list(graph.constants))


def onnx_inputs(path, static_too: bool = False) -> list[Value] | None:
    """The inputs of an ONNX file with their symbolic dims, or None when it has no symbolic
    dim (unless ``static_too``) or its inputs cannot be read (the import's own error then stands)."""
    import onnx
    from minic.frontend.onnx import graph_input_names, input_value
    try:
        model = onnx.load(str(path), load_external_data=False)
        names = set(graph_input_names(model))
        inputs = [input_value(i, {}) for i in model.graph.input if i.name in names]
    except Exception:  # noqa: BLE001 - not a file whose inputs can be read
        return None
    return inputs if static_too or any(symbols(d) for v in inputs for d in v.type.shape) else None


def import_at_examples(source: ModelSource) -> Graph:
    """An ONNX file whose symbolic import failed (an op needs a static size), imported at
    the sizes of the source's example inputs (given, or drawn: the CLI replaces drawn ones
    with the user's before anything imports)."""
    sizes = bind_symbols(source.extra["symbolic inputs"], source.example_inputs)
    try:
        graph = import_onnx(source, sizes, source.example_inputs)
    except UserError as e:
        if not sizes:                    # a static file: there are no sizes to name
            raise
        raise type(e)(f"{e} (at {', '.join(f'{k}={n}' for k, n in sizes.items())}, the example inputs' sizes)") from None
    graph.name = source.name
    return graph


VALUE_LIMIT = 1024     # elements: an input this small may be compiled in, per value (a flag, a rate, a shape)


def import_onnx(source: ModelSource, sizes: Mapping[str, int], arrays: tuple) -> Graph:
    """``source``'s ONNX file imported at ``sizes``, with the inputs whose values the import
    needs bound to their data in ``arrays`` (``import_bound``); those found are kept in
    ``extra["value inputs"]`` for the next calls."""
    from minic.frontend.onnx import from_onnx_file
    names = [v.name for v in model_inputs(source)]
    return import_bound(lambda bind: from_onnx_file(source.onnx_path, dims=sizes, bind=bind),
                        dict(zip(names, arrays)), source.extra.get("value inputs", frozenset()), source)[0]


def import_bound(importer: Callable[[dict[str, np.ndarray] | None], Graph], arrays: Mapping[str, Any],
                 bound: frozenset[str], source: ModelSource | None = None) -> tuple[Graph, frozenset[str]]:
    """``importer(bind)`` (an ONNX import) with the inputs in ``bound``, and any more the import
    asks for (an ``If`` condition, a target shape, computed from graph inputs:
    ``NeedsConstantError.inputs``), bound to their data in ``arrays``; the graph and the inputs
    bound.  A large input is refused: a compilation per value of an image would serve nothing.
    (The conformance backend, frontend/onnx_backend.py, imports in-memory models the same way.)"""
    from minic.errors import UnsupportedError
    from minic.frontend.onnx import NeedsConstantError
    while True:
        try:
            return importer({n: np.asarray(arrays[n]) for n in sorted(bound)} or None), bound
        except NeedsConstantError as e:
            more = e.inputs - bound
            if not more:
                raise
            for n in sorted(more):
                a = np.asarray(arrays[n])
                if a.size > VALUE_LIMIT:
                    raise UnsupportedError(f"{e}: it is computed from input '{n}' ({a.dtype}{list(a.shape)}), and "
                                           f"minic compiles in the values of inputs of at most {VALUE_LIMIT} "
                                           f"elements only") from None
            bound = bound | more
            if source is not None:
                source.extra["value inputs"] = bound
