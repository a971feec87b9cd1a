"""Graph pictures: fused groups are boxed, files are real pictures, errors are clear."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

import minic
from minic.cli import main
from minic.errors import UserError
from minic.passes import optimize
from minic.viz import render, to_dot


def test_groups_become_clusters_and_all_ops_appear():
    graph = optimize(minic.api.graph_of(minic.load("cnn", size="small")), level=2)
    dot = to_dot(graph).source
    groups = {n.group for n in graph.nodes if n.group is not None}
    assert groups and all(f"cluster_g{g}" in dot for g in groups)
    for node in graph.nodes:
        assert node.op in dot


def test_render_svg_and_png(tmp_path, capsys):
    assert main(["viz", "cnn", "--size", "small", "-o", str(tmp_path / "g.svg"), "--after", "fuse-groups"]) == 0
    root = ET.parse(tmp_path / "g.svg").getroot()
    assert root.tag.endswith("svg") and "kernel #g0" in (tmp_path / "g.svg").read_text()
    assert main(["viz", "mlp", "--size", "small", "-o", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_graphviz_one_line_names_the_package(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))              # no programs at all
    assert main(["viz", "mlp", "--size", "small", "-o", str(tmp_path / "g.svg")]) == 1
    err = capsys.readouterr().err
    assert f"drawing {tmp_path / 'g.svg'} needs 'dot', which is not installed (Debian: apt-get install graphviz" in err
    assert len(err.strip().splitlines()) == 1
    assert main(["viz", "mlp", "--size", "small", "-o", str(tmp_path / "g.dot")]) == 0    # .dot needs no dot


def test_errors(tmp_path, capsys):
    with pytest.raises(UserError, match="unknown picture format"):
        render(to_dot(minic.api.graph_of(minic.load("mlp", size="small"))), tmp_path / "g.jpeg")
    assert main(["viz", "mlp", "--size", "small", "-o", str(tmp_path / "g.svg"), "--after", "no-such-pass"]) == 1
    assert "not in the pipeline" in capsys.readouterr().err
