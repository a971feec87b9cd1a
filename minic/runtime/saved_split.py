"""A model compiled as parts (``SplitModel``, minic/runtime/split.py: a graph with a run-time
``loop`` or ``if``, or a data-sized op such as ``nonzero``) kept on disk, and run later without
the compiler.

    run = minic.compile(tagger, [x], dynamic={"x": {1: "T"}})    # SplitModel(Tagger_part0 -> loop -> ...)
    minic.save(run, "out/tagger")
    again = minic.load_compiled("out/tagger")                    # a SavedSplitModel: the same steps

Each compiled piece is saved as the library it already is (minic/runtime/saved.py), in a
folder of its own, and a manifest lists the steps in order:

    out/tagger/
      manifest.json          "kind": "split": the values, the steps, what load_compiled checks
      constants.bin          the model's constants that a host step or the caller reads (if any)
      step0.part/            a compiled part: model.so, weights.bin, manifest.json
      step1.loop.body/       a loop's body, compiled once: the same, or a split folder of its own
      step2.part/            (a body with a loop or an if in it is a SplitModel too)

The manifest's ``values`` is a table of the values the steps pass (name, dtype, shape);
a step names its inputs and outputs by their place in it (``null``: an optional input left
out).  A compiled part's step names its folder; a host step names its op, the node it came
from (for error messages) and its attributes in JSON: a dtype as ``{"dtype": "f32"}``, a list
as a list, and a graph (a loop's body, an if's branch) as the folder of its compiled form and
its signature, which is all of the graph the host loop reads (``run_loop``).  They are read
back through the op's attribute dataclass and checked as when the model was built
(``OpDef.make_attrs``), and the steps are made by the function that made them before
(``split.host_step``): the loaded model runs the same code as the SplitModel, on the same
machine code.

Loading imports numpy, ctypes and minic's IR (the op registry, for the host ops' numpy
references): no LLVM, no torch, no lark.  What cannot be saved is refused in one line: a part
compiled again for each size that a call brings (``specialize.Specialized``: a saved model has
no compiler to compile the next one), an attribute JSON cannot hold.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

import minic
from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, attr_items
from minic.ir.types import DType, TensorType, symbols
from minic.runtime.saved_library import (FORMAT, MANIFEST, SavedModel, in_order, machine, read_arrays, read_manifest,
                                         write_arrays, write_compiled)
from minic.runtime.split import SplitModel, Step, host_step

KIND = "split"
CONSTANTS = "constants.bin"


# --- saving ----------------------------------------------------------------------------

class _Values:
    """The manifest's table of values, each numbered at its first mention."""

    def __init__(self) -> None:
        self.number: dict[Value, int] = {}
        self.table: list[dict[str, Any]] = []

    def ids(self, values: list[Value | None]) -> list[int | None]:
        return [None if v is None else self.id(v) for v in values]

    def id(self, v: Value) -> int:
        if v not in self.number:
            self.number[v] = len(self.table)
            self.table.append(_entry(v))
        return self.number[v]


def _entry(v: Value) -> dict[str, Any]:
    return {"name": v.name, "dtype": v.type.dtype.value, "shape": list(v.type.shape)}


def write_split(model: SplitModel, folder: Path) -> None:
    """``model``'s pieces, each in a folder of its own under the empty ``folder``, and its manifest."""
    graph, values = model.graph, _Values()
    inputs, steps, libraries = values.ids(graph.inputs), [], []
    for k, step in enumerate(model.steps):
        ids = {"inputs": values.ids(step.inputs), "outputs": values.ids(step.outputs)}
        if step.part is not None:
            sub = f"step{k}.part"
            libraries.append(_write_runner(step.run, folder / sub, f"{graph.name}: part {step.part.name}"))
            steps.append({"part": sub, "name": step.part.name, **ids})
            continue
        attrs = {}
        for name, v in attr_items(step.node.attrs):
            if isinstance(v, Graph):
                sub = f"step{k}.{step.node.op}.{name}"
                what = f"{graph.name}: {step.where}: its {name.replace('_', ' ')} @{v.name}"
                libraries.append(_write_runner(step.bodies[name], folder / sub, what))
                attrs[name] = {"graph": sub, "name": v.name, "inputs": [_entry(x) for x in v.inputs],
                               "outputs": [_entry(x) for x in v.outputs]}
            else:
                attrs[name] = _encode(v, f"{graph.name}: {step.where}: attribute '{name}'")
        steps.append({"op": step.node.op, "where": step.where, "attrs": attrs, **ids})
    read = {v for s in model.steps if s.part is None for v in s.inputs} | set(graph.outputs)
    constants = [c for c in graph.constants if c in read]
    arrays = write_arrays(folder / CONSTANTS, [(str(values.id(c)), c.type.dtype, c.data) for c in constants]) \
        if constants else []
    features = sorted({f for m in libraries for f in m.get("cpu_features", ())})
    manifest = {
        "format": FORMAT, "kind": KIND, "minic": minic.__version__, "name": graph.name,
        "machine": machine(), "cpu": next((m["cpu"] for m in libraries), None), "cpu_features": features,
        "inputs": [_entry(v) for v in graph.inputs], "outputs": [_entry(v) for v in graph.outputs],
        "graph_inputs": inputs, "graph_outputs": values.ids(graph.outputs), "constants": arrays,
        "steps": steps, "values": values.table,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _write_runner(runner: Any, folder: Path, what: str) -> dict[str, Any]:
    """``runner`` (a compiled part, body or branch) saved into the new ``folder``; its manifest."""
    from minic.runtime.compiled import CompiledModel
    from minic.runtime.specialize import Specialized
    folder.mkdir()
    if isinstance(runner, CompiledModel):
        write_compiled(runner, folder)
    elif isinstance(runner, SplitModel):
        write_split(runner, folder)
    elif isinstance(runner, Specialized):
        sizes = sorted({s for v in runner.inputs for d in v.type.shape for s in symbols(d)})
        raise UserError(f"minic.save: {what} is compiled again for each size of {', '.join(sizes)} that a call "
                        "brings (an op in it needs a static size), and a saved model has no compiler to do that")
    else:
        raise UserError(f"minic.save: {what} is a {type(runner).__name__}, which cannot be saved")
    return json.loads((folder / MANIFEST).read_text())


def _encode(v: Any, what: str) -> Any:
    """An attribute value as JSON: a dtype as {"dtype": "f32"}, a tuple as a list."""
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, DType):
        return {"dtype": v.value}
    if isinstance(v, tuple):
        return [_encode(x, what) for x in v]
    raise UserError(f"minic.save: {what} is a {type(v).__name__}, which a saved model's manifest cannot hold")


# --- loading ---------------------------------------------------------------------------

class SavedSplitModel(SplitModel):
    """A saved SplitModel: the same steps over the saved pieces (numpy in, numpy out; any thread)."""

    def __init__(self, folder: Path, graph: Graph, steps: list[Step]):
        super().__init__(graph, steps)
        self.folder, self.name = folder, graph.name

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.graph.inputs]

    def __call__(self, *arrays: np.ndarray, **named: np.ndarray):
        """Inputs in order, or by name (``model(**np.load("example_inputs.npz"))``)."""
        return super().__call__(*in_order(self.name, self.input_names, arrays, named))

    def __repr__(self) -> str:
        return f"SavedSplitModel({self.name}, {self.folder}: {super().__repr__()})"


def load_split(folder: Path, manifest: dict[str, Any]) -> SavedSplitModel:
    """The model that ``write_split`` saved in ``folder`` (its manifest read and checked)."""
    where = folder / MANIFEST
    try:
        values = [_value(v) for v in manifest["values"]]
        for entry, array in zip(manifest["constants"], read_arrays(folder / CONSTANTS, manifest["constants"])):
            values[int(entry["name"])].data = array
        pick = lambda ids: [None if i is None else values[i] for i in ids]      # noqa: E731
        graph = Graph(manifest["name"], pick(manifest["graph_inputs"]), pick(manifest["graph_outputs"]), [],
                      [v for v in values if v.is_constant])
        steps = []
        for k, s in enumerate(manifest["steps"]):
            inputs, outputs = pick(s["inputs"]), pick(s["outputs"])
            if "part" in s:
                part = Graph(s["name"], inputs, outputs)
                steps.append(Step(inputs, outputs, _load(folder / s["part"]), part=part))
                continue
            bodies = {name: _load(folder / a["graph"]) for name, a in s["attrs"].items()
                      if isinstance(a, dict) and "graph" in a}
            attrs = _attrs(s["op"], s["attrs"], f"{where}: step {k} ({s['op']})")
            steps.append(host_step(graph.name, Node(s["op"], inputs, outputs, attrs), s["where"], bodies))
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise UserError(f"{where}: not a manifest this minic wrote ({type(e).__name__}: {e})") from None
    return SavedSplitModel(folder, graph, steps)


def _load(folder: Path) -> SavedModel | SavedSplitModel:
    """A part, body or branch's folder: a library, or a split folder of its own (checked first)."""
    manifest = read_manifest(folder)
    return load_split(folder, manifest) if manifest.get("kind") == KIND else SavedModel(folder, manifest)


def _value(entry: dict[str, Any]) -> Value:
    return Value(entry["name"], TensorType(tuple(entry["shape"]), DType(entry["dtype"])))


def _attrs(op: str, encoded: dict[str, Any], what: str) -> Any:
    """A host step's attributes, read back through its op's dataclass and checked."""
    try:
        return ops.get(op).make_attrs(**{name: _decode(v) for name, v in encoded.items()})
    except UserError as e:
        raise UserError(f"{what}: {e}") from None


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_decode(x) for x in v)
    if isinstance(v, dict) and "dtype" in v:
        return DType(v["dtype"])
    if isinstance(v, dict) and "graph" in v:      # the signature of a body: what run_loop reads of it
        return Graph(v["name"], [_value(x) for x in v["inputs"]], [_value(x) for x in v["outputs"]])
    return v
