"""Bar charts as inline SVG, drawn by hand: the page needs no JavaScript library.

One horizontal bar per row, the longest bar spanning the plot width, each bar
labelled with its value, so tiny bars still say what they are::

    minic        ███ 0.012 ms
    interp       ██████████████████████████ 0.310 ms
"""
from __future__ import annotations

from html import escape
from typing import Callable, Sequence

ROW = 22                  # pixels per bar
LABEL_W = 260             # room for the row labels
PLOT_W = 420              # the longest bar
VALUE_W = 110             # room for the value after a bar
COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d")


def _clip(text: str, n: int = 38) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def bar_chart(rows: Sequence[tuple[str, float]], fmt: Callable[[float], str], title: str,
              colour_by_row: bool = True) -> str:
    """``rows`` of (label, value >= 0) as an ``<svg>`` element; ``fmt`` writes a value."""
    if not rows:
        return ""
    top = max(v for _, v in rows) or 1.0
    height = 30 + ROW * len(rows) + 8
    width = LABEL_W + PLOT_W + VALUE_W
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
           f'<text x="0" y="18" class="chart-title">{escape(title)}</text>']
    for i, (label, value) in enumerate(rows):
        y = 30 + i * ROW
        w = max(1.0, PLOT_W * value / top) if value > 0 else 0.0
        colour = COLOURS[i % len(COLOURS)] if colour_by_row else COLOURS[0]
        out.append(f'<g><title>{escape(label)}: {escape(fmt(value))}</title>'
                   f'<text x="{LABEL_W - 6}" y="{y + 15}" text-anchor="end">{escape(_clip(label))}</text>'
                   f'<rect x="{LABEL_W}" y="{y + 3}" width="{w:.1f}" height="{ROW - 6}" fill="{colour}"/>'
                   f'<text x="{LABEL_W + w + 5:.1f}" y="{y + 15}">{escape(fmt(value))}</text></g>')
    out.append("</svg>")
    return "\n".join(out)
