"""minic's own post-training quantization (``precision="int8"``, minic/passes/post_training.py):
calibrated QDQ pairs in front of every matmul with constant weights, which -O2 then runs on
integers; its error against f32 within the 8-bit bound, and the integer kernels equal to the
fake quantization the interpreter computes."""
from collections import Counter

import numpy as np
import pytest

import minic
from minic import backends
from minic.api import load
from minic.inputs import calibration_inputs
from minic.ir.interpret import interpret
from minic.ir.text import parse_graph
from minic.passes import optimize
from minic.passes.post_training import (PREPARE, SKIP_ERROR_GROWTH, calibrate, error, observe, quantize_int8,
                                        quantize_contraction_rule, skip_in_8_bits)
from minic.passes.rewrite import rewrite
from minic.verify.tolerance import F32, QDQ8


def _first(out):
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet50", "bert-base", "llama-tiny"])
def test_int8_is_within_the_8_bit_bound_and_its_integer_kernels_equal_the_fake_quantization(name, cache):
    source = load(name, size="small")
    ref = _first(backends.get("torch")(source)(*source.example_inputs))
    compiled = _first(minic.compile(name, size="small", precision="int8", cache_dir=cache)(*source.example_inputs))
    fake = _first(backends.get("interp")(source, precision="int8")(*source.example_inputs))
    scale = np.abs(ref).max()
    assert 1e-4 < np.abs(compiled - ref).max() / scale <= QDQ8        # quantized for real, within the bound
    assert np.abs(compiled - fake).max() / scale <= F32               # integer sums = the QDQ pairs' arithmetic


@pytest.mark.parametrize("name, on_integers", [("mlp", 2), ("cnn", 3), ("resnet50", 18), ("bert-base", 12),
                                                ("llama-tiny", 15)])
def test_every_contraction_with_constant_weights_runs_on_integers(name, on_integers):
    """Convolutions (their batch norms folded first) and matmuls; bert-base's other 4 matmuls
    (q·k, p·v) multiply two activations: they stay f32."""
    source = load(name, size="small")
    graph = optimize(backends.quantized_int8(source).graph)
    ops = Counter(n.op for n in graph.nodes)
    assert ops["matmul_integer"] + ops["conv2d_integer"] == on_integers and not ops["batch_norm"]
    contractions = sum(n.op in ("matmul", "gemm", "conv2d") for n in backends.graph_of(source).nodes)
    assert ops["matmul"] + ops["gemm"] + ops["conv2d"] == contractions - on_integers


GRAPH = """graph @g(%x: f32[2, 4]) -> (f32[2, 3]) {
  const @w : f32[4, 3] = dense<[0.5, -1.0, 0.25, 1.0, 0.0, -0.5, 0.75, 0.5, 1.0, -0.25, 0.125, 2.0]>
  %r = relu(%x) : f32[2, 4]
  %y = matmul(%r, @w) : f32[2, 3]
  return %y
}"""


def test_calibration_takes_each_activation_range_over_every_feed_with_zero_in_it():
    graph = parse_graph(GRAPH)
    feeds = [(np.array([[1, -2, 3, 0.5], [0, 1, 2, 3]], np.float32),), (np.full((2, 4), 6.5, np.float32),)]
    assert calibrate(graph, feeds) == {"r": (0.0, 6.5)}               # relu's output: lo 0, hi over both feeds
    quantized = quantize_int8(graph, feeds)
    ops = Counter(n.op for n in optimize(quantized).nodes)
    assert ops["matmul_integer"] == 1 and not ops["matmul"]
    x = feeds[0][0]
    got, want = interpret(quantized, [x])[0], interpret(graph, [x])[0]
    sx, sw = 6.5 / 255, 2.0 / 127                  # the steps of x's u8 and of the widest weight column's s8
    bound = 4 * (sx / 2 * 2.0 + 6.5 * sw / 2)      # K = 4 terms, each off by half a step of x or of w
    assert 0 < np.abs(got - want).max() <= bound


def _within_the_bound_and_equal_to_the_fake_quantization(source, x):
    """Compiled int8 (fresh, not cached) within the 8-bit bound of torch's f32, and equal to the
    interpreter's fake quantization."""
    ref = _first(backends.get("torch")(source)(*x))
    compiled = _first(backends.get("minic")(source, precision="int8", use_cache=False)(*x))
    fake = _first(backends.get("interp")(source, precision="int8")(*x))
    scale = np.abs(ref).max()
    assert 1e-4 < np.abs(compiled - ref).max() / scale <= QDQ8
    assert np.abs(compiled - fake).max() / scale <= F32


def _residual_net():
    """A stem and two blocks with identity skips, as ResNet's: h -> relu(h + conv(relu(conv(h))))."""
    import torch

    class Residual(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.blocks = torch.nn.ModuleList(
                torch.nn.Sequential(torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 1))
                for _ in range(2))
            self.head = torch.nn.Linear(8, 10)

        def forward(self, x):
            h = torch.relu(self.stem(x))
            for block in self.blocks:
                h = torch.relu(h + block(h))
            return self.head(h.mean((2, 3)))

    torch.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    return load(Residual().eval(), [x])


def _skips(graph):
    """The residual adds: two activations of one type."""
    return [n for n in graph.nodes if n.op == "add" and len(n.inputs) == 2
            and not any(v.is_constant for v in n.inputs) and n.inputs[0].type == n.inputs[1].type]


def test_a_skip_connection_reads_the_8_bit_copy_its_block_quantized_for_its_first_conv():
    """Step 3: each block's input h is quantized once, for the block's first conv; the closing
    add reads that copy too, so after -O2 h's f32 is read by nothing but its quantization (no
    kernel stores it, none requantizes the sum) -- and it costs no accuracy here."""
    source = _residual_net()
    graph = backends.quantized_int8(source).graph
    readers = {}
    for n in graph.nodes:
        for v in n.inputs:
            readers.setdefault(v, []).append(n)
    producers = graph.producers()
    skips = _skips(graph)
    assert len(skips) == 2
    for add in skips:
        copy, = [v for v in add.inputs if {n.op for n in readers[v]} == {"add", "conv2d"}]   # one Value both read
        h = copy
        while producers[h].op != "relu":                             # back through dequantize(quantize(h))
            h = next(v for v in producers[h].inputs if not v.is_constant)
        assert [n.op for n in readers[h]] == ["mul"]                 # h · rx: its quantization, and nothing else
    x = source.example_inputs
    _within_the_bound_and_equal_to_the_fake_quantization(source, x)


def test_skip_connections_stay_f32_where_8_bits_would_cost_accuracy():
    """bert-base's post-norm stream: its output *is* the stream, so reading the norms' 8-bit
    copies grows the calibration error past SKIP_ERROR_GROWTH, and quantize_int8 keeps f32."""
    source = load("bert-base", size="small")
    feeds = calibration_inputs(source.example_inputs)
    graph = optimize(backends.graph_of(source), passes=PREPARE)
    ranges, reference = observe(graph, feeds)
    contraction = quantize_contraction_rule(ranges)
    quantized, streamed = rewrite(graph, [contraction]), rewrite(graph, [contraction, skip_in_8_bits])
    assert error(streamed, feeds, reference) > SKIP_ERROR_GROWTH * error(quantized, feeds, reference)
    kept = backends.quantized_int8(source).graph
    producers = kept.producers()
    assert len(_skips(kept)) == 4 and not any(producers[v].op == "mul" and producers[v].inputs[0].name.endswith("_xd")
                                              for n in _skips(kept) for v in n.inputs if v in producers)


POOL = """graph @g(%x: u8[2, 3, 7, 7]) -> (u8[2, 3, 4, 4]) {
  %m = max_pool2d(%x) {kernel = [3, 3], stride = [2, 2], padding = [1, 1, 1, 1], dilation = [1, 1], ceil_mode = false, count_include_pad = false} : u8[2, 3, 4, 4]
  return %m
}"""


def test_a_quantization_after_a_max_pool_moves_before_it_and_the_pool_takes_bytes():
    """resnet50's stem: relu -> max_pool2d -> the next conv's quantization becomes relu ->
    quantization -> max_pool2d of u8 (simplify-algebra): the stem's kernel stores bytes.  A max
    pool of bytes, compiled, pads with 0, which never wins (the interpreter and torch agree)."""
    import torch
    graph = optimize(backends.quantized_int8(load("resnet50", size="small")).graph)
    pool, = [n for n in graph.nodes if n.op == "max_pool2d"]
    assert pool.inputs[0].type.dtype.name == "u8"
    x = np.random.default_rng(0).integers(0, 256, (2, 3, 7, 7)).astype(np.uint8)
    x[..., 0, :] = 0                                          # an edge of zeros: the padding ties, never wins
    want = torch.nn.functional.max_pool2d(torch.from_numpy(x).float(), 3, 2, 1).numpy().astype(np.uint8)
    compiled = minic.compile(parse_graph(POOL), [x], use_cache=False)(x)
    assert compiled.dtype == np.uint8 and (compiled == want).all()
    assert (interpret(parse_graph(POOL), [x])[0] == want).all()


def test_calibration_inputs_are_the_examples_then_seeded_look_alikes():
    ids = np.array([[5, 9, 7]], np.int64)
    image = np.linspace(-1, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    feeds = calibration_inputs((ids, image), seed=3, count=4)
    again = calibration_inputs((ids, image), seed=3, count=4)
    assert len(feeds) == 4 and (feeds[0][0] == ids).all() and (feeds[0][1] == image).all()
    for (i, x), (i2, x2) in zip(feeds, again):
        assert (i == i2).all() and (x == x2).all()                   # seeded
        assert set(i.ravel()) <= {5, 7, 9} and i.dtype == np.int64    # token ids stay ids the model takes
        assert x.shape == image.shape and x.dtype == np.float32
    assert not (feeds[1][1] == feeds[2][1]).all()


def test_int8_is_a_precision_of_verify_and_of_the_minic_and_interp_paths():
    from minic.debug.paths import choose
    from minic.verify.precision import precision_table
    assert choose("minic:int8").tolerance == QDQ8 and choose("interp:int8").precision == "int8"
    cell, = precision_table(["mlp"], ["int8"], ["minic"])
    assert cell.status == "ok" and 1e-4 < cell.errors.rel <= QDQ8


def test_bisect_across_precisions_names_where_quantization_hurts_most():
    """minic:int8 against the f32 interpreter, node by node: within the 8-bit bound everywhere,
    and the largest difference at a matmul (bert-base: attention's q·k, whose operands are
    both quantized activations' products)."""
    from minic.debug.bisect import bisect
    from minic.debug.paths import choose
    result = bisect(load("bert-base", size="small"), choose("interp"), choose("minic:int8"))
    assert result.first is None and result.tolerance == QDQ8
    worst = max(result.steps, key=lambda s: s.diff.max_rel)
    assert worst.node.op == "matmul" and worst.diff.max_rel > 1e-3
    assert "the largest difference is at" in result.text() and worst.value.name in result.text()


@pytest.mark.parametrize("name", ["convnext", "wav2vec2"])
def test_int8_on_corpus_models_it_was_not_written_for(name):
    """Depthwise convs and LayerNorms (convnext), a conv feature encoder and a transformer
    (wav2vec2), with weights large enough that every block matters: every contraction with
    constant weights on integers, within the 8-bit bound, the integer kernels equal to the
    fake quantization."""
    import torch
    from minic.models import corpus
    module, example = corpus.get(name)
    torch.manual_seed(0)
    for p in module.parameters():
        if p.dim() > 1:
            torch.nn.init.normal_(p, 0, 0.2)
    x = [t.numpy() for t in example]
    source = load(module, x)
    _within_the_bound_and_equal_to_the_fake_quantization(source, x)
    ops = Counter(n.op for n in optimize(backends.quantized_int8(source).graph).nodes)
    assert ops["conv2d_integer"] >= 1 and ops["matmul_integer"] >= 1 and not ops["conv2d"]

