"""The compile report: one self-contained HTML page about one model.

Read in this order: ``profile.py`` (time each kernel of a compiled Program),
``collect.py`` (walk the pipeline and every backend, keep what the page
shows), ``charts.py`` (bar charts as inline SVG), ``page.py`` (the HTML).

    data = collect("mlp", size="small")
    Path("report.html").write_text(render_page(data))
"""
from minic.report.collect import ReportData, collect
from minic.report.page import render_page
from minic.report.profile import KernelTime, Profile, profile_program

__all__ = ["KernelTime", "Profile", "ReportData", "collect", "profile_program", "render_page"]
