"""Export: opsets, dynamic axes, the full checker, and clear errors."""
import numpy as np
import onnx
import pytest
import torch

from bridges.onnx.export import check, export_module, export_zoo, load
from minic.errors import UnsupportedError, UserError


def dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def test_llama_exports_with_named_batch_and_seq_axes(llama_small):
    exported, _ = llama_small
    model = exported.model
    assert model.opset_import[0].version == 17
    assert dims(model.graph.input[0]) == ["B", "T"]
    assert dims(model.graph.output[0]) == ["B", "T", 256]
    check(model)                                  # full check, raises on any violation


@pytest.mark.parametrize("name,axes", [("mlp", ["B", 64]), ("cnn", ["B", 3, 16, 16])])
def test_cnns_and_mlps_get_a_dynamic_batch_only(name, axes):
    exported, _ = export_zoo(name, "small")
    assert dims(exported.model.graph.input[0]) == axes


def test_newer_opset_on_request():
    exported, _ = export_zoo("mlp", "small", opset=20)
    assert exported.model.opset_import[0].version == 20


def test_unsupported_opset_is_a_clear_error():
    with pytest.raises(UnsupportedError, match="opset 99"):
        export_zoo("mlp", "small", opset=99)


def test_checker_violation_is_reported_in_one_line(llama_small):
    broken = onnx.ModelProto()
    broken.CopyFrom(llama_small[0].model)
    broken.graph.node[5].input.append("no_such_value")
    with pytest.raises(UserError, match="ONNX checker rejected the model"):
        check(broken)


def test_user_module_exports_and_runs():
    module = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    exported = export_module(module, (torch.randn(2, 4),), input_names=("x",),
                             dynamic_axes=({0: "B"},))
    assert dims(exported.model.graph.input[0]) == ["B", 4]
    assert isinstance(exported.example_inputs[0], np.ndarray)


def test_load_rejects_missing_and_corrupt_files(tmp_path):
    with pytest.raises(UserError, match="no such ONNX file"):
        load(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x99\xff not protobuf")
    with pytest.raises(UserError, match="not a readable ONNX model"):
        load(bad)


class GroupedQueryAttention(torch.nn.Module):
    def forward(self, q, kv):
        return torch.nn.functional.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)


class Asserts(torch.nn.Module):
    def forward(self, x):
        assert x.shape[0] == 3, "the model's own check"
        return x + 1


def test_a_conversion_the_exporter_refuses_is_unsupported_with_its_own_words():
    q, kv = torch.randn(1, 4, 5, 8), torch.randn(1, 2, 5, 8)
    with pytest.raises(UnsupportedError) as info:
        export_module(GroupedQueryAttention(), (q, kv), input_names=("q", "kv"), dynamic_axes=({}, {}))
    assert str(info.value) == ("torch.onnx.export: conversion of scaled_dot_product_attention "
                               "not implemented if enable_gqa is True")
    with pytest.raises(AssertionError, match="the model's own check"):     # the model's, not the exporter's
        export_module(Asserts(), (torch.randn(2, 4),), input_names=("x",), dynamic_axes=({},))
