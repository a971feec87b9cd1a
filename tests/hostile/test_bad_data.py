"""Data a model cannot compute on (a token id past the embedding table, an integer
division by zero) is a DataError naming the node, on every path: never a clamped
answer without a word, never a signal.  Compiled code tests the data once per index
and reports through its status word (minic/ir/compute.py, DataCheck)."""
from __future__ import annotations

import numpy as np
import pytest

import minic
from minic.errors import DataError
from minic.ir.loops_interp import run_program
from minic.ir.text import parse_graph
from minic.runtime import CompileOptions, prepare

BAD = (10**6, -10**6)


@pytest.fixture(scope="module")
def llama():
    source = minic.load("llama-tiny", size="small")
    return source, {b: minic.compile(source, backend=b) for b in ("minic", "interp", "torch", "onnxruntime", "mlir")}


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("backend", ["minic", "interp", "torch", "onnxruntime", "mlir"])
def test_a_token_id_past_the_table_is_an_error_on_every_path(llama, backend, bad):
    source, runs = llama
    ids = source.example_inputs[0].copy()
    ids[1, 3] = bad
    # nn.Embedding takes [0, 256) (a negative id raises in torch): the importer says so on the node
    words = {"minic": rf"node #\d+ \(%embedding = gather\(%embed.weight, %input_ids\)\): index {bad} is out of "
                      r"range \[0, 256\) on axis 0",
             "interp": rf"gather\(%embed.weight, %input_ids\)\): gather: index {bad} is out of range \[0, 256\)",
             "torch": "PyTorch .*index out of range", "onnxruntime": "ONNX Runtime: .*out of",
             "mlir": rf"mlir path: %embedding = gather\(%embed.weight, %input_ids\): index {bad} is out of range "
                     r"\[0, 256\) on axis 0"}[backend]
    with pytest.raises(DataError, match=words):
        runs[backend](ids)


def test_after_an_error_the_compiled_model_runs_good_data(llama):
    source, runs = llama
    ids = source.example_inputs[0].copy()
    good = runs["minic"](ids)
    ids[0, 0] = 10**6
    with pytest.raises(DataError):
        runs["minic"](ids)
    np.testing.assert_array_equal(runs["minic"](source.example_inputs[0]), good)
    np.testing.assert_allclose(good, runs["torch"](source.example_inputs[0]), rtol=1e-4, atol=1e-4)


GATHER = """graph @emb(%w: f32[10, 4], %ids: i64[N]) -> (f32[N, 4]) {
  %one = add(%ids, %ids) : i64[N]
  %idx = sub(%one, %ids) : i64[N]
  %y = gather(%w, %idx) {axis = 0} : f32[N, 4]
  %z = relu(%y) : f32[N, 4]
  return %z
}"""


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_a_gather_whose_indices_are_computed_in_its_kernel(backend):
    """The indices come from arithmetic fused into the gather's kernel: the check recomputes them."""
    run = minic.compile(parse_graph(GATHER), backend=backend)
    w = np.arange(40, dtype=np.float32).reshape(10, 4) - 20
    np.testing.assert_array_equal(run(w, np.array([0, -1, 9, -10])), np.maximum(w[[0, -1, 9, -10]], 0))
    for bad in BAD + (10, -11):
        with pytest.raises(DataError, match=rf"emb: node #2 \(%y = gather\(%w, %idx\)\): .*index {bad} is out "
                                            r"of range \[-10, 10\) on axis 0"):
            run(w, np.array([1, bad, 2]))


POSITIONS = """graph @pos(%w: f32[10, 4], %mask: i64[B, T]) -> (f32[B, T, 4]) {
  %c = cumsum(%mask) {axis = 1} : i64[B, T]
  %p = mul(%c, %mask) : i64[B, T]
  %y = gather(%w, %p) {axis = 0} : f32[B, T, 4]
  return %y
}"""


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_a_gather_whose_indices_are_a_fused_reduction(backend):
    """OPT's position ids: a cumsum of the mask, fused into the gather's kernel, so the
    check itself has to compute the running sum (an accumulator inside the check's loop)."""
    run = minic.compile(parse_graph(POSITIONS), backend=backend)
    w = np.arange(40, dtype=np.float32).reshape(10, 4)
    mask = np.array([[1, 1, 0, 1], [0, 1, 1, 1]])
    positions = np.cumsum(mask, 1) * mask
    np.testing.assert_array_equal(run(w, mask), w[positions])
    with pytest.raises(DataError, match=r"index 10 is out of range \[-10, 10\)"):
        run(w, np.ones((1, 10), np.int64))


def test_the_loop_interpreter_reports_the_check_too():
    program = prepare(parse_graph(GATHER), CompileOptions(use_cache=False))
    w = np.zeros((10, 4), np.float32)
    with pytest.raises(DataError, match="index 1000000 is out of range"):
        run_program(program, [w, np.array([10**6])])


DIV = """graph @d(%a: i64[N], %b: i64[N]) -> (i64[N]) {
  %y = div(%a, %b) : i64[N]
  return %y
}"""


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_integer_division_by_zero_is_an_error_and_never_a_signal(backend):
    run = minic.compile(parse_graph(DIV), backend=backend)
    low = np.iinfo(np.int64).min
    a = np.array([7, -7, low, low], np.int64)
    # C's truncating division, exactly; MIN / -1 is refused (test_undefined.py)
    np.testing.assert_array_equal(run(a, np.array([2, 2, 3, 1])), [3, -3, low // 3 + 1, low])
    with pytest.raises(DataError, match="integer division by zero"):
        run(a, np.array([1, 0, 2, 1]))


MOD = """graph @m(%a: i32[N], %b: i32[]) -> (i32[N]) {
  %y = mod(%a, %b) : i32[N]
  return %y
}"""


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_integer_mod_by_zero_is_an_error_too(backend):
    """torch.remainder raises on an integer zero divisor; numpy's silent 0 would be a wrong answer."""
    run = minic.compile(parse_graph(MOD), backend=backend)
    a = np.array([7, -7, 5], np.int32)
    np.testing.assert_array_equal(run(a, np.array(3, np.int32)), [1, 2, 2])     # Python's %: the divisor's sign
    with pytest.raises(DataError, match=r"node #0 \(%y = mod\(%a, %b\)\): (mod: )?integer division by zero"):
        run(a, np.array(0, np.int32))


RESHAPE = """graph @r(%x: f32[B, 8], %s: i64[2]) -> (f32[B, 8]) {
  %y = reshape_dynamic(%x, %s) {shape = [B, 8]} : f32[B, 8]
  %z = relu(%y) : f32[B, 8]
  return %z
}"""


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_a_run_time_shape_tensor_must_agree_with_the_declared_shape(backend):
    run = minic.compile(parse_graph(RESHAPE), backend=backend)
    x = np.arange(-8, 8, dtype=np.float32).reshape(2, 8)
    for shape in ([2, 8], [0, 8], [-1, 8], [2, -1], [0, -1]):      # ONNX: 0 copies x's size, -1 infers
        np.testing.assert_array_equal(run(x, np.array(shape)), np.maximum(x, 0))
    for shape in ([4, 4], [8, 2], [16, 1]):
        with pytest.raises(DataError, match=r"reshape_dynamic.*the shape tensor (holds|asks for)"):
            run(x, np.array(shape))
    with pytest.raises(DataError, match=r"reshape_dynamic.*more than one -1"):     # ONNX infers one size
        run(x, np.array([-1, -1]))


@pytest.mark.parametrize("backend", ["minic", "interp"])
def test_a_run_time_shape_tensor_may_make_a_scalar(backend):
    graph = parse_graph("graph @r(%x: f32[1], %s: i64[0]) -> (f32[]) {\n"
                        "  %y = reshape_dynamic(%x, %s) {shape = []} : f32[]\n  return %y\n}")
    assert minic.compile(graph, backend=backend)(np.full(1, 3.0, np.float32), np.zeros(0, np.int64)) == 3.0


def test_an_aarch64_build_reports_a_bad_index_under_qemu(tmp_path):
    from minic.backends import ModelSource
    from minic.aarch64.backend import compile_emulated
    graph = parse_graph(GATHER)
    source = ModelSource("emb", (np.zeros((10, 4), np.float32), np.array([1])), graph=graph)
    run = compile_emulated(source)
    w = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.testing.assert_array_equal(run(w, np.array([3, -1])), w[[3, -1]])
    with pytest.raises(DataError, match=r"node #2 \(%y = gather\(%w, %idx\)\): index -1000000 is out of range"):
        run(w, np.array([3, -10**6]))


INDEXING = {   # op: (graph, index shape, where a bad index goes)
    "gather_elements": ("graph @g(%d: f32[3, 4], %i: i64[3, 2]) -> (f32[3, 2]) {\n"
                        "  %y = gather_elements(%d, %i) {axis = 1} : f32[3, 2]\n  return %y\n}", (3, 2), "axis 1"),
    "gather_nd": ("graph @g(%d: f32[3, 4], %i: i64[5, 2]) -> (f32[5]) {\n"
                  "  %y = gather_nd(%d, %i) : f32[5]\n  return %y\n}", (5, 2), "axis 1"),
    "scatter_elements": ("graph @g(%d: f32[3, 4], %i: i64[3, 2], %u: f32[3, 2]) -> (f32[3, 4]) {\n"
                         "  %y = scatter_elements(%d, %i, %u) {axis = 1} : f32[3, 4]\n  return %y\n}", (3, 2), "axis 1"),
}


@pytest.mark.parametrize("backend", ["minic", "interp"])
@pytest.mark.parametrize("op", sorted(INDEXING))
def test_the_other_indexing_ops_check_their_indices(op, backend):
    text, shape, where = INDEXING[op]
    graph = parse_graph(text)
    run = minic.compile(graph, backend=backend)
    args = [np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros(shape, np.int64)]
    if len(graph.inputs) == 3:
        args.append(np.ones(shape, np.float32))
    run(*args)
    for bad in BAD:
        args[1] = np.zeros(shape, np.int64)
        args[1].flat[3] = bad
        with pytest.raises(DataError, match=rf"node #0 \(%y = {op}\(.*index {bad} is out of range"):
            run(*args)

# The MLIR bridge's checks, on both of its routes: test_mlir_bad_data.py.
