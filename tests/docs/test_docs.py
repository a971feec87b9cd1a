"""Every command and code block of docs/ runs (see docrun.py), and the runner
itself fails on what it should fail on."""
from __future__ import annotations

from pathlib import Path

import pytest

import docrun
from docrun import Edit, apply, blocks, commands, cut, mismatch, refresh_sources, run_page, source_of

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
# The READMEs whose command blocks run too (a console block there is run unless marked not-run).
READMES = [ROOT / "bridges" / name / "README.md" for name in ("onnx", "tvm", "mlir", "qnn", "iree")] + \
    [ROOT / "minic" / "aarch64" / "README.md"]


def test_the_walkthrough_is_all_there():
    names = [p.name for p in PAGES]
    chapters = [n for n in names if n[:2].isdigit()]
    assert [n[:2] for n in chapters] == [f"{i:02d}" for i in range(1, 14)]
    index = (DOCS / "README.md").read_text()
    assert all(f"({n})" in index for n in chapters), "docs/README.md links every chapter"


@pytest.mark.parametrize("page", PAGES + READMES, ids=[p.stem for p in PAGES] +
                         [str(p.parent.relative_to(ROOT)) for p in READMES])
def test_page_runs(page, tmp_path):
    failures = run_page(page, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_parser_reads_fences_commands_and_expected_output():
    page = ("# t\n```console\n$ echo a \\\n  b\n a b\n...\n$ true\n```\n"
            "```python\nx = 1\n```\n```text output\nhello\n```\n```mc\ngraph\n```\n")
    found = blocks(page)
    assert [(b.lang, b.info, b.line) for b in found] == [("console", "", 2), ("python", "", 9),
                                                           ("text", "output", 12), ("mc", "", 15)]
    assert commands(found[0]) == [("echo a    b", [" a b", "..."]), ("true", [])]
    assert page[found[2].start:found[2].end] == "hello\n"


def test_whole_output_with_elision_and_masks(tmp_path):
    out = f"head\n  took 12.5 ms  (3.1x, 80 GFLOPS)\nat 0x7f3a9c0b1d20 in {tmp_path}/x.mc\nmiddle\n\ntail\n"
    shown = ["head", "took 9.0 ms (1.2x, 75.5 GFLOPS)", "at 0x7f00deadbeef in /tmp/scratch/x.mc", "...", "tail"]
    assert mismatch(out, shown, tmp_path) is None
    assert mismatch("compile 1.99 s\n", ["compile 880.893 ms"]) is None                         # a time is a time
    assert mismatch("compile 1.99 s\n", ["compile 1.99 GB/s"]) is not None
    assert mismatch(out, ["head", "..."]) is None
    assert mismatch(out, ["head", "...", "middle"]) == "output differs from what the page shows"   # tail unshown
    assert mismatch(out, ["head", "took ... ms (...)", "..."]) is None                             # inside a line
    assert mismatch("a\nb\n", ["a", "c"]) == "output differs from what the page shows"
    assert mismatch("a\n", []) == "prints output that the page does not show"
    assert mismatch("", []) is None
    # A measured error's digits follow the host's BLAS kernels (numpy's matmul under OPENBLAS_CORETYPE=Haswell
    # and without it differ in the last bits), so they are masked like times; the verdict and stated bounds are not.
    assert mismatch("err 1.5e-07 of 3 %\n", ["err 0.00e+00 of 3 %"]) is None
    assert mismatch("ok 1.5e-07\n", ["mismatch 1.5e-07"]) is not None
    assert mismatch("tolerance 1e-4\n", ["tolerance 1e-5"]) is not None
    assert mismatch("err 1.5e-07 of 3 %\n", ["err 1.5e-07 of 4 %"]) is not None
    assert mismatch("err 3.1e+02\n", ["err 1.8e-07"]) is not None                     # a large error shows
    assert mismatch("min_val = 1.000000e+00\n", ["min_val = 0.000000e+00"]) is not None   # an IR constant
    assert mismatch("minic True\n", ["minic True"]).startswith("prints a bare boolean")
    assert mismatch("True\n", ["True"]).startswith("prints a bare boolean")


def test_update_writes_the_real_output(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("```python\nprint('a')\n```\n\n```python\nprint('b\\nc')\n```\n```text output\nold\n```\n"
                    "```console\n$ echo x\nold\n$ echo y\n...\n```\n")
    edits: list[Edit] = []
    assert len(run_page(page, tmp_path, edits)) == 3
    page.write_text(apply(page.read_text(), edits))
    assert page.read_text() == ("```python\nprint('a')\n```\n\n```text output\na\n```\n\n"
                                "```python\nprint('b\\nc')\n```\n```text output\nb\nc\n```\n"
                                "```console\n$ echo x\nx\n$ echo y\n...\n```\n")
    assert run_page(page, tmp_path) == []
    long = "dense<" + "ab " * 100 + ">"
    assert cut(long).endswith(" ...") and len(cut(long)) < 200 and mismatch(long + "\n", [cut(long)]) is None


def test_runner_reports_failures(tmp_path):
    page = tmp_path / "bad.md"
    page.write_text("```python\nvalue = 41\n```\n```python\nprint(value + 1)\n```\n```text output\n42\n```\n"
                    "```python\nprint('no')\n```\n```text output\nyes\n```\n"
                    "```python\nraise ValueError('broken block')\n```\n"
                    "```console\n$ echo hi\nbye\n```\n```bash\nfalse\n```\n"
                    "```console\n$ python -m minic models --no-such-flag\n```\n"
                    "```console not-run:\n$ false\n```\n```console not-run: takes an hour\n$ false\n```\n"
                    "```\nan excerpt\n```\n```text not-run: from a benchmark\nshown\n```\n"
                    "```python not-run: a sketch\nprint(1)\n```\n```text output\n1\n```\n")
    failures = run_page(page, tmp_path)
    assert len(failures) == 8, failures
    assert "output differs" in failures[0] and "no" in failures[0]
    assert "bad.md:16" in failures[1] and "broken block" in failures[1]
    assert "`echo hi` output differs" in failures[2]
    assert "`false` exited 1" in failures[3]
    assert "no-such-flag" in failures[4]
    assert "says why" in failures[5]
    assert "neither run nor marked" in failures[6]             # an unmarked excerpt: it could drift
    assert "follows the python block" in failures[7]


def test_a_quote_is_the_code_as_it_is(tmp_path, monkeypatch):
    """A ```python source=PATH:SYMBOL block must be that symbol's source: a page that quotes code
    fails when the code changes under it, and --sources writes the new code in."""
    monkeypatch.setattr(docrun, "ROOT", tmp_path)
    module = tmp_path / "pkg" / "m.py"
    module.parent.mkdir()
    module.write_text("X = 1\n\n\n@deco\ndef f(a):\n    return a + X   # why\n\n\n"
                      "class C:\n    def g(self):\n        return 2\n")
    assert source_of("pkg/m.py:f") == "@deco\ndef f(a):\n    return a + X   # why\n"
    assert source_of("pkg/m.py:C.g") == "def g(self):\n    return 2\n"          # a method, dedented
    assert source_of("pkg/m.py:X") == "X = 1\n"
    page = tmp_path / "p.md"
    page.write_text("```python source=pkg/m.py:f\n@deco\ndef f(a):\n    return a + X   # why\n```\n"
                    "```python source=pkg/m.py:C.g\ndef g(self):\n    return 2\n```\n")
    assert run_page(page, tmp_path) == []
    module.write_text(module.read_text().replace("a + X", "a - X"))              # the code moves on
    (failure,) = run_page(page, tmp_path)
    assert "p.md:1: the quote of pkg/m.py:f is not the code" in failure and "--sources" in failure
    assert refresh_sources(page) == 1 and "return a - X" in page.read_text()
    assert run_page(page, tmp_path) == []
    module.write_text("X = 1\n")                                                 # f is gone
    failures = run_page(page, tmp_path)
    assert len(failures) == 2 and "defines no 'f'" in failures[0] and "defines no 'C.g'" in failures[1]
    page.write_text("```python source=pkg/gone.py:f\nx\n```\n```python source=pkg/m.py:X\nX = 1\n```\n"
                    "```text output\n1\n```\n")
    failures = run_page(page, tmp_path)
    assert "no file pkg/gone.py" in failures[0] and "follows the python block" in failures[1]


def test_quotes_read_the_real_tree():
    assert source_of("minic/passes/reshapes.py:reshape_pair").startswith("@rule(*RESHAPES)\ndef reshape_pair(")
    assert source_of("minic/passes/manager.py:PASSES").startswith("PASSES: dict[str, Pass] = {")
    assert source_of("minic/passes/fuse_groups.py:__doc__").startswith('"""Fusion: decide which nodes')


def test_a_page_runs_the_code_of_its_own_tree(tmp_path):
    """A page's Python and commands import the minic beside it, not one an editable install names."""
    page = tmp_path / "p.md"
    page.write_text("```python\nimport minic\nprint(minic.__file__)\n```\n```text output\n"
                    f"{docrun.ROOT}/minic/__init__.py\n```\n"
                    "```console\n$ python -c 'import minic; print(minic.__file__)'\n"
                    f"{docrun.ROOT}/minic/__init__.py\n```\n")
    assert run_page(page, tmp_path) == []
