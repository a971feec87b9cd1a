"""The reading order is the import order: no stage of the compiler imports a later one,
and minic never imports the bridges."""
from __future__ import annotations

import ast
from pathlib import Path

MINIC = Path(__file__).resolve().parents[1] / "minic"
STAGES = ["ir", "passes", "lowering", "schedule", "codegen", "runtime"]     # the pipeline's order


def imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return out


def test_no_stage_imports_a_later_stage():
    wrong = []
    for path in MINIC.rglob("*.py"):
        stage = path.relative_to(MINIC).parts[0]
        if stage not in STAGES:
            continue
        for line, module in imports(path):
            parts = module.split(".")
            if parts[0] == "minic" and len(parts) > 1 and parts[1] in STAGES \
                    and STAGES.index(parts[1]) > STAGES.index(stage):
                wrong.append(f"{path.relative_to(MINIC)}:{line} imports {module}")
    assert not wrong, "\n".join(wrong)


def test_minic_never_imports_the_bridges():
    wrong = [f"{p.relative_to(MINIC)}:{line}" for p in MINIC.rglob("*.py")
             for line, module in imports(p) if module.split(".")[0] == "bridges"]
    assert not wrong, wrong
