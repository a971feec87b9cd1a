"""What the ``qnn`` commands start from: a zoo model or an ``.onnx`` file.

A zoo name goes through ``minic.api.load`` (torch module, example inputs).  An
``.onnx`` file is taken as it is, without minic's importer (a model may hold ops
minic does not know, which is often why it is being placed): its example
inputs are seeded random arrays of its input types, symbolic dims set to
``dim``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

from minic.backends import ModelSource


def onnx_example_inputs(model: onnx.ModelProto, seed: int = 0, dim: int = 2) -> tuple[np.ndarray, ...]:
    from minic.frontend.onnx import graph_input_names

    rng = np.random.default_rng(seed)
    infos = {i.name: i for i in model.graph.input}
    out = []
    for name in graph_input_names(model):
        tensor = infos[name].type.tensor_type
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        shape = tuple(d.dim_value if d.HasField("dim_value") else dim for d in tensor.shape.dim)
        if np.issubdtype(dtype, np.floating):
            out.append(rng.standard_normal(shape).astype(dtype))
        else:
            out.append(rng.integers(0, 2, shape).astype(dtype))
    return tuple(out)


def source_of(model: str, size: str = "small", seed: int = 0) -> ModelSource:
    """A ModelSource for a zoo name or an ``.onnx`` path."""
    if model.endswith(".onnx"):
        from bridges.onnx.export import load

        path = Path(model)
        return ModelSource(path.stem, onnx_example_inputs(load(path), seed), onnx_path=path)
    from minic.api import load as load_zoo

    return load_zoo(model, size=size, seed=seed)
