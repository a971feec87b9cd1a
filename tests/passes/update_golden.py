"""Rewrite the ``// EXPECT`` half of golden files from what the passes print now.

    python tests/passes/update_golden.py tests/passes/golden/fuse-reshapes/*.mc

For writing a new case and for reviewing a deliberate change: read the diff
before committing it; test_golden.py is what checks.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from minic.ir.text import parse_graph, print_graph
from minic.passes import optimize


def update(path: Path) -> str:
    text = path.read_text().partition("\n// EXPECT\n")[0].rstrip("\n") + "\n"
    passes = [p.strip() for p in ",".join(re.findall(r"^// RUN: (.+)$", text, re.M)).split(",") if p.strip()]
    graph = parse_graph(text, path)
    if passes[0].startswith("-O"):
        out = optimize(graph, level=int(passes[0][2:]), verify_each=True)
    else:
        out = optimize(graph, passes=passes, verify_each=True)
    path.write_text(text + "\n// EXPECT\n" + print_graph(out))
    return print_graph(out)


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"// {arg}\n{update(Path(arg))}")
