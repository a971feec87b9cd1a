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


def test_a_log_softmax_rule_without_the_max_fails_on_large_inputs(tmp_path):
    naive = tmp_path / "naive.py"
    naive.write_text("from minic.ir.compute import reduce_over\nfrom minic.ir.loops import BinOp, Call\n"
                     "from minic.ir.ops.shapes import norm_axis\n\ndef RULE(site, index):\n"
                     "    x = site.inputs[0]\n    axis = norm_axis(site.attrs.axis, x.type.rank)\n"
                     "    total = reduce_over(site, x, (axis,), True, index, 'sum', lambda e: Call('exp', (e,)))\n"
                     "    return BinOp('sub', x.at(index), Call('log', (total,)))\n")
    failures = check.check("4.1", str(naive))
    assert len(failures) == 1 and failures[0].startswith(
        "4.1 on f32[4, 8], axis -1, inputs of size ~100: element (0, 0) is -inf, expected -125.4"), failures
    assert check.check("4.1", str(tmp_path / "missing.py")) == [f"4.1: no file {tmp_path / 'missing.py'}"]
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module\n")
    assert check.check("4.1", str(broken)) == [
        f"4.1: {broken} does not import: ModuleNotFoundError: No module named 'no_such_module'"]


def test_a_mish_rule_with_log1p_fails_where_the_loop_verifier_stops_it(tmp_path):
    answer = (ANSWERS / "9_1.py").read_text()
    log1p = tmp_path / "log1p.py"
    log1p.write_text(answer.replace("define(", "def mish_rule(site, index):\n    x = arg(site.inputs[0], index)\n"
        "    return BinOp('mul', x, Call('tanh', (Call('log1p', (Call('exp', (x,)),)),)))\n\n\ndefine(", 1))
    failures = check.check("9.1", str(log1p))
    assert failures == ["9.1: compiling matmul then mish: LoopVerifyError: lowering %h = matmul(%x, %w); "
                        "%y = mish(%h): kernel k0_matmul_mish: unknown call log1p/1"], failures
    from minic.ir import ops
    assert "mish" not in ops.REGISTRY                 # the check leaves the registry as it found it
    empty = tmp_path / "empty.py"
    empty.write_text("")
    assert check.check("9.1", str(empty)) == ["9.1: the file defines no op mish (minic.ir.ops.define)"]


def test_schedules_left_as_lowered_or_naming_no_kernel_fail(tmp_path):
    lowered = tmp_path / "lowered.py"
    lowered.write_text('SCHEDULES = {"k0_gemm_relu": lambda kernel: kernel}\n')
    assert check.check("12.1", str(lowered)) == [
        "12.1 kernel k0_gemm_relu: no vectorized loop",
        "12.1 kernel k0_gemm_relu: the accumulator is still a scalar (cache_accumulator)"]
    unknown = tmp_path / "unknown.py"
    unknown.write_text('SCHEDULES = {"k9": lambda kernel: kernel}\n')
    assert check.check("12.1", str(unknown)) == ["12.1: no kernel k9 in the small MLP; its kernels are k0_gemm_relu, k1_gemm"]
