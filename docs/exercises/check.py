"""Check a solution to an exercise of docs/exercises/README.md:

    python docs/exercises/check.py 3.1 my_solution.py

One line per failing point; exit status 0 when every point holds."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

from minic.ir.interpret import interpret
from minic.ir.text import parse_graph, print_graph
from minic.passes.manager import applying

CASES_3_1 = {
    "pair": ("""graph @g(%a: f32[B, 4], %b: f32[4]) -> (f32[B, 4]) {
  %d = sub(%a, %b) : f32[B, 4]
  %n = neg(%d) : f32[B, 4]
  return %n
}""", """graph @g(%a: f32[B, 4], %b: f32[4]) -> (f32[B, 4]) {
  %n = sub(%b, %a) : f32[B, 4]
  return %n
}"""),
    "no sub": ("""graph @g(%a: f32[4]) -> (f32[4]) {
  %e = exp(%a) : f32[4]
  %n = neg(%e) : f32[4]
  return %n
}""", None),
}


def load(path: str):
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_3_1(module) -> list[str]:
    """RULES: graph rules whose pass rewrites neg(sub(a, b)) -> sub(b, a)."""
    rules = getattr(module, "RULES", None)
    if not rules:
        return ["3.1: the solution defines no RULES (a list of @rule functions)"]
    apply = applying(*rules)
    failures = []
    rng = np.random.default_rng(0)
    for name, (before, after) in CASES_3_1.items():
        g = parse_graph(before)
        want = print_graph(parse_graph(after or before))
        try:
            got = apply(g)
        except Exception as e:          # the learner's code: any failure is a point to report
            failures.append(f"3.1 case {name!r}: the pass raised {type(e).__name__}: {e}")
            continue
        if print_graph(got) != want:
            got_lines, want_lines = print_graph(got).splitlines(), want.splitlines()
            line = next((i for i, (x, y) in enumerate(zip(got_lines, want_lines)) if x != y),
                        min(len(got_lines), len(want_lines)))
            shown = got_lines[line] if line < len(got_lines) else "(nothing)"
            expected = want_lines[line] if line < len(want_lines) else "(nothing)"
            failures.append(f"3.1 case {name!r}, line {line + 1}: expected {expected.strip()!r}, got {shown.strip()!r}")
            continue
        xs = [rng.standard_normal([3 if d == "B" else d for d in v.type.shape]).astype(np.float32) for v in g.inputs]
        if not all(np.array_equal(x, y) for x, y in zip(interpret(g, xs), interpret(got, xs))):
            failures.append(f"3.1 case {name!r}: the rewritten graph computes other values")
    return failures


CHECKS = {"3.1": check_3_1}


def check(exercise: str, path: str) -> list[str]:
    if exercise not in CHECKS:
        return [f"no exercise {exercise}; there are {', '.join(CHECKS)}"]
    return CHECKS[exercise](load(path))


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 2
    failures = check(*argv)
    print("\n".join(failures) or f"{argv[0]}: every point holds")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
