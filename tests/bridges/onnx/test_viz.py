"""Graph pictures: the dot source names the ops; dot renders SVG and PNG."""

import pytest

from bridges.onnx.viz import render, to_dot


def test_dot_source_shows_ops_and_hides_weights(llama_small):
    source = to_dot(llama_small[0].model, "before").source
    assert "MatMul" in source and "Softmax" in source and "input_ids" in source
    assert "embed.weight" not in source                   # initializers are left out


def test_after_picture_has_fewer_shape_boxes(llama_small, llama_small_opt):
    before = to_dot(llama_small[0].model).source.count('label=Shape ')
    after = to_dot(llama_small_opt[0]).source.count('label=Shape ')
    assert after < before


def test_render_writes_svg_and_png(tmp_path, llama_small_opt):
    svg, png = render(llama_small_opt[0], tmp_path / "after", "after")
    assert svg.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
