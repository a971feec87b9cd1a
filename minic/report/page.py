"""The compile report as one self-contained HTML page.

Everything is inline — the CSS, the graph pictures (graphviz's SVG) and the
charts (``charts.py``) — so the file can be mailed, attached to CI, or opened
from disk with no network.  The page needs no JavaScript: the IR of each stage
sits in a ``<details>`` element the browser folds by itself.  Every piece of
text from the model (names, IR, error details) goes through ``html.escape``.
"""
from __future__ import annotations

from html import escape

from minic.passes import format_stats
from minic.report.charts import bar_chart
from minic.report.collect import PathResult, ReportData
from minic.timing import fmt_ms

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
nav a { margin-right: 1em; }
.muted { color: #666; }
.pictures { display: flex; flex-wrap: wrap; gap: 1em; }
.picture { flex: 1 1 45%; min-width: 320px; max-height: 900px; overflow: auto; border: 1px solid #ddd;
           padding: 0.5em; background: #fff; }
.picture svg { max-width: 100%; height: auto; }
details { margin: 0.4em 0; border: 1px solid #ddd; border-radius: 4px; padding: 0.3em 0.6em; }
summary { cursor: pointer; font-weight: 600; }
pre { background: #f7f7f7; padding: 0.6em; overflow: auto; max-height: 600px; font-size: 12px;
      line-height: 1.35; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { background: #e6f4ea; } .mismatch, .crash { background: #fce8e6; } .unsupported { background: #fef7e0; }
svg.chart text { font-size: 12px; font-family: inherit; }
svg.chart .chart-title { font-size: 14px; font-weight: 600; }
"""


def _pictures(data: ReportData) -> str:
    parts = []
    for p in data.pictures:
        body = p.svg if p.svg else f'<p class="muted">{escape(p.note)}</p>'
        parts.append(f'<div class="picture" title="{escape(p.title)}">{body}</div>')   # graphviz draws the title
    return ('<p>Nodes are coloured by op kind; each dashed box (after the passes) is one fusion group, '
            'that is one generated kernel.</p><div class="pictures">' + "".join(parts) + "</div>")


def _stages(data: ReportData) -> str:
    parts = [f'<p>The same model at every level of the pipeline (<code>python -m minic show MODEL '
             f'--emit STAGE</code> prints each one). Click a stage to open it.</p>']
    for s in data.stages:
        count = f"{s.lines} lines" + (" (shortened)" if s.text.count("\n") + 1 < s.lines else "")
        parts.append(f'<details id="stage-{s.key}"><summary>{escape(s.key)}: {escape(s.title)} '
                     f'<span class="muted">({count})</span></summary><pre>{escape(s.text)}</pre></details>')
    if data.pass_stats:
        parts.append("<details><summary>pass statistics</summary><pre>"
                     f"{escape(format_stats(data.pass_stats))}</pre></details>")
    return "".join(parts)


def _kernels(data: ReportData) -> str:
    prof = data.profile
    if prof is None:
        return '<p class="muted">Per-kernel timing was not run (--no-profile).</p>'
    total = prof.total or 1.0
    rows = "".join(f"<tr><td>{i}</td><td><code>{escape(k.name)}</code></td>"
                   f'<td class="num">{escape(fmt_ms(k.seconds))}</td>'
                   f'<td class="num">{100 * k.seconds / total:.1f}%</td>'
                   f"<td><code>{escape(k.origin)}</code></td></tr>"
                   for i, k in enumerate(prof.kernels))
    chart = bar_chart([(k.name, k.seconds * 1e3) for k in prof.kernels], lambda v: f"{v:.4f} ms",
                      "median time per kernel", colour_by_row=False)
    return (f"<p>Each kernel called on its own (median of repeated calls, including one ctypes call "
            f"of about a microsecond); the kernels sum to {escape(fmt_ms(prof.total))}.</p>"
            f"<table><tr><th>#</th><th>kernel</th><th>time</th><th>share</th><th>graph nodes</th></tr>"
            f"{rows}</table>{chart}")


def _status(p: PathResult) -> str:
    c = p.cell
    err = f"{c.errors.abs:.1e}" if c.errors else ""
    bound = f"{c.tolerance:.0e}" if c.tolerance is not None else ""
    return (f'<tr><td>{escape(c.backend)}</td><td class="{escape(c.status)}">{escape(c.status)}</td>'
            f'<td class="num">{escape(err)}</td><td class="num">{escape(bound)}</td>'
            f'<td class="num">{escape(fmt_ms(c.compile_s)) if c.status in ("ok", "mismatch") else ""}</td>'
            f'<td class="num">{escape(fmt_ms(p.latency_s)) if p.latency_s else ""}</td>'
            f"<td>{escape(c.detail[:300])}</td></tr>")


def _verify(data: ReportData) -> str:
    rows = "".join(_status(p) for p in data.paths)
    ran = [(p.cell.backend, p.latency_s * 1e3) for p in data.paths if p.latency_s > 0]
    chart = bar_chart(ran, lambda v: f"{v:.3f} ms", f"median latency, {data.model}")
    return (f"<p>Every path runs the same inputs; <b>{escape(data.reference)}</b> is the reference, "
            f"and a path is <i>ok</i> when its largest error, absolute or relative, is within its bound: "
            f"{data.tolerance:.0e} for these outputs, or the path's own where it computes in lower "
            f"precision by design (the bound <code>verify</code> judges by).</p>"
            f"<table><tr><th>backend</th><th>status</th><th>max abs error</th><th>bound</th><th>compile</th>"
            f"<th>latency (median)</th><th>detail</th></tr>{rows}</table>"
            f'<h3 id="latency">Latency</h3>{chart}')


def _coverage(data: ReportData) -> str:
    cov = data.coverage
    if cov is None:
        return '<p class="muted">Op coverage was not asked for (--no-coverage).</p>'
    css = {"supported": "ok", "refused": "mismatch", "mismatch": "mismatch", "fallback": "unsupported",
           "n/a": "unsupported"}

    def cell(v, n: int) -> str:
        title = f' title="{escape(v.reason)}"' if v.reason else ""
        return f'<td class="{css[v.status]}"{title}>{escape(v.text(n))}</td>'
    head = "".join(f"<th>{escape(p)}</th>" for p in cov.paths)
    rows = "".join(f"<tr><td><code>{escape(r.op)}</code></td><td class=\"num\">{r.nodes}</td>"
                   + "".join(cell(r.cells[p], r.nodes) for p in cov.paths) + "</tr>" for r in cov.rows)
    if cov.whole:
        rows += ("<tr><td><b>whole model</b></td><td></td>"
                 + "".join(cell(cov.whole[p], 1) for p in cov.paths) + "</tr>")
    reasons = [(f"{p}, {r.op}", r.cells[p].reason) for r in cov.rows for p in cov.paths if r.cells[p].reason]
    reasons += [(f"{p}, whole model", v.reason) for p, v in cov.whole.items() if v.reason]
    notes = "".join(f"<li><b>{escape(w)}</b>: {escape(why)}</li>" for w, why in reasons)
    return ("<p>Each op type's nodes cut out and compiled on each path, fed the interpreter's values "
            "(<code>python -m minic coverage MODEL</code>): <i>ok</i>, or the path's own reason for refusing.</p>"
            f"<table><tr><th>op</th><th>nodes</th>{head}</tr>{rows}</table>"
            + (f"<ul>{notes}</ul>" if notes else ""))


SECTIONS = (("graph", "Graph before and after the passes", _pictures),
            ("stages", "The IR at every stage", _stages),
            ("kernels", "Time per kernel (minic)", _kernels),
            ("coverage", "Op coverage per path", _coverage),
            ("verify", "Cross-path verification", _verify))


def render_page(data: ReportData) -> str:
    """The whole report as an HTML document (a str)."""
    nav = "".join(f'<a href="#{key}">{escape(title)}</a>' for key, title, _ in SECTIONS)
    body = "".join(f'<section id="{key}"><h2>{escape(title)}</h2>{fill(data)}</section>'
                   for key, title, fill in SECTIONS)
    n_ok = sum(p.cell.status == "ok" for p in data.paths)
    summary = (f"inputs {escape(data.inputs)} · graph passes -O{data.level} · "
               f"{data.kernels} kernels · {n_ok} of {len(data.paths)} paths ok")
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>minic report: {escape(data.model)}</title><style>{CSS}</style></head>\n"
            f"<body><h1>minic compile report: {escape(data.model)}</h1>"
            f'<p class="muted">{summary}</p><nav>{nav}</nav>\n{body}\n</body></html>\n')
