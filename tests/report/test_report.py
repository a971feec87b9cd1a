"""The compile report: per-kernel times agree with the interpreter, the charts
are proportional, the page holds every stage and is self-contained, the CLI
checks its input."""
from __future__ import annotations

import re
from html.parser import HTMLParser

import numpy as np
import pytest

import minic
from minic.cli import main
from minic.ir.interpret import interpret
from minic.report.charts import LABEL_W, PLOT_W, bar_chart
from minic.report.collect import MAX_STAGE_LINES, _stage
from minic.report.profile import profile_program
from minic.runtime import CompileOptions, prepare

STAGES = ("graph", "opt", "fused", "loops", "llvm", "asm")


def test_profile_runs_every_kernel_on_real_data():
    source = minic.load("llama-tiny", size="small")
    graph = minic.api.graph_of(source)
    program = prepare(graph, CompileOptions())
    prof = profile_program(program, source.example_inputs, repeat=2, budget_s=0.2)
    assert [k.name for k in prof.kernels] == [k.name for k in program.kernels]
    assert all(k.seconds > 0 for k in prof.kernels)
    assert prof.total == pytest.approx(sum(k.seconds for k in prof.kernels))
    # The kernel-by-kernel run computes the model: same numbers as the interpreter.
    want = interpret(graph, list(source.example_inputs))
    for got, ref in zip(prof.outputs, want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_profile_rejects_wrong_inputs():
    graph = minic.api.graph_of(minic.load("mlp", size="small"))
    with pytest.raises(minic.errors.UserError, match="1 inputs expected, got 2"):
        profile_program(prepare(graph), [np.zeros((2, 64), np.float32)] * 2)


def test_bar_chart_is_proportional_and_escaped():
    svg = bar_chart([("a<b>", 2.0), ("c", 1.0), ("zero", 0.0)], lambda v: f"{v:.1f} ms", "t & t")
    widths = [float(w) for w in re.findall(r'<rect x="\d+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert widths == [PLOT_W, PLOT_W / 2, 0.0]
    assert f'x="{LABEL_W}"' in svg and "a&lt;b&gt;" in svg and "t &amp; t" in svg and "<b>" not in svg
    assert bar_chart([], str, "empty") == ""


def test_long_stages_are_shortened_but_counted():
    stage = _stage("llvm", "t", "\n".join(f"line {i}" for i in range(MAX_STAGE_LINES + 5)))
    assert stage.lines == MAX_STAGE_LINES + 5
    assert stage.text.count("\n") == MAX_STAGE_LINES and "5 more lines" in stage.text


class _Tags(HTMLParser):
    """Counts open and close tags of the elements that must nest properly."""
    CHECKED = ("html", "body", "section", "details", "summary", "pre", "table", "svg", "div")

    def __init__(self) -> None:
        super().__init__()
        self.depth = {t: 0 for t in self.CHECKED}
        self.opened = {t: 0 for t in self.CHECKED}
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.depth:
            self.depth[tag] += 1
            self.opened[tag] += 1
        for name, value in attrs:
            if name in ("src", "href") and value and not value.startswith("#"):
                self.external.append(f"{tag} {name}={value}")

    def handle_endtag(self, tag):
        if tag in self.depth:
            self.depth[tag] -= 1
            assert self.depth[tag] >= 0, f"</{tag}> without <{tag}>"


def test_page_holds_every_part_and_is_self_contained(mlp_report):
    data, path = mlp_report
    page = path.read_text()
    tags = _Tags()
    tags.feed(page)
    assert all(d == 0 for d in tags.depth.values()), tags.depth
    assert tags.external == [] and "<script" not in page and "<link" not in page
    assert [s.key for s in data.stages] == list(STAGES)
    for key in STAGES:
        assert f'id="stage-{key}"' in page
    assert tags.opened["details"] == len(STAGES) + 1              # + pass statistics
    assert "define void @&quot;minic_entry&quot;" in page            # LLVM IR, escaped
    assert "%x: f32[B, 64]" in page                                  # the graph's text form
    for k in data.profile.kernels:
        assert k.name in page
    assert [p.cell.backend for p in data.paths] == ["torch", "interp", "minic"]
    assert all(p.cell.status == "ok" and p.latency_s > 0 for p in data.paths)
    assert "median latency" in page and "median time per kernel" in page
    assert tags.opened["svg"] == 4 and "kernel #g0" in page     # two graphs and two charts
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert data.coverage.paths == ["interp", "minic"]             # the debug paths of the chosen backends
    assert [r.op for r in data.coverage.rows] == ["gemm", "transpose", "relu"]   # most nodes first
    assert 'id="coverage"' in page and "<td><code>gemm</code></td><td class=\"num\">2</td>" in page


def test_without_graphviz_the_page_says_what_to_install(monkeypatch, tmp_path):
    """The report is still written; each graph picture's place holds the one-line message."""
    from minic.report.collect import _picture
    monkeypatch.setenv("PATH", str(tmp_path))              # no programs at all
    picture = _picture(minic.api.graph_of(minic.load("mlp", size="small")), "@mlp as imported")
    assert picture.svg == ""
    assert picture.note.startswith("the report's picture of @mlp as imported needs 'dot', which is not installed")
    assert "apt-get install graphviz" in picture.note


def test_text_from_the_model_is_escaped():
    """Error details and IR text arrive on the page as text, never as markup."""
    from minic.verify.matrix import Cell
    from minic.report import ReportData, render_page
    from minic.report.collect import PathResult, Picture
    data = ReportData("m", "x: float32[3]", "torch", 2, stages=[_stage("graph", "t", "%a = f(<b>)")],
                      pictures=[Picture("p", "", "dot is missing")],
                      paths=[PathResult(Cell("m", "tvm", "crash", detail="<script>alert(1)</script>"), 0.0)])
    page = render_page(data)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "f(&lt;b&gt;)" in page and "dot is missing" in page
    assert "Per-kernel timing was not run" in page and '<td class="crash">crash</td>' in page


def test_cli_writes_a_report_from_a_text_ir_file(tmp_path, capsys):
    mc = tmp_path / "mlp.mc"
    assert main(["show", "mlp", "--size", "small", "-o", str(mc)]) == 0
    out = tmp_path / "r.html"
    assert main(["report", str(mc), "-o", str(out), "--backends", "torch,minic", "--repeat", "1"]) == 0
    page = out.read_text()
    # No torch module behind a .mc file: the interpreter is the reference, torch cannot run.
    assert "<b>interp</b> is the reference" in page
    assert re.search(r"<td>torch</td><td class=\"unsupported\">unsupported</td>", page)
    assert str(out) in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["-o", "r.txt"], "name it .html"),
    (["-o", "r.html", "--backends", "nope"], "nope"),
    (["-o", "r.html", "--repeat", "0"], "--repeat must be at least 1"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "mlp", "--size", "small", *args]) == 1
    err = capsys.readouterr().err
    assert message in err and err.startswith("error:") and not list(tmp_path.iterdir())


def test_the_report_and_verify_judge_a_low_precision_path_by_the_same_bound(monkeypatch, tmp_path):
    """A path that states its own bound (as qnn's fp16 HTP does, 2e-2) and is 1.7e-4 off:
    ``verify`` said ok while the page said mismatch (it judged every path at f32's 1e-4)."""
    from minic import backends
    from minic.cli.verify_cmd import verify_models
    from minic.report import collect, render_page

    def lowp(source, **options):
        reference = backends.get("torch")(source)
        return lambda *arrays: reference(*arrays) + np.float32(1.7e-4)
    lowp.tolerance = 2e-2
    monkeypatch.setitem(backends._BACKENDS, "lowp", lowp)
    [cell] = verify_models(["mlp"], ["lowp"], "small", 0)
    assert cell.status == "ok" and cell.errors.abs > 1e-4 and cell.tolerance == 2e-2
    data = collect("mlp", size="small", backend_names=["lowp"], repeat=1, profile=False, coverage=False)
    assert [(p.cell.backend, p.cell.status) for p in data.paths] == [("torch", "ok"), ("lowp", "ok")]
    assert re.search(r'<td>lowp</td><td class="ok">ok</td><td class="num">1\.7e-04</td>'
                     r'<td class="num">2e-02</td>', render_page(data))


def test_the_report_runs_the_reference_and_minic_unless_asked_and_says_how_long(tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", "mlp", "--size", "small", "-o", str(out), "--repeat", "1", "--no-profile"]) == 0
    page = out.read_text()
    ran = re.findall(r'<tr><td>([a-z]+)</td><td class="(?:ok|mismatch|crash|unsupported)">', page)
    assert ran == ["torch", "minic"]
    err = capsys.readouterr().err
    # progress: one line per step with the time so far, the coverage's steps among them
    assert re.search(r"^\[1/\d+ \d+\.\ds\] report: graph passes$", err, re.M), err
    assert re.search(r"^\[\d+/\d+ \d+\.\ds\] report: coverage: gemm on minic$", err, re.M), err
    from minic.report.collect import chosen_backends, coverage_paths
    assert chosen_backends(None) == ["minic"] and coverage_paths(None) == ["interp", "minic"]
    from minic import backends
    assert set(coverage_paths(backends.names())) > {"interp", "minic", "onnxruntime", "tvm"}
