"""Fuzzing the ONNX importer with mutated valid models: whatever the mutation,
only minic.UserError may come out, and whatever imports must verify."""
from __future__ import annotations

import copy
import warnings

import numpy as np
import onnx
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import helper

from minic import models
from minic.errors import UserError
from minic.frontend.onnx import from_onnx, from_onnx_file
from minic.ir.interpret import interpret
from minic.ir.verify import verify


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> list[onnx.ModelProto]:
    """Exported small zoo models: the valid starting points."""
    out = []
    for name in ("mlp", "cnn", "llama-tiny"):
        module, inputs = models.get(name, size="small")
        info = models.info(name)
        path = tmp_path_factory.mktemp("onnx") / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, inputs, str(path), input_names=list(info.input_names),
                              dynamic_axes={n: dict(a) for n, a in zip(info.input_names, info.dynamic_axes)},
                              opset_version=17, dynamo=False)
        out.append(onnx.load(str(path)))
    return out


def _import(model) -> None:
    try:
        graph = verify(from_onnx(model))
    except UserError:
        return
    # What imports must also run or refuse clearly (shapes B=2, T=3 for symbols).
    arrays = []
    for v in graph.inputs:
        shape = [d if isinstance(d, int) else 3 for d in v.type.shape]
        arrays.append(np.zeros(shape, v.type.dtype.numpy) if v.type.dtype.value != "f32"
                      else np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    try:
        interpret(graph, arrays)
    except (UserError, FloatingPointError):
        pass


MUTATIONS = st.sampled_from(["op_type", "drop_input", "swap_inputs", "attr", "dim", "elem_type",
                             "drop_node", "reorder", "initializer", "opset"])


def mutate(model: onnx.ModelProto, kind: str, data) -> onnx.ModelProto:
    m = copy.deepcopy(model)
    nodes = m.graph.node
    if not nodes:
        return m
    node = nodes[data.draw(st.integers(0, len(nodes) - 1))]
    if kind == "op_type":
        node.op_type = data.draw(st.sampled_from(["Relu", "MatMul", "Gather", "Reshape", "Concat", "Conv",
                                                  "Softmax", "Slice", "Transpose", "NoSuchOp", "Split"]))
    elif kind == "drop_input" and node.input:
        del node.input[data.draw(st.integers(0, len(node.input) - 1))]
    elif kind == "swap_inputs" and len(node.input) > 1:
        node.input[0], node.input[1] = node.input[1], node.input[0]
    elif kind == "attr" and node.attribute:
        a = node.attribute[data.draw(st.integers(0, len(node.attribute) - 1))]
        value = data.draw(st.one_of(st.integers(-5, 5), st.lists(st.integers(-5, 5), min_size=1, max_size=5), st.floats(-3, 3)))
        node.attribute.remove(a)
        node.attribute.append(helper.make_attribute(a.name, value))
    elif kind == "dim":
        dims = m.graph.input[0].type.tensor_type.shape.dim
        if dims:
            d = dims[data.draw(st.integers(0, len(dims) - 1))]
            d.dim_value = data.draw(st.integers(0, 7))
    elif kind == "elem_type":
        m.graph.input[0].type.tensor_type.elem_type = data.draw(st.sampled_from([1, 6, 7, 9, 10, 11, 2, 8]))
    elif kind == "drop_node":
        nodes.remove(node)
    elif kind == "reorder" and len(nodes) > 1:
        i, j = data.draw(st.integers(0, len(nodes) - 1)), data.draw(st.integers(0, len(nodes) - 1))
        a, b = copy.deepcopy(nodes[i]), copy.deepcopy(nodes[j])
        nodes[i].CopyFrom(b)
        nodes[j].CopyFrom(a)
    elif kind == "initializer" and m.graph.initializer:
        t = m.graph.initializer[data.draw(st.integers(0, len(m.graph.initializer) - 1))]
        t.dims[:] = [data.draw(st.integers(0, 4)) for _ in range(data.draw(st.integers(0, 3)))]
    elif kind == "opset":
        m.opset_import[0].version = data.draw(st.integers(1, 30))
    return m


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), kinds=st.lists(MUTATIONS, min_size=1, max_size=3))
def test_mutated_models_raise_only_user_errors(seeds, data, kinds):
    model = seeds[data.draw(st.integers(0, len(seeds) - 1))]
    for kind in kinds:
        model = mutate(model, kind, data)
    _import(model)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_corrupted_files_raise_only_user_errors(seeds, data, tmp_path_factory):
    raw = bytearray(seeds[data.draw(st.integers(0, len(seeds) - 1))].SerializeToString())
    for _ in range(data.draw(st.integers(1, 8))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path_factory.mktemp("bad") / "m.onnx"
    path.write_bytes(bytes(raw))
    try:
        verify(from_onnx_file(path))
    except UserError:
        pass
