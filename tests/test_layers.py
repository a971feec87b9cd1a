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


def test_the_frontend_has_no_import_cycle_and_imports_no_private_name_across_modules():
    """One frontend layer: families below their drivers (lazy imports inside functions count too),
    and what modules share is public."""
    folder = MINIC / "frontend"
    names = {p.stem for p in folder.glob("*.py")}
    edges: dict[str, set[str]] = {m: set() for m in names}
    private = []
    for path in folder.glob("*.py"):
        aliases = {}
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("minic.frontend"):
                continue
            target = node.module.split(".")[2] if node.module.count(".") >= 2 else None
            for a in node.names:
                module = target or (a.name if a.name in names else None)
                if module is None:
                    continue
                edges[path.stem].add(module)
                if target is None:
                    aliases[a.asname or a.name] = module
                elif a.name.startswith("_"):
                    private.append(f"{path.name}:{node.lineno} imports {target}.{a.name}")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                private.append(f"{path.name}:{node.lineno} reads {aliases[node.value.id]}.{node.attr}")
    assert not private, private

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(m == goal or (m not in seen and not seen.add(m) and reaches(m, goal, seen)) for m in edges[start])
    cyclic = sorted(m for m in names if reaches(m, m, set()))
    assert not cyclic, f"these frontend modules are on an import cycle: {cyclic}"
