"""Cross-compiled models run under qemu-user: they match PyTorch and the host build,
and the harness refuses bad input files before running any model code.

They need the aarch64 cross gcc and qemu-user (scripts/setup.sh installs both)."""
import numpy as np
import pytest

from minic import backends
from minic.api import graph_of, load
from minic.codegen.elf import elf_machine
from minic.compare import as_tuple, errors
from minic.aarch64 import EmulatedModel, cross_compile, tensor_file
from minic.aarch64.emulate import run_emulated
from minic.errors import UserError
from minic.ir.types import dim_eval
from minic.runtime import CompileOptions, compile_graph

A55 = CompileOptions.cross("aarch64", "cortex-a55", threads=2)


@pytest.fixture(scope="module")
def host_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """name -> (source, build) of the small zoo model, each built once for the module."""
    cache = {}

    def get(name):
        if name not in cache:
            source = load(name, size="small")
            cache[name] = source, cross_compile(graph_of(source), A55, tmp_path_factory.mktemp(name))
        return cache[name]
    return get


@pytest.fixture
def mlp(built):
    return built("mlp")


@pytest.mark.parametrize("name", ["mlp", "cnn", "llama-tiny"])
def test_emulated_model_matches_torch_and_the_host_build(name, built, host_cache):
    source, build = built(name)
    assert elf_machine(build.object_path.read_bytes()) == 183 and build.executable.is_file()
    emulated = as_tuple(EmulatedModel(build)(*source.example_inputs))
    reference = as_tuple(backends.get("torch")(source)(*source.example_inputs))
    host = as_tuple(compile_graph(graph_of(source), CompileOptions(cache_dir=host_cache))(*source.example_inputs))
    assert errors(emulated, reference).within(1e-4), errors(emulated, reference)
    assert errors(emulated, host).within(1e-4), errors(emulated, host)


def test_one_build_serves_every_batch_size(mlp):
    source, build = mlp
    model = EmulatedModel(build, repeat=3)
    reference = backends.get("torch")(source)
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 64)).astype(np.float32)
        np.testing.assert_allclose(model(x), reference(x), rtol=1e-4, atol=1e-5)
    assert len(model.run_times_s) == 2 and min(model.run_times_s) > 0


def test_bad_arrays_are_user_errors_before_any_emulation(mlp):
    _, build = mlp
    with pytest.raises(UserError, match="input 'x' axis 1: expected 64, got 63"):
        EmulatedModel(build)(np.ones((2, 63), np.float32))


def good_file(build) -> tensor_file.TensorFile:
    return tensor_file.inputs_for(build.layout, [np.ones((3, 64), np.float32)])


def with_(f: tensor_file.TensorFile, **changes) -> tensor_file.TensorFile:
    return tensor_file.TensorFile(**{**vars(f), **changes})


@pytest.mark.parametrize("make, message", [
    (lambda f: tensor_file.encode(f)[:20], "truncated while reading"),
    (lambda f: b"MINICT02" + tensor_file.encode(f)[8:], "bad magic"),
    (lambda f: tensor_file.encode(with_(f, sizes=[3, 4])), "2 symbol values; model 'mlp' has 1"),
    (lambda f: tensor_file.encode(with_(f, sizes=[0])), "symbol B = 0 is out of range"),
    (lambda f: tensor_file.encode(with_(f, sizes=[4])), "input 'x' axis 0: expected 4, got 3"),
    (lambda f: tensor_file.encode(with_(f, arrays=[np.ones((3, 64, 1), np.float32)])), "rank 3, expected 2"),
    (lambda f: tensor_file.encode(with_(f, arrays=[np.ones((3, 32), np.float32)])), "expected 64, got 32"),
    (lambda f: tensor_file.encode(f) + b"\0" * 4, "bytes of tensor data; the inputs need 768"),
    (lambda f: tensor_file.encode(f)[:-4], "bytes of tensor data; the inputs need 768"),
    (lambda f: tensor_file.encode(with_(f, arena_bytes=64)), "does not fit the arena"),
    (lambda f: tensor_file.encode(with_(f, offsets=[o + 4 for o in f.offsets])), "not 64-byte aligned"),
])
def test_the_harness_rejects_bad_input_files(mlp, tmp_path, make, message):
    _, build = mlp
    assert_refused(build, tmp_path, make(good_file(build)), message)


def test_the_harness_rejects_a_wrong_dtype(mlp, tmp_path):
    _, build = mlp
    data = bytearray(tensor_file.encode(good_file(build)))
    first_dtype = 8 + 4 + 8 + 4                  # magic, symbol count, B, tensor count
    data[first_dtype:first_dtype + 4] = (2).to_bytes(4, "little")      # i64, not f32
    assert_refused(build, tmp_path, bytes(data), "input 'x': dtype code 2, expected 0 (f32)")


def assert_refused(build, tmp_path, data: bytes, message: str) -> None:
    """The harness exits 2 with one line naming the problem, and writes no outputs."""
    (tmp_path / "in.bin").write_bytes(data)
    done = run_emulated(build, tmp_path / "in.bin", tmp_path / "out.bin")
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and done.stderr.startswith("minic-harness: "), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "out.bin").exists()


def test_the_harness_rejects_an_overlapping_buffer_plan(built, tmp_path):
    """Two temporaries alive at once placed at the same offset: refused, not run."""
    source, build = built("cnn")
    temps = build.layout.temps()
    good = tensor_file.inputs_for(build.layout, source.example_inputs)
    together = [(i, j) for i in range(len(temps)) for j in range(i + 1, len(temps))
                if temps[i].first <= temps[j].last and temps[j].first <= temps[i].last]
    env = dict(zip(build.layout.sizes, good.sizes))

    def nbytes(t) -> int:
        return int(np.prod([dim_eval(d, env) for d in t.shape])) * t.dtype.numpy.itemsize
    # move j onto i where j still fits in the arena: only the overlap can be wrong
    fits = [(i, j) for a, b in together for i, j in ((a, b), (b, a))
            if good.offsets[i] + nbytes(temps[j]) <= good.arena_bytes]
    assert fits, "the cnn should have temporaries alive at the same time"
    i, j = fits[0]
    offsets = list(good.offsets)
    offsets[j] = offsets[i]
    assert_refused(build, tmp_path, tensor_file.encode(with_(good, offsets=offsets)),
                   "are alive at the same time but overlap")


@pytest.mark.parametrize("op", ["arg_max", "arg_min"])
def test_arg_max_min_over_a_nan_on_aarch64(op, tmp_path):
    """The NaN's index, first or last (PyTorch's answer; tests/hostile/test_undefined.py on the
    host): the aarch64 build gave one past the row."""
    from minic.ir.text import parse_graph
    x = np.random.default_rng(0).standard_normal((3, 37)).astype(np.float32)
    x[0, 5] = x[0, 20] = x[1, 0] = x[2, 36] = np.nan
    for last, want in (("false", [5, 0, 36]), ("true", [20, 0, 36])):
        graph = parse_graph(f"graph @a(%x: f32[3, 37]) -> (i64[3]) {{\n  %y = {op}(%x) "
                            f"{{axis = 1, keepdims = false, last = {last}}} : i64[3]\n  return %y\n}}")
        build = cross_compile(graph, A55, tmp_path / f"{op}_{last}")
        np.testing.assert_array_equal(EmulatedModel(build)(x), want)
