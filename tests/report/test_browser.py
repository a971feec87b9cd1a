"""The report in a real browser (headless Chromium): it loads with no console
error, its SVGs render, its screenshot is not blank — and the checks
themselves catch a broken or blank page, so a pass means something."""
from __future__ import annotations


import pytest

MIN_COLOURS = 16          # text, boxes in several colours, bars: a blank or unstyled page has a handful
MIN_INK = 0.02            # share of the screenshot that is not background


def test_report_renders_without_errors(chromium, mlp_report, tmp_path):
    data, path = mlp_report
    page = chromium.check(path)
    assert page.errors == []
    assert page.screenshot.startswith(b"\x89PNG")
    (tmp_path / "report.png").write_bytes(page.screenshot)
    assert page.colours >= MIN_COLOURS and page.ink >= MIN_INK, (page.colours, page.ink)
    assert len(page.svgs) == 4                             # graph before/after + two charts
    for svg in page.svgs:                                  # laid out, with something drawn in it
        assert svg["w"] > 50 and svg["h"] > 50 and svg["shapes"] >= 2, svg


def test_checker_catches_script_errors(chromium, tmp_path):
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><p>text</p>"
                   "<script>console.error('deliberate'); undefinedFunction();</script></body></html>")
    errors = chromium.check(bad).errors
    assert any("deliberate" in e for e in errors)
    assert any("undefinedFunction is not defined" in e for e in errors)


def test_checker_catches_missing_resources(chromium, tmp_path):
    page = tmp_path / "missing.html"
    page.write_text('<!DOCTYPE html><html><body><img src="nowhere.png" alt="x"></body></html>')
    assert any("nowhere.png" in e or "ERR_FILE_NOT_FOUND" in e for e in chromium.check(page).errors)


def test_checker_sees_a_blank_page(chromium, tmp_path):
    blank = tmp_path / "blank.html"
    blank.write_text("<!DOCTYPE html><html><body></body></html>")
    page = chromium.check(blank)
    assert page.errors == [] and page.svgs == []
    assert page.colours < MIN_COLOURS and page.ink < MIN_INK


@pytest.mark.parametrize("svg, ok", [
    ('<svg width="200" height="100"><rect width="200" height="100" fill="red"/><circle r="5"/></svg>', True),
    ('<svg width="0" height="0"></svg>', False),
])
def test_svg_probe_measures_what_is_drawn(chromium, tmp_path, svg, ok):
    page = tmp_path / "svg.html"
    page.write_text(f"<!DOCTYPE html><html><body>{svg}</body></html>")
    (got,) = chromium.check(page).svgs
    assert (got["w"] > 50 and got["shapes"] >= 1) == ok
