"""The exercises' checkers (docs/exercises/check.py): every answer passes, every stub and a
plausible wrong solution fail with the point they miss."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "exercises"))
import check  # noqa: E402

ANSWERS = ROOT / "docs" / "exercises" / "answers"
STUBS = ROOT / "docs" / "exercises" / "stubs"


def test_every_answer_passes():
    for exercise in check.CHECKS:
        assert check.check(exercise, str(ANSWERS / f"{exercise.replace('.', '_')}.py")) == []


def test_every_stub_imports_and_fails_on_its_first_point():
    first = {
        "3.1": "3.1 case 'pair', line 2: expected '%n = sub(%b, %a) : f32[B, 4]', got '%d = sub(%a, %b) : f32[B, 4]'",
        "3.2": "3.2 case 'x / [2, 0.5, -8, 0.25]': expected the ops ['mul'], got ['div']",
        "4.1": "4.1 on f32[4, 8], axis -1: element (0, 0) is 0.12573",
        "4.2": "4.2 on f32[4, 8], axis -1, with scale and bias: element (0, 0) is 0.12573",
        "5.1": "5.1 kernel k0_sigmoid: no parallel loop (the rows are independent)",
        "6.1": "6.1 loop i0: the branch back to its phi (from i1.done) is unconditional: the test is at the top",
        "9.1": "9.1: the file defines no op mish (minic.ir.ops.define)",
        "9.2": "9.2: the file defines no op hypot (minic.ir.ops.define)",
        "12.1": "12.1 kernel k0_gemm_relu: no vectorized loop",
        "12.2": "12.2 kernel k0_softmax: no parallel loop (the rows are independent)",
        "12.3": "12.3: not the template's loop tree, line 3: expected 'parallel for (i1o = 0; i1o < 3; i1o++) {', "
                "got 'for (i0 = 0; i0 < 192; i0++) {'",
    }
    assert sorted(first) == sorted(check.CHECKS)
    for exercise, line in first.items():
        failures = check.check(exercise, str(STUBS / f"{exercise.replace('.', '_')}.py"))
        assert failures and failures[0].startswith(line), (exercise, failures)


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
        "3.1 case 'pair', line 2: expected '%n = sub(%b, %a) : f32[B, 4]', got '%n = sub(%a, %b) : f32[B, 4]'; "
        "and it computes other values"]


def test_a_reciprocal_rule_without_its_precondition_fails_where_it_is_not_exact(tmp_path):
    wrong = tmp_path / "reciprocal.py"
    wrong.write_text("from minic.passes.rewrite import rule\n\n@rule('div')\ndef reciprocal(m):\n"
                     "    '''x / c -> x * (1 / c)  (any constant c: wrong)'''\n    x, c = m.node.inputs\n"
                     "    if not c.is_constant:\n        return None\n"
                     "    return m.rebuilt('mul', [x, m.constant('inv', (1 / c.data).astype(c.data.dtype))])\n\n"
                     "RULES = [reciprocal]\n")
    div = "line 3: expected '%y = div(%x, @c) : {0}[B, 4]', got 'const @inv : {0}[] = dense<{1}>'; and it computes other values"
    assert check.check("3.2", str(wrong)) == [
        "3.2 case 'x / 3', " + div.format("f32", "0.33333334"),
        "3.2 case 'x / 1e-45', " + div.format("f32", "inf"),
        "3.2 case 'integer x / 2', " + div.format("i32", "0")]
    undocumented = tmp_path / "undocumented.py"
    undocumented.write_text(wrong.read_text().replace("'''x / c -> x * (1 / c)  (any constant c: wrong)'''", "pass"))
    assert check.check("3.2", str(undocumented)) == ["3.2: rule reciprocal states no identity (its docstring's first line)"]


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


def test_a_layer_norm_rule_with_the_mean_of_squares_fails_on_an_offset(tmp_path):
    answer = (ANSWERS / "4_2.py").read_text()
    var = 'BinOp("div", reduce_over(site, x, axes, True, index, "sum", lambda e: BinOp("mul", centred(e), centred(e))), n)'
    assert var in answer
    squares = tmp_path / "squares.py"       # E[x²] - E[x]²: right in exact arithmetic, not in f32
    squares.write_text(answer.replace(var, 'BinOp("sub", BinOp("div", reduce_over(site, x, axes, True, index, "sum", '
                                           'lambda e: BinOp("mul", e, e)), n), BinOp("mul", mean, mean))'))
    failures = check.check("4.2", str(squares))
    assert len(failures) == 1 and failures[0].startswith(
        "4.2 on f32[4, 8], axis -1, with scale and bias, inputs 1000 + N(0, 1): element (0, 0) is "), failures
    last_axis = tmp_path / "last_axis.py"   # the statistics of the last axis alone
    last_axis.write_text(answer.replace("axes = tuple(range(first, x.type.rank))", "axes = (x.type.rank - 1,)"))
    failures = check.check("4.2", str(last_axis))
    assert len(failures) == 1 and failures[0].startswith("4.2 on f32[2, 3, 8], axis -2, with scale and bias: element"), \
        failures


def test_a_row_of_100_split_by_16_exactly_guarded_or_peeled_fails(tmp_path):
    answer = (ANSWERS / "5_1.py").read_text()
    failures = {}
    for tail in ("exact", "guard", "peel"):
        wrong = tmp_path / f"{tail}.py"
        wrong.write_text(answer.replace('tail="overlap"', f'tail="{tail}"'))
        failures[tail] = check.check("5.1", str(wrong))
    error = "5.1: compiling with SCHEDULES: ScheduleError: schedule of kernel k0_sigmoid: "
    assert failures == {
        "exact": [error + "split of 'i1' by 16 does not cover its extent 100 exactly; use tail='guard' or tail='overlap'"],
        "guard": [error + "cannot vectorize 'i1i': its body must be plain stores (no if, no allocation)"],
        "peel": ["5.1 kernel k0_sigmoid: the output y is stored by scalar code (in loop i1t): vectorize it, tail included"]}


def test_a_rotated_loop_without_its_guard_fails_at_zero_rows_and_a_missing_serial_is_named(tmp_path):
    answer = (ANSWERS / "6_1.py").read_text()
    guard = 'b.cbranch(b.icmp_signed("<", start, end), body, done)'
    assert guard in answer
    unguarded = tmp_path / "unguarded.py"       # a do-while: the body runs once before the first test
    unguarded.write_text(answer.replace(guard, "b.branch(body)"))
    assert check.check("6.1", str(unguarded)) == [
        "6.1 sum over N = 0 rows: y[0] is 10.404, expected 0 (a loop of no iterations ran its body once: guard the entry)"]
    stale = tmp_path / "stale.py"               # the phi's edge from the block the body began in, not the one it ended in
    stale.write_text(answer.replace("i.add_incoming(following, b.block)", "i.add_incoming(following, body)"))
    failures = check.check("6.1", str(stale))
    assert len(failures) == 1 and failures[0].startswith("6.1: compiling with SERIAL: "), failures
    empty = tmp_path / "empty.py"
    empty.write_text("")
    assert check.check("6.1", str(empty)) == [
        "6.1: the solution defines no SERIAL (a function (emitter, loop, start, end) in place of Emitter.serial)"]
    from minic.codegen.emit import Emitter
    assert Emitter.serial.__module__ == "minic.codegen.emit"     # minic's own is back after every check


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


def test_a_hypot_that_squares_and_takes_any_dtype_fails_on_both(tmp_path):
    naive = tmp_path / "naive.py"
    naive.write_text("import numpy as np\nfrom minic.ir.loops import BinOp, Call\nfrom minic.ir.ops import OpKind, define\n"
                     "from minic.ir.ops.elementwise import arg, broadcast_infer\n\n"
                     "def rule(site, index):\n    a, b = (arg(x, index) for x in site.inputs)\n"
                     "    return Call('sqrt', (BinOp('add', BinOp('mul', a, a), BinOp('mul', b, b)),))\n\n"
                     "define('hypot', OpKind.ELEMENTWISE, broadcast_infer('hypot'), lambda attrs, a, b: np.hypot(a, b),\n"
                     "       rule, arity=(2, 2), torch='hypot')\n")
    assert check.check("9.2", str(naive)) == [
        "9.2: hypot accepts two i32 inputs; it should refuse them (UserError)",
        "9.2: matmul then hypot, inputs of size ~1e+20: compiled, differs from torch by inf"]
    squaring = tmp_path / "squaring.py"     # the reference squares too
    squaring.write_text((ANSWERS / "9_2.py").read_text().replace("np.hypot(a, b).astype(a.dtype)", "np.sqrt(a * a + b * b)"))
    assert check.check("9.2", str(squaring)) == [
        "9.2: the reference at (0.37719065, 1e+30) gives inf (float32), torch's hypot 1.0000000150474662e+30"]
    from minic.ir import ops
    assert "hypot" not in ops.REGISTRY


def test_schedules_left_as_lowered_or_naming_no_kernel_fail(tmp_path):
    lowered = tmp_path / "lowered.py"
    lowered.write_text('SCHEDULES = {"k0_gemm_relu": lambda kernel: kernel}\n')
    assert check.check("12.1", str(lowered)) == [
        "12.1 kernel k0_gemm_relu: no vectorized loop",
        "12.1 kernel k0_gemm_relu: the accumulator is still a scalar (cache_accumulator)"]
    unknown = tmp_path / "unknown.py"
    unknown.write_text('SCHEDULES = {"k9": lambda kernel: kernel}\n')
    assert check.check("12.1", str(unknown)) == ["12.1: no kernel k9 in the small MLP; its kernels are k0_gemm_relu, k1_gemm"]


def test_a_softmax_schedule_with_a_scalar_reduction_or_a_vectorized_one_fails(tmp_path):
    one_reduction = tmp_path / "one_reduction.py"
    one_reduction.write_text("from minic.schedule.caching import rfactor\n"
                             "from minic.schedule.primitives import parallel, split, vectorize\n\n"
                             "def rows(k):\n    k = rfactor(parallel(k, 'i0'), 'r1')\n"
                             "    return vectorize(split(k, 'i1', 16), 'i1i')\n\nSCHEDULES = {'k0_softmax': rows}\n")
    assert check.check("12.2", str(one_reduction)) == [
        "12.2 kernel k0_softmax: loop r0 (1024 iterations) still updates the scalar acc0 one element at a time (rfactor)"]
    vector_sum = tmp_path / "vector_sum.py"     # a reduction loop vectorized as it stands
    vector_sum.write_text("from minic.schedule.primitives import split, vectorize\n\n"
                          "SCHEDULES = {'k0_softmax': lambda k: vectorize(split(k, 'r1', 16), 'r1i')}\n")
    assert check.check("12.2", str(vector_sum)) == [
        "12.2: compiling with SCHEDULES: ScheduleError: schedule of kernel k0_softmax: cannot vectorize loop 'r1i': "
        "every iteration writes acc1[] (a reduction over this axis; it needs a reduction strategy such as cache_accumulator)"]


def test_the_template_by_hand_without_the_packed_panel_fails_on_its_line(tmp_path):
    answer = (ANSWERS / "12_3.py").read_text()
    unpacked = tmp_path / "unpacked.py"
    unpacked.write_text(answer.replace('parallel(pack(k, "i1o", "w"), "i1o")', 'parallel(k, "i1o")'))
    assert check.check("12.3", str(unpacked)) == [
        "12.3: not the template's loop tree, line 4: expected 'f32 w_pack[192, 64];', got 'for (i0o = 0; i0o < 48; i0o++) {'"]
    misordered = tmp_path / "misordered.py"     # the rows split before the columns are moved out
    misordered.write_text(answer.replace('    k = split(k, "i0", 4)\n', "").replace(
        'k = reorder(naive, "i1", "i0")', 'k = split(naive, "i0", 4)'))
    assert check.check("12.3", str(misordered))[0].startswith("12.3: scheduling or compiling: ScheduleError: ")
