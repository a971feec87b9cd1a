"""Every command and code block of docs/ runs (see docrun.py), and the runner
itself fails on what it should fail on."""
from __future__ import annotations

from pathlib import Path

import pytest

from docrun import blocks, commands, missing_lines, run_page

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = sorted(DOCS.glob("*.md"))


def test_the_walkthrough_is_all_there():
    names = [p.name for p in PAGES]
    chapters = [n for n in names if n[:2].isdigit()]
    assert [n[:2] for n in chapters] == [f"{i:02d}" for i in range(1, 11)]
    index = (DOCS / "README.md").read_text()
    assert all(f"({n})" in index for n in chapters), "docs/README.md links every chapter"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_page_runs(page, tmp_path):
    failures = run_page(page, tmp_path)
    assert not failures, "\n\n".join(failures)


def test_parser_reads_fences_commands_and_expected_output():
    page = ("# t\n```console\n$ echo a \\\n  b\n a b\n...\n$ true\n```\n"
            "```python\nx = 1\n```\n```text output\nhello\n```\n```mc\ngraph\n```\n")
    found = blocks(page)
    assert [(b.lang, b.info, b.line) for b in found] == [("console", "", 2), ("python", "", 9),
                                                           ("text", "output", 12), ("mc", "", 15)]
    assert commands(found[0]) == [("echo a    b", ["a b"]), ("true", [])]
    assert missing_lines("x  a   b\n", ["a b", "c"]) == ["c"]


def test_runner_reports_failures(tmp_path):
    page = tmp_path / "bad.md"
    page.write_text("```python\nvalue = 41\n```\n```python\nprint(value + 1)\n```\n```text output\n42\n```\n"
                    "```python\nprint('no')\n```\n```text output\nyes\n```\n"
                    "```python\nraise ValueError('broken block')\n```\n"
                    "```console\n$ echo hi\nbye\n```\n```bash\nfalse\n```\n"
                    "```console\n$ python -m minic models --no-such-flag\n```\n")
    failures = run_page(page, tmp_path)
    assert len(failures) == 5, failures
    assert "output lacks ['yes']" in failures[0]
    assert "bad.md:16" in failures[1] and "broken block" in failures[1]
    assert "output lacks ['bye']" in failures[2]
    assert "`false` exited 1" in failures[3]
    assert "no-such-flag" in failures[4]
