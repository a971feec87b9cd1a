"""The exercises' checkers (docs/exercises/check.py): every answer passes, a stub or a wrong
solution fails with the point it misses."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "exercises"))
import check  # noqa: E402

ANSWERS = ROOT / "docs" / "exercises" / "answers"


def test_every_answer_passes():
    for exercise in check.CHECKS:
        assert check.check(exercise, str(ANSWERS / f"{exercise.replace('.', '_')}.py")) == []


def test_stub_and_wrong_solutions_fail(tmp_path):
    stub = tmp_path / "stub.py"
    stub.write_text("RULES = []\n")
    assert check.check("3.1", str(stub)) == ["3.1: the solution defines no RULES (a list of @rule functions)"]
    wrong = tmp_path / "wrong.py"
    wrong.write_text("from minic.passes.rewrite import rule\n\n@rule('neg')\ndef r(m):\n"
                     "    '''neg(sub(a, b)) -> sub(a, b)  (wrong)'''\n"
                     "    inner = m.producer(m.node.inputs[0], 'sub')\n"
                     "    return m.rebuilt('sub', list(inner.inputs)) if inner else None\n\nRULES = [r]\n")
    assert check.check("3.1", str(wrong)) == [
        "3.1 case 'pair', line 2: expected '%n = sub(%b, %a) : f32[B, 4]', got '%n = sub(%a, %b) : f32[B, 4]'"]
