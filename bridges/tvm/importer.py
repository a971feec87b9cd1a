"""Step 1 of the lab: a model → a Relax IRModule, checked for well-formedness.

The seed imported with ``relay.frontend.from_pytorch``; Relay is gone (TVM 0.20)
and today's entry points are

* ``relax.frontend.torch.from_exported_program`` — takes a ``torch.export``
  program (the graph PyTorch itself traced, already decomposed to core ATen ops);
* ``relax.frontend.onnx.from_onnx`` — takes an ONNX ModelProto (the files the
  ONNX bridge writes).

Both give an IRModule whose ``main`` is one Relax function over typed tensors
(the Relax word for Relay's "type" is "struct info", printed as ``R.Tensor((4, 64),
dtype="float32")``).  Weights are embedded as constants so that FoldConstant can
pre-compute anything that depends only on them (e.g. the transposes of Linear).

Shapes are static: one IRModule per input shape (the backend caches them).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from minic.errors import MinicError, UnsupportedError, UserError


@dataclass
class Imported:
    """A model as Relax: the module, and how to call its ``main``."""

    name: str
    mod: Any                                  # tvm.IRModule
    input_names: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]


def from_torch(module: Any, example_inputs: tuple[np.ndarray, ...], name: str = "model") -> Imported:
    """torch.nn.Module + example inputs → torch.export → Relax (static shapes)."""
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    inputs = tuple(torch.from_numpy(np.asarray(a, order="C")) for a in example_inputs)
    try:
        program = torch.export.export(module.eval(), inputs)
    except Exception as e:  # torch raises many kinds; the user needs one line
        raise UnsupportedError(f"{name}: torch.export failed: {type(e).__name__}: {_first_line(e)}") from e
    try:
        # unwrap_unit_return_tuple: a model with one output returns a tensor, not a 1-tuple
        mod = from_exported_program(program, unwrap_unit_return_tuple=True, custom_convert_map=CONVERTERS)
    except Exception as e:  # the frontend raises plain Python errors for ops it lacks
        raise UnsupportedError(f"{name}: TVM's torch frontend cannot import it: "
                               f"{type(e).__name__}: {_first_line(e)}") from e
    imported = Imported(name, mod, _param_names(mod), tuple(tuple(a.shape) for a in example_inputs),
                        tuple(str(a.dtype) for a in example_inputs))
    check_well_formed(imported.mod, f"{name} after import")
    return imported


def _min_dim(node: Any, importer: Any) -> Any:
    """``aten.min.dim`` (values and indices along one axis).  TVM 0.27's torch.export frontend
    converts ``max.dim`` (with Relax's ``topk``) but has no ``min.dim``: the same with the
    smallest taken.  A frontend converter is this: a torch.fx node in, Relax expressions
    emitted into the importer's block builder, the node's value out."""
    from tvm import relax
    x, dim = importer.env[node.args[0]], node.args[1]
    keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    bb = importer.block_builder
    both = bb.emit(relax.op.topk(x, k=1, axis=dim, largest=False, ret_type="both", dtype="int64"))
    values, indices = both[0], both[1]
    if not keepdim:
        values = bb.emit(relax.op.squeeze(values, axis=[dim]))
        indices = bb.emit(relax.op.squeeze(indices, axis=[dim]))
    return bb.emit(relax.Tuple([values, indices]))


# ATen ops TVM's torch frontend lacks, converted by the bridge (docs/production-bugs.md, Limitations)
CONVERTERS = {"min.dim": _min_dim}


def from_onnx(path: str | Path, example_inputs: tuple[np.ndarray, ...], name: str | None = None) -> Imported:
    """An .onnx file → Relax, with every graph input bound to the example's shape."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx as relax_from_onnx

    from minic.frontend.onnx import graph_input_names

    path = Path(path)
    name = name or path.stem
    try:
        model = onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 - protobuf and onnx raise several kinds on bad files
        raise UserError(f"{path}: cannot read ONNX file: {_first_line(e)}") from e
    graph_inputs = graph_input_names(model)
    if len(graph_inputs) != len(example_inputs):
        raise UserError(f"{path}: the model has {len(graph_inputs)} inputs "
                        f"({', '.join(graph_inputs)}) but {len(example_inputs)} arrays were given")
    shapes = {n: list(a.shape) for n, a in zip(graph_inputs, example_inputs)}
    dtypes = {n: str(a.dtype) for n, a in zip(graph_inputs, example_inputs)}
    try:
        mod = relax_from_onnx(model, shape_dict=shapes, dtype_dict=dtypes)
    except Exception as e:
        raise UnsupportedError(f"{path}: TVM's ONNX frontend cannot import it: "
                               f"{type(e).__name__}: {_first_line(e)}") from e
    imported = Imported(name, mod, tuple(graph_inputs), tuple(tuple(a.shape) for a in example_inputs),
                        tuple(str(a.dtype) for a in example_inputs))
    check_well_formed(imported.mod, f"{name} after import")
    return imported


def check_well_formed(mod: Any, where: str) -> None:
    """Raise if ``mod`` breaks Relax's rules (every value typed, vars defined once, ...).

    This is the Relax counterpart of Relay's type checker: ``well_formed`` also
    checks that every expression carries struct info (``check_ty=True``).
    """
    from tvm import relax

    if not relax.analysis.check_well_formed(mod, check_ty=True):
        try:                       # the raising variant says what is wrong
            relax.analysis.well_formed(mod, check_ty=True)
        except Exception as e:
            raise MinicError(f"{where}: the Relax module is not well formed: {_first_line(e)}") from e
        raise MinicError(f"{where}: the Relax module is not well formed")


def signature(mod: Any) -> str:
    """``main``'s typed signature, e.g. ``main(x: R.Tensor((4, 64), "float32")) -> R.Tensor(...)``."""
    main = mod["main"]
    params = ", ".join(f"{p.name}: {p.ty}" for p in main.params)
    return f"main({params}) -> {main.ret_ty}"


def _param_names(mod: Any) -> tuple[str, ...]:
    return tuple(p.name for p in mod["main"].params)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
