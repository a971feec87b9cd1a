"""The runtime: input checks, dynamic sizes without recompiling, the buffer plan,
and the compile cache (hit, corrupt entry)."""
import numpy as np
import pytest

from minic.errors import UserError
from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.interpret import interpret
from minic.ir.types import DType, TensorType
from minic.runtime import CompileOptions, buffer_plan, compile_graph


def mlp_graph() -> Graph:
    """x[B, 16] -> matmul -> add -> relu -> matmul -> softmax."""
    rng = np.random.default_rng(0)
    x = Value("x", TensorType(("B", 16), DType.f32))
    w1, b1 = constant("w1", rng.standard_normal((16, 32), np.float32)), constant("b1", rng.standard_normal(32, np.float32))
    w2 = constant("w2", rng.standard_normal((32, 8), np.float32))
    vals = [Value(f"h{k}", TensorType(("B", 32 if k < 3 else 8), DType.f32)) for k in range(5)]
    mk = lambda op, ins, out, **kw: Node(op, ins, [out], ops.get(op).make_attrs(**kw))
    nodes = [mk("matmul", [x, w1], vals[0]), mk("add", [vals[0], b1], vals[1]), mk("relu", [vals[1]], vals[2]),
             mk("matmul", [vals[2], w2], vals[3]), mk("softmax", [vals[3]], vals[4], axis=-1)]
    return Graph("mlp", [x], [vals[4]], nodes, [w1, b1, w2])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return compile_graph(mlp_graph(), CompileOptions(cache_dir=tmp_path_factory.mktemp("cache")))


@pytest.mark.parametrize("batch", [1, 2, 7, 64])
def test_dynamic_batch_one_compile(model, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 16), np.float32)
    np.testing.assert_allclose(model(x), interpret(mlp_graph(), [x])[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("bad, message", [
    ((), "takes 1 inputs"),
    ((np.zeros((2, 16), np.float64),), "dtype"),
    ((np.zeros((2, 16, 1), np.float32),), "rank"),
    ((np.zeros((2, 15), np.float32),), "axis 1"),
])
def test_bad_inputs_are_user_errors(model, bad, message):
    with pytest.raises(UserError, match=message):
        model(*bad)


def test_non_contiguous_input_is_accepted(model):
    x = np.random.default_rng(1).standard_normal((16, 4), np.float32).T
    np.testing.assert_allclose(model(x), interpret(mlp_graph(), [np.ascontiguousarray(x)])[0], rtol=1e-4, atol=1e-6)


def test_buffer_plan_reuses_memory_of_dead_temporaries():
    f32 = DType.f32
    temps = [buffer_plan.Temp("a", (100,), f32, 0, 1), buffer_plan.Temp("b", (100,), f32, 1, 2),
             buffer_plan.Temp("c", (100,), f32, 2, 3), buffer_plan.Temp("d", ("B",), f32, 3, 4)]
    p = buffer_plan.plan(temps, {"B": 50})
    assert p.offsets["a"] == p.offsets["c"]            # a is dead when c is born
    assert p.offsets["b"] != p.offsets["a"]
    nbytes = {"a": 400, "b": 400, "c": 400, "d": 200}
    for x in temps:                                    # live at the same time -> disjoint bytes
        for y in temps:
            if x is not y and x.first <= y.last and y.first <= x.last:
                xs, ys = p.offsets[x.name], p.offsets[y.name]
                assert xs + nbytes[x.name] <= ys or ys + nbytes[y.name] <= xs
    assert p.arena_bytes < p.naive_bytes


def test_model_plan_peak_is_below_one_buffer_per_value(model):
    p = model.plan({"B": 8})
    assert 0 < p.arena_bytes <= p.naive_bytes


def test_cache_hit_skips_compilation(tmp_path, monkeypatch):
    options = CompileOptions(cache_dir=tmp_path)
    compile_graph(mlp_graph(), options)
    assert len(list(tmp_path.glob("*.mc.bin"))) == 1
    from minic import pipeline

    def fail(*args):
        raise AssertionError("compiled again despite a cache entry")
    monkeypatch.setattr(pipeline.Compilation, "run", fail)
    x = np.ones((3, 16), np.float32)
    np.testing.assert_allclose(compile_graph(mlp_graph(), options)(x), interpret(mlp_graph(), [x])[0], rtol=1e-4)


def test_corrupt_cache_entry_is_ignored_with_a_warning(tmp_path):
    options = CompileOptions(cache_dir=tmp_path)
    compile_graph(mlp_graph(), options)
    (entry,) = tmp_path.glob("*.mc.bin")
    data = bytearray(entry.read_bytes())
    data[-10] ^= 0xFF                                  # flip bits in the payload
    entry.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="corrupt"):
        model = compile_graph(mlp_graph(), options)
    x = np.ones((2, 16), np.float32)
    np.testing.assert_allclose(model(x), interpret(mlp_graph(), [x])[0], rtol=1e-4)


def test_options_change_the_cache_key():
    from minic.runtime.cache import cache_key
    g = mlp_graph()
    assert cache_key(g, CompileOptions(opt_level=3), b"") != cache_key(g, CompileOptions(opt_level=1), b"")
    assert cache_key(g, CompileOptions(cache_dir="/a"), b"") == cache_key(g, CompileOptions(cache_dir="/b"), b"")
    assert cache_key(g, CompileOptions(), b"records") != cache_key(g, CompileOptions(), b"")


def test_every_buffer_a_kernel_gets_starts_on_a_cache_line(model):
    """Constants (numpy promises 16 bytes), the arena's temporaries and a kernel's local buffers
    start on an ALIGN-byte boundary: a tile row or a 64-byte vector that straddles two cache lines
    costs two loads (an int8 conv on AMX tiles ran 2.5x slower with its weights 16 bytes off)."""
    from minic.codegen.module import build_module
    from minic.ir.aligned import ALIGN
    from minic.ir.loops import Allocate, Buffer, For, ForKind, Function, Load, Role, Store, Var, const, seq
    from minic.tune.measure import kernel_program
    model(np.ones((3, 16), np.float32))
    assert all(p % ALIGN == 0 for p in model._constant_pointers)
    assert all(t % ALIGN == 0 for _, free in model._scratch.values() for s in free for t in s.temps)
    x, y, t = (Buffer(n, (16,), DType.f32, r) for n, r in (("x", Role.INPUT), ("y", Role.OUTPUT), ("t", Role.LOCAL)))
    i = Var("i")
    body = Allocate(t, seq(For(i, const(0), const(16), ForKind.SERIAL, Store(t, (i,), Load(x, (i,)))),
                           For(i, const(0), const(16), ForKind.SERIAL, Store(y, (i,), Load(t, (i,))))))
    f = Function("local", (x, y), (), body)
    text = str(build_module(kernel_program(f), CompileOptions(use_cache=False, num_threads=1)))
    assert f"alloca float, i64 16, align {ALIGN}" in text
