"""Count the code lines of minic's core: blank, comment and docstring lines left out.

    python benchmarks/core_lines.py            # the core: ir, passes, lowering, schedule, codegen, runtime
    python benchmarks/core_lines.py minic/ir   # any folders or files

A line counts when a token other than a comment, a newline or an indent lies on
it, and that token is not part of a docstring (a string standing alone as the
first statement of a module, class or function).
"""
from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

CORE = ("ir", "passes", "lowering", "schedule", "codegen", "runtime")
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
        tokenize.ENDMARKER, tokenize.ENCODING}


def docstring_lines(tree: ast.AST) -> set[int]:
    """The lines that docstrings cover."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                lines.update(range(first.lineno, first.end_lineno + 1))
    return lines


def count(path: Path) -> tuple[int, int]:
    """(code lines, physical lines) of one file."""
    text = path.read_text()
    docs = docstring_lines(ast.parse(text))
    code: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type in SKIP:
            continue
        code.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docs)
    return len(code), len(text.splitlines())


def main(argv: list[str]) -> None:
    root = Path(__file__).resolve().parent.parent
    targets = [Path(a) for a in argv] or [root / "minic" / d for d in CORE]
    files = sorted(f for t in targets for f in ([t] if t.is_file() else t.rglob("*.py")))
    code = physical = 0
    for f in files:
        c, p = count(f)
        code, physical = code + c, physical + p
    print(f"{code} code lines ({physical} physical) in {len(files)} files")


if __name__ == "__main__":
    main(sys.argv[1:])
