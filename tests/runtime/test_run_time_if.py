"""Control flow at run time (minic/ir/ops/control.py): an ONNX If whose condition is computed from
a graph input compiles both branches ONCE, when the model is compiled, and each call runs the one
its condition picks, on minic (the branches compiled, run between compiled parts:
minic/runtime/split.py) and on the interpreter, against ONNX Runtime.  Before, such an If was
specialized on the value of the inputs its condition reads, and refused for an image."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import minic
from minic.errors import UserError
from minic.frontend.onnx import from_onnx_file
from minic.ir.build import make_node
from minic.ir.graph import Graph, Value
from minic.ir.types import DType, TensorType
from minic.runtime.specialize import Specialized

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_run_time_loops as loops  # noqa: E402
from test_run_time_loops import _compile, _ort  # noqa: E402

BACKENDS = ["minic", "interp"]


def _save(tmp_path, name, nodes, inputs, outputs, initializers=(), check=True):
    model = h.make_model(h.make_graph(nodes, name, inputs, outputs, list(initializers)),
                         opset_imports=[h.make_opsetid("", 17)])
    if check:                     # (the checker wants a shape for every graph output)
        onnx.checker.check_model(model)
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, str(path))
    return path


def _branch(name, nodes, out, initializers=()):
    return h.make_graph(nodes, name, [], [h.make_tensor_value_info(out, T.FLOAT, None)], list(initializers))


def _check_compiled_once(run, backend, compilations, before: int) -> None:
    """No compilation after minic.compile returned, and one model, not one per condition value."""
    loops.check_compiled_once(run, backend, compilations, before, "if")


def _check(run, path, feeds: dict) -> list[np.ndarray]:
    got = run(*feeds.values())
    got = list(got) if isinstance(got, tuple) else [got]
    want = _ort(path, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


def _sample_rate_file(tmp_path):
    """y = relu(x) if sample_rate == 16000 else -x, as in docs/dynamic.md."""
    return _save(tmp_path, "resample",
                 [h.make_node("Equal", ["sample_rate", "k"], ["c"]),
                  h.make_node("If", ["c"], ["y"], then_branch=_branch("then", [h.make_node("Relu", ["x"], ["t"])], "t"),
                              else_branch=_branch("else", [h.make_node("Neg", ["x"], ["e"])], "e"))],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]),
                  h.make_tensor_value_info("sample_rate", T.INT64, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 4])], [h.make_tensor("k", T.INT64, [], [16000])])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_if_on_a_graph_input_compiles_both_branches_once(backend, tmp_path, compilations):
    path = _sample_rate_file(tmp_path)
    graph = from_onnx_file(path)
    assert [n.op for n in graph.nodes] == ["eq", "if"]
    rng = np.random.default_rng(0)
    run = _compile(path, [np.zeros((2, 4), np.float32), np.array(16000)], backend, tmp_path)
    before = compilations[0]
    if backend == "minic":
        assert before == 3                  # the part before the if, then each branch: both now
    for n, rate in [(2, 16000), (3, 8000), (1, 16000), (2, 44100)]:
        x = rng.standard_normal((n, 4)).astype(np.float32)
        y, = _check(run, path, {"x": x, "sample_rate": np.array(rate)})
        np.testing.assert_array_equal(y, np.maximum(x, 0) if rate == 16000 else -x)
    _check_compiled_once(run, backend, compilations, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_condition_computed_from_an_image(backend, tmp_path, compilations):
    """ReduceSum(x) > 0 over an image of 3,072 elements per sample: specialized per value of the
    image it was refused ('at most 1024 elements'); now both branches are compiled once."""
    path = _save(tmp_path, "bright",
                 [h.make_node("ReduceSum", ["x"], ["total"], keepdims=0), h.make_node("Greater", ["total", "zero"], ["c"]),
                  h.make_node("If", ["c"], ["y"],
                              then_branch=_branch("then", [h.make_node("Mul", ["x", "half"], ["t"])], "t",
                                                  [h.make_tensor("half", T.FLOAT, [], [0.5])]),
                              else_branch=_branch("else", [h.make_node("Sigmoid", ["x"], ["e"])], "e"))],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 3, 32, 32])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 3, 32, 32])], [h.make_tensor("zero", T.FLOAT, [], [0.0])])
    rng = np.random.default_rng(1)
    run = _compile(path, [np.zeros((1, 3, 32, 32), np.float32)], backend, tmp_path)
    before = compilations[0]
    for n, shift in [(1, 1.0), (2, -1.0), (1, -1.0), (3, 1.0)]:
        x = (rng.standard_normal((n, 3, 32, 32)) + shift).astype(np.float32)
        y, = _check(run, path, {"x": x})
        np.testing.assert_allclose(y, 0.5 * x if x.sum() > 0 else 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    _check_compiled_once(run, backend, compilations, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_branches_whose_outputs_differ_in_a_dim(backend, tmp_path, compilations):
    """then: x (f32[N, 4]); else: its first two columns (f32[N, 2]): the If's columns are a symbol of
    their own (a size the data decides), and the Relu after it is compiled once for it."""
    first_columns = [h.make_node("Slice", ["x", "zero", "two", "one"], ["e"])]
    path = _save(tmp_path, "rows",
                 [h.make_node("ReduceSum", ["flag"], ["total"], keepdims=0), h.make_node("Greater", ["total", "zero_f"], ["c"]),
                  h.make_node("If", ["c"], ["picked"], then_branch=_branch("then", [h.make_node("Identity", ["x"], ["t"])], "t"),
                              else_branch=_branch("else", first_columns, "e")),
                  h.make_node("Relu", ["picked"], ["y"])],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 4]), h.make_tensor_value_info("flag", T.FLOAT, [2])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", "M"])],
                 [h.make_tensor("zero", T.INT64, [1], [0]), h.make_tensor("one", T.INT64, [1], [1]),
                  h.make_tensor("two", T.INT64, [1], [2]),
                  h.make_tensor("zero_f", T.FLOAT, [], [0.0])])
    graph = from_onnx_file(path)
    node = next(n for n in graph.nodes if n.op == "if")
    n, columns = graph.outputs[0].type.shape
    assert n == "N" and node.attrs.sizes == (columns,) and isinstance(columns, str)
    rng = np.random.default_rng(2)
    run = _compile(path, [np.zeros((3, 4), np.float32), np.ones(2, np.float32)], backend, tmp_path)
    before = compilations[0]
    for n, flag in [(3, 1.0), (3, -1.0), (5, -1.0), (5, 1.0)]:
        x = rng.standard_normal((n, 4)).astype(np.float32)
        y, = _check(run, path, {"x": x, "flag": np.full(2, flag, np.float32)})
        assert y.shape == ((n, 4) if flag > 0 else (n, 2))
    _check_compiled_once(run, backend, compilations, before)


@pytest.mark.parametrize("backend", BACKENDS)
def test_branches_read_outer_values(backend, tmp_path, compilations):
    """Each branch reads values of the outer graph, some of them computed there (a = x * w) and not the
    same for both branches: the if captures the values either reads, and each branch takes them all."""
    then = _branch("then", [h.make_node("Add", ["a", "z"], ["t"])], "t")
    other = _branch("else", [h.make_node("Sub", ["x", "b"], ["d"]), h.make_node("Mul", ["d", "three"], ["e"])], "e",
                    [h.make_tensor("three", T.FLOAT, [], [3.0])])
    path = _save(tmp_path, "captured",
                 [h.make_node("Mul", ["x", "w"], ["a"]), h.make_node("Exp", ["z"], ["b"]),
                  h.make_node("Less", ["k", "limit"], ["c"]),
                  h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]), h.make_tensor_value_info("z", T.FLOAT, ["N", 3]),
                  h.make_tensor_value_info("k", T.INT64, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
                 [h.make_tensor("w", T.FLOAT, [3], [0.5, -1.0, 2.0]), h.make_tensor("limit", T.INT64, [], [10])])
    node = next(n for n in from_onnx_file(path).nodes if n.op == "if")
    assert len(node.inputs) == 1 + 4                    # the condition, then a, z (then) and x, b (else)
    assert [len(g.inputs) for g in (node.attrs.then_branch, node.attrs.else_branch)] == [4, 4]
    rng = np.random.default_rng(3)
    run = _compile(path, [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), np.array(1)], backend, tmp_path)
    before = compilations[0]
    for n, k in [(2, 1), (4, 20), (1, 10), (2, 9)]:
        feeds = {"x": rng.standard_normal((n, 3)).astype(np.float32), "z": rng.standard_normal((n, 3)).astype(np.float32),
                 "k": np.array(k)}
        _check(run, path, feeds)
    _check_compiled_once(run, backend, compilations, before)


def if_in_loop_file(tmp_path):
    """acc = acc + x on even iterations, acc * 0.5 on odd ones, m iterations (a graph input): a
    Loop whose body holds an If on the iteration number."""
    body = h.make_graph(
        [h.make_node("Mod", ["i", "two"], ["r"]), h.make_node("Equal", ["r", "zero"], ["even"]),
         h.make_node("If", ["even"], ["acc_out"],
                     then_branch=_branch("then", [h.make_node("Add", ["acc_in", "x"], ["t"])], "t"),
                     else_branch=_branch("else", [h.make_node("Mul", ["acc_in", "half"], ["e"])], "e")),
         h.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
         h.make_tensor_value_info("acc_in", T.FLOAT, ["N", 2])],
        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, ["N", 2])],
        [h.make_tensor("two", T.INT64, [], [2]), h.make_tensor("zero", T.INT64, [], [0]),
         h.make_tensor("half", T.FLOAT, [], [0.5])])
    return _save(tmp_path, "if_in_loop", [h.make_node("Loop", ["m", "", "acc0"], ["y"], body=body)],
                 [h.make_tensor_value_info("acc0", T.FLOAT, ["N", 2]), h.make_tensor_value_info("x", T.FLOAT, ["N", 2]),
                  h.make_tensor_value_info("m", T.INT64, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 2])])


def loop_in_if_file(tmp_path):
    """then: x doubled m times (a Loop whose trip count is a graph input); else: x + 1."""
    body = h.make_graph([h.make_node("Identity", ["cond_in"], ["cond_out"]),
                         h.make_node("Add", ["acc_in", "acc_in"], ["acc_out"])], "body",
                        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("cond_in", T.BOOL, []),
                         h.make_tensor_value_info("acc_in", T.FLOAT, ["N"])],
                        [h.make_tensor_value_info("cond_out", T.BOOL, []), h.make_tensor_value_info("acc_out", T.FLOAT, ["N"])])
    then = _branch("then", [h.make_node("Loop", ["m", "", "x"], ["t"], body=body)], "t")
    other = _branch("else", [h.make_node("Add", ["x", "one"], ["e"])], "e", [h.make_tensor("one", T.FLOAT, [], [1.0])])
    return _save(tmp_path, "loop_in_if", [h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N"]), h.make_tensor_value_info("c", T.BOOL, []),
                  h.make_tensor_value_info("m", T.INT64, [])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N"])])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_if_inside_a_loop_body(backend, tmp_path, compilations):
    """acc = acc + x on even iterations, acc * 0.5 on odd ones, m iterations (a graph input): the
    loop's body holds an if on the iteration number, compiled once with the body."""
    path = if_in_loop_file(tmp_path)
    loop = next(n for n in from_onnx_file(path).nodes if n.op == "loop")
    assert "if" in {n.op for n in loop.attrs.body.nodes}
    rng = np.random.default_rng(4)
    run = _compile(path, [np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32), np.array(3)], backend, tmp_path)
    before = compilations[0]
    for n, m in [(2, 3), (1, 6), (3, 0), (2, 1)]:
        feeds = {"acc0": rng.standard_normal((n, 2)).astype(np.float32),
                 "x": rng.standard_normal((n, 2)).astype(np.float32), "m": np.array(m)}
        _check(run, path, feeds)
    assert not isinstance(run, Specialized)
    if backend == "minic":
        assert compilations[0] == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loop_inside_an_if_branch(backend, tmp_path, compilations):
    """then: x doubled m times (a Loop whose trip count is a graph input); else: x + 1."""
    path = loop_in_if_file(tmp_path)
    node = next(n for n in from_onnx_file(path).nodes if n.op == "if")
    assert "loop" in {n.op for n in node.attrs.then_branch.nodes}
    rng = np.random.default_rng(5)
    run = _compile(path, [np.zeros(3, np.float32), np.array(True), np.array(2)], backend, tmp_path)
    before = compilations[0]
    for n, c, m in [(3, True, 2), (4, False, 5), (2, True, 0), (5, True, 4)]:
        _check(run, path, {"x": rng.standard_normal(n).astype(np.float32), "c": np.array(c), "m": np.array(m)})
    _check_compiled_once(run, backend, compilations, before)


def test_a_known_condition_still_inlines_its_branch(tmp_path):
    """The same If with its condition a constant: the taken branch's nodes, no if op."""
    model = onnx.load(str(_sample_rate_file(tmp_path)))
    model.graph.initializer.append(h.make_tensor("sample_rate", T.INT64, [], [8000]))
    del model.graph.input[1]
    onnx.save(model, str(tmp_path / "static.onnx"))
    ops = [n.op for n in from_onnx_file(tmp_path / "static.onnx").nodes]
    assert "neg" in ops and "if" not in ops and "relu" not in ops


def _graph(name, out: TensorType) -> Graph:
    x = Value("x", TensorType(("N", 4), DType.f32))
    node = make_node("reshape" if out.rank != 2 else "identity", [x], {"shape": out.shape} if out.rank != 2 else {},
                     names=["y"])
    return Graph(name, [x], node.outputs, [node])


def test_branches_that_differ_in_rank_or_in_their_sizes_symbols_are_refused():
    cond = Value("c", TensorType((), DType.bool))
    x = Value("x", TensorType(("N", 4), DType.f32))
    flat = _graph("flat", TensorType(("4*N",), DType.f32))
    same = _graph("same", TensorType(("N", 4), DType.f32))
    with pytest.raises(UserError, match=r"if: output 0 is f32\[N, 4\] in the then branch and f32\[4\*N\] in the "
                                        r"else branch \(they may differ in sizes only\)"):
        make_node("if", [cond, x], {"then_branch": same, "else_branch": flat}, names=["y"])
    with pytest.raises(UserError, match="if: the branches' outputs differ in 0 dims, and the node names 1 size symbols"):
        make_node("if", [cond, x], {"then_branch": same, "else_branch": same, "sizes": ("k",)}, names=["y"])
    with pytest.raises(UserError, match=r"if: the condition must be one bool, got f32\[N, 4\]"):
        make_node("if", [x, x], {"then_branch": same, "else_branch": same}, names=["y"])


def test_branches_of_different_ranks_over_an_image_are_refused_in_one_line(tmp_path):
    """An if at run time needs branches that agree in ranks; this one (relu(x) or flatten(x)) falls back
    to the condition's value, which an image cannot give: one line naming the node and both reasons."""
    path = _save(tmp_path, "ranks",
                 [h.make_node("ReduceSum", ["x"], ["total"], keepdims=0), h.make_node("Greater", ["total", "zero"], ["c"]),
                  h.make_node("If", ["c"], ["y"], then_branch=_branch("then", [h.make_node("Relu", ["x"], ["t"])], "t"),
                              else_branch=_branch("else", [h.make_node("Flatten", ["x"], ["e"], axis=0)], "e"))],
                 [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 32, 32])], [h.make_tensor_value_info("y", T.FLOAT, None)],
                 [h.make_tensor("zero", T.FLOAT, [], [0.0])], check=False)
    with pytest.raises(UserError) as e:
        minic.compile(path, [np.ones((1, 3, 32, 32), np.float32)], backend="interp")
    assert "\n" not in str(e.value) and str(e.value).startswith("node #2 (If, opset 17): ")
    assert r"output 0 is f32[1, 3, 32, 32] in the then branch and f32[1, 3072] in the else branch" in str(e.value)
    assert str(e.value).endswith("computed from input 'x' (float32[1, 3, 32, 32]), and minic compiles in the values "
                                 "of inputs of at most 1024 elements only")
