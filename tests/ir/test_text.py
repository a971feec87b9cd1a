"""The textual IR: golden printing, exact round trips, and one clear error per mistake."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minic.ir import ops
from minic.ir.graph import Graph, Node, Value, constant, structurally_equal
from minic.ir.ops.layout import END
from minic.ir.text import ParseError, parse_graph, print_graph
from minic.ir.types import DType, TensorType

f32 = DType.f32


def small_graph() -> Graph:
    """Every printed feature once: symbolic dims, a splat, a side-file constant,
    a multi-output node, attributes of several kinds, a fusion group."""
    rng = np.random.default_rng(0)
    x = Value("x", TensorType(("B", 8), f32))
    w = constant("w0", rng.standard_normal((8, 4)).astype(np.float32))
    b = constant("b0", np.array([0.1, -2.5, np.inf, -0.0], np.float32))
    zero = constant("zero", np.zeros((2, 3), np.float16))
    mask = constant("mask", np.array([True, False]))
    t = {n: Value(n, TensorType(s, f32)) for n, s in
         [("0", ("B", 4)), ("1", ("B", 4)), ("attn.q", ("B", 2)), ("3", ("B", 2)),
          ("4", ("B", 2, 1)), ("5b", ("B", 2, 1)), ("5", (2, "B", 1))]}

    def node(op, ins, outs, group=None, **attrs):
        return Node(op, ins, [t[o] for o in outs], ops.get(op).make_attrs(**attrs), group)

    nodes = [node("matmul", [x, w], ["0"]),
             node("add", [t["0"], b], ["1"], group=3),
             node("split", [t["1"]], ["attn.q", "3"], axis=1, sizes=(2, 2)),
             node("reshape", [t["attn.q"]], ["4"], shape=("B", 2, 1)),
             node("slice", [t["4"]], ["5b"], axes=(0,), starts=(0,), ends=(END,), steps=(1,)),
             node("transpose", [t["5b"]], ["5"], perm=(1, 0, 2))]
    return Graph("mlp", [x], [t["5"], t["3"]], nodes, [w, b, zero, mask])


GOLDEN = """\
graph @mlp(%x: f32[B, 8]) -> (f32[2, B, 1], f32[B, 2]) {
  const @w0 : f32[8, 4] = file("mlp.npz", "w0")
  const @b0 : f32[4] = dense<[0.1, -2.5, inf, -0.0]>
  const @zero : f16[2, 3] = dense<0.0>
  const @mask : bool[2] = dense<[true, false]>
  %0 = matmul(%x, @w0) : f32[B, 4]
  %1 = add(%0, @b0) : f32[B, 4] group 3
  %attn.q, %3 = split(%1) {axis = 1, sizes = [2, 2]} : f32[B, 2], f32[B, 2]
  %4 = reshape(%attn.q) {shape = [B, 2, 1]} : f32[B, 2, 1]
  %5b = slice(%4) {axes = [0], starts = [0], ends = [end], steps = [1]} : f32[B, 2, 1]
  %5 = transpose(%5b) {perm = [1, 0, 2]} : f32[2, B, 1]
  return %5, %3
}
"""


# Every attribute kind and literal spelling, written by hand.
RICH = """\
graph @rich(%x: f32[B, T, 4], %ids: i64[B, T]) -> (f32[B, T, 4], f16[B*T, 2], bool[B, T, 4]) {
  const @emb : f32[5, 4] = dense<[0.5, -1.0, 2.25, 0x1.8p+1, 1e-08, 3.4028235e+38, -0.0, nan, inf, -inf, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 1e-45]>
  const @n : i32[2] = dense<[-2147483648, 2147483647]>
  const @on : bool[3] = dense<[true, false, true]>
  const @half : f16[4] = dense<[0.1, 6.55e+04, -inf, 6e-08]>
  %e = gather(@emb, %ids) {axis = 0} : f32[B, T, 4]
  %s = add(%x, %e) : f32[B, T, 4] group 0
  %ln = layer_norm(%s) {axis = -1, eps = 1e-05} : f32[B, T, 4] group 0
  %g = gelu(%ln) {approximate = "tanh"} : f32[B, T, 4]
  %p = pad(%g) {pads = [0, 0, 1, 0, 0, 1], mode = "constant", value = -inf} : f32[B, T, 6]
  %q = slice(%p) {axes = [2, 1], starts = [1, 0], ends = [5, T], steps = [1, 1]} : f32[B, T, 4]
  %r = reshape(%q) {shape = [B*T, 4]} : f32[B*T, 4]
  %a, %b = split(%r) {axis = 1, sizes = [2, 2]} : f32[B*T, 2], f32[B*T, 2]
  %h = cast(%a) {dtype = f16} : f16[B*T, 2]
  %m = reduce_max(%q) {axes = [-1], keepdims = true} : f32[B, T, 1]
  %c = gt(%q, %m) : bool[B, T, 4]
  %d = dropout(%g) {p = 0.1} : f32[B, T, 4]
  return %d, %h, %c
}
"""


def test_golden_print(tmp_path):
    assert print_graph(small_graph(), npz_path=tmp_path / "mlp.npz", inline_limit=8) == GOLDEN
    with np.load(tmp_path / "mlp.npz") as npz:
        assert npz.files == ["w0"] and np.array_equal(npz["w0"], small_graph().constants[0].data)
    assert os.listdir(tmp_path) == ["mlp.npz"]           # the temporary file was renamed, not left


def test_golden_parse(tmp_path):
    print_graph(small_graph(), npz_path=tmp_path / "mlp.npz", inline_limit=8)
    parsed = parse_graph(GOLDEN, tmp_path / "mlp.mc")
    assert structurally_equal(parsed, small_graph())
    assert [v.name for v in parsed.values()] == [v.name for v in small_graph().values()]
    assert print_graph(parsed, npz_path=tmp_path / "again.npz", inline_limit=8) == GOLDEN.replace("mlp.npz", "again.npz")


def test_hand_written_text_prints_back_unchanged_but_for_spelling():
    graph = parse_graph(RICH)
    assert [n.group for n in graph.nodes[:4]] == [None, 0, 0, None]
    text = print_graph(graph)
    assert text == RICH.replace("0x1.8p+1", "3.0")      # the hex float prints in decimal
    assert structurally_equal(parse_graph(text), graph)


def test_inline_without_side_file_and_comments():
    text = print_graph(small_graph())
    assert "file(" not in text
    commented = "// a comment\n" + text.replace("group 3", "group 3   // fused")
    assert structurally_equal(parse_graph(commented), small_graph())


def test_parse_resolves_npz_next_to_the_text(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    print_graph(small_graph(), npz_path=tmp_path / "sub" / "mlp.npz", inline_limit=8)
    monkeypatch.chdir(tmp_path)                          # not the text's folder
    assert structurally_equal(parse_graph(GOLDEN, tmp_path / "sub" / "mlp.mc"), small_graph())


# --- float literals are bit-exact ------------------------------------------------

def reparse_constant(data: np.ndarray) -> np.ndarray:
    g = Graph("g", [], [], [], [constant("c", data)])
    return parse_graph(print_graph(g)).constants[0].data


def test_every_f16_bit_pattern_round_trips():
    bits = np.arange(1 << 16, dtype=np.uint16)
    assert reparse_constant(bits.view(np.float16)).view(np.uint16).tolist() == bits.tolist()


def test_every_bf16_bit_pattern_round_trips():
    # bf16 prints -0.0 as "-0": read as an integer it would come back as +0 (a CI find)
    bits = np.arange(1 << 16, dtype=np.uint16)
    data = bits.view(DType.bf16.numpy)
    assert reparse_constant(data).view(np.uint16).tolist() == bits.tolist()
    assert reparse_constant(np.full(17, -0.0, DType.bf16.numpy)).view(np.uint16).tolist() == [0x8000] * 17


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, (1 << 32) - 1), min_size=2, max_size=20))
def test_f32_bit_patterns_round_trip(words):
    bits = np.array(words, np.uint32)
    assert reparse_constant(bits.view(np.float32)).view(np.uint32).tolist() == bits.tolist()


def test_special_literals_are_readable():
    data = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e-45, 0.1], np.float32)
    text = print_graph(Graph("g", [], [], [], [constant("c", data)]))
    assert "dense<[nan, -nan, inf, -inf, 1e-45, 0.1]>" in text
    payload = np.array([0x7FC00001, 0x3F800000], np.uint32).view(np.float32)
    assert "nan:0x7fc00001" in print_graph(Graph("g", [], [], [], [constant("c", payload)]))
    ints = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max], np.int64)
    assert reparse_constant(ints).tolist() == ints.tolist()


# --- errors: one ParseError with file:line:col ------------------------------------

BASE = """\
graph @g(%x: f32[B, 4]) -> (f32[B, 4]) {
  const @c : f32[4] = dense<[1.0, 2.0, 3.0, 4.0]>
  %0 = add(%x, @c) : f32[B, 4]
  return %0
}
"""

ERRORS = [  # (name, replace this, by this, "line:col", words the message must hold)
    ("syntax", "add(%x,", "add(%x", "3:15", ["syntax error", "'@c'", "expected ')' or ','"]),
    ("end of input", "return %0\n}\n", "return %0\n", "4:12", ["end of input", "'}'"]),
    ("bad character", "%0 =", "%0 ?=", "3:6", ["unexpected '?'", "'='"]),
    ("unknown op", "add(", "addd(", "3:8", ["unknown op 'addd'"]),
    ("unknown attribute", "@c)", "@c) {axis = 1}", "3:21", ["unknown attribute 'axis' of add"]),
    ("type mismatch", ": f32[B, 4]\n  return", ": f32[B, 5]\n  return", "3:22",
     ["type mismatch", "%0 is declared f32[B, 5]", "add gives f32[B, 4]"]),
    ("op rejects inputs", "add(%x, @c)", "matmul(%x, %x)", "3:8", ["matmul", "contracted dims differ"]),
    ("undefined value", "add(%x,", "add(%y,", "3:12", ["undefined value %y"]),
    ("duplicate definition", "%0 = add(%x, @c) : f32[B, 4]\n  return %0",
     "%x = add(%x, @c) : f32[B, 4]\n  return %x", "3:3", ["duplicate definition", "'x'", "1:10"]),
    ("constant named as value", "@c)", "%c)", "3:16", ["%c is a constant", "@c"]),
    ("attribute type", "add(%x, @c) : f32[B, 4]", "reduce_sum(%x) {axes = 1} : f32[B]", "3:31",
     ["type mismatch", "'axes' of reduce_sum", "list of ints", "'1'"]),
    ("bare word for a string", "add(%x, @c)", "gelu(%x) {approximate = tanh}", "3:32",
     ["type mismatch", "'approximate' of gelu", 'must be the string "none" or "tanh"', "'tanh'"]),
    ("string in a list of dims", "add(%x, @c) : f32[B, 4]",
     'reshape(%x) {shape = ["B", 4]} : f32[B, 4]', "3:29",
     ["type mismatch", "'shape' of reshape", "list of dims", "'[\"B\", 4]'"]),
    ("missing attribute", "add(%x, @c) : f32[B, 4]", "reduce_sum(%x) : f32[B]", "3:8", ["reduce_sum needs", "axes"]),
    ("attribute check", "add(%x, @c)", "dropout(%x) {p = 1.5}", "3:8", ["dropout", "p must be in [0, 1)", "1.5"]),
    ("attribute choice", "add(%x, @c)", 'gelu(%x) {approximate = "erf"}', "3:32",
     ["gelu", "approximate", 'must be the string "none" or "tanh"', "'\"erf\"'"]),
    ("unknown dtype", "f32[4]", "f33[4]", "2:14", ["unknown dtype 'f33'"]),
    ("literal size", "3.0, ", "", "2:23", ["dense literal has 3 elements", "f32[4] needs 4"]),
    ("literal type", "3.0", "true", "2:40", ["type mismatch", "f32", "'true'"]),
    ("signature", "-> (f32[B, 4])", "-> (f32[B, 3])", "4:10", ["%0 is f32[B, 4]", "signature declares f32[B, 3]"]),
    ("bad dim", "%x: f32[B, 4]", "%x: f32[B*-1, 4]", "1:18", ["bad symbolic dim 'B*-1'"]),
    ("group", "f32[B, 4]\n  return", "f32[B, 4] group x\n  return", "3:38", ["syntax error", "'x'", "integer"]),
    ("missing npz", "dense<[1.0, 2.0, 3.0, 4.0]>", 'file("gone.npz", "c")', "2:28", ["gone.npz not found"]),
]


@pytest.mark.parametrize("name, old, new, where, words", ERRORS, ids=[e[0] for e in ERRORS])
def test_error_messages(name, old, new, where, words):
    assert old in BASE
    with pytest.raises(ParseError) as info:
        parse_graph(BASE.replace(old, new), "model.mc")
    message = str(info.value)
    assert message.startswith(f"model.mc:{where}: "), message
    for word in words:
        assert word in message, message
    assert "\n" not in message


def test_an_int_for_a_float_attribute_is_held_as_a_float():
    text = BASE.replace("add(%x, @c) : f32[B, 4]", "layer_norm(%x) {eps = 1} : f32[B, 4]")
    node = parse_graph(text).nodes[0]
    assert type(node.attrs.eps) is float and node.attrs.eps == 1.0
    assert "eps = 1.0" in print_graph(Graph("g", node.inputs, node.outputs, [node], []))


def test_bad_npz_references(tmp_path):
    np.savez(tmp_path / "w.npz", c=np.ones(4, np.float32), i=np.ones(4, np.int64))
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    cases = [('file("w.npz", "d")', "2:37", ["w.npz has no array 'd'", "it has c, i"]),
             ('file("w.npz", "i")', "2:23", ["type mismatch", "array 'i' in w.npz is int64[4]", "f32[4]"]),
             ('file("junk.npz", "c")', "2:28", ["cannot read array 'c' from junk.npz"])]
    for ref, where, words in cases:
        with pytest.raises(ParseError) as info:
            parse_graph(BASE.replace("dense<[1.0, 2.0, 3.0, 4.0]>", ref), tmp_path / "m.mc")
        message = str(info.value)
        assert message.startswith(f"{tmp_path / 'm.mc'}:{where}: "), message
        assert all(w in message for w in words), message
    ok = parse_graph(BASE.replace("dense<[1.0, 2.0, 3.0, 4.0]>", 'file("w.npz", "c")'), tmp_path / "m.mc")
    assert ok.constants[0].data.tolist() == [1.0] * 4


# --- property: print -> parse is exact on random graphs -------------------------

@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), inline_limit=st.integers(0, 20))
def test_round_trip_random_graphs(graph_strategy, data, inline_limit):
    graph = data.draw(graph_strategy)
    with tempfile.TemporaryDirectory() as folder:
        npz = Path(folder) / "g.npz"
        text = print_graph(graph, npz_path=npz, inline_limit=inline_limit)
        parsed = parse_graph(text, Path(folder) / "g.mc")
        assert structurally_equal(parsed, graph), text
        assert print_graph(parsed, npz_path=npz, inline_limit=inline_limit) == text
    assert structurally_equal(parse_graph(print_graph(graph)), graph)


# --- fuzz: whatever the text, only ParseError comes out ---------------------------

SNIPPETS = ["%0", "%x", "@c", "@g", ",", "(", ")", "{", "}", "[", "]", "=", ":", "*", "<", ">", "->", "f32", "i64",
            "bool", "B*T", "-1", "0", "99999999999999999999999", "1e309", "nan", "-inf", "nan:0xffffffffff",
            '"s"', '"\\q"', "group", "end", "none", "true", "add", "split", "matmul", "reshape", "concat", "slice",
            "0x1p+1", "\n", "dense<", "file(", "const", "return", "graph", "{axis = 1}", "// c", "\x00", "é"]


def parses_or_says_why(text: str) -> None:
    try:
        parse_graph(text, "fuzz.mc")
    except ParseError as e:
        assert str(e).startswith("fuzz.mc:"), e


@st.composite
def mutated(draw, texts: st.SearchStrategy[str]) -> str:
    text = draw(texts)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        how = draw(st.sampled_from(["delete", "insert", "replace", "duplicate line"]))
        if how == "delete":
            text = text[:i] + text[j:]
        elif how == "insert":
            text = text[:i] + draw(st.sampled_from(SNIPPETS)) + text[i:]
        elif how == "replace":
            text = text[:i] + draw(st.sampled_from(SNIPPETS)) + text[j:]
        else:
            lines = text.split("\n")
            line = lines[draw(st.integers(0, len(lines) - 1))]
            lines.insert(draw(st.integers(0, len(lines))), line)
            text = "\n".join(lines)
    return text


# Fuzz budget: 7,000 + 100 + 2,900 = 10,000 generated or mutated inputs per run.
@settings(max_examples=7000, deadline=None)
@given(mutated(st.sampled_from([GOLDEN, BASE, RICH])))
def test_fuzz_mutated_hand_written_text(text):
    parses_or_says_why(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutated_random_graphs(graph_strategy, data):
    parses_or_says_why(data.draw(mutated(graph_strategy.map(print_graph))))


@settings(max_examples=2900, deadline=None)
@given(st.lists(st.sampled_from(SNIPPETS) | st.text(max_size=3), max_size=40).map(" ".join))
def test_fuzz_random_text(text):
    parses_or_says_why(text)


# --- the zoo round-trips through text -------------------------------------------

def zoo_names() -> list[str]:
    import minic.models as zoo
    return zoo.names()


@pytest.mark.parametrize("name", zoo_names())
def test_zoo_model_round_trips(name, tmp_path):
    """Each small zoo model, imported from torch, prints and parses back exactly."""
    import torch

    from minic.frontend.torch import from_torch

    import minic.models as zoo
    from minic.ir.interpret import interpret
    module, inputs = zoo.get(name, size="small")
    graph = from_torch(module, inputs, dynamic_axes=zoo.info(name).dynamic_axes)
    path = tmp_path / f"{name}.mc"
    path.write_text(print_graph(graph, npz_path=tmp_path / f"{name}.npz"))
    parsed = parse_graph(path.read_text(), path)
    assert structurally_equal(parsed, graph)
    assert print_graph(parsed, npz_path=tmp_path / "again.npz") == path.read_text().replace(
        f'"{name}.npz"', '"again.npz"')
    arrays = [t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t) for t in inputs]
    for a, b in zip(interpret(graph, arrays), interpret(parsed, arrays)):
        assert np.array_equal(a, b, equal_nan=True)


def test_elided_dump_is_readable_but_refuses_to_parse():
    w = constant("w", np.arange(64, dtype=np.float32).reshape(8, 8))
    x, y = Value("x", TensorType((8,), DType.f32)), Value("y", TensorType((8,), DType.f32))
    g = Graph("g", [x], [y], [Node("matmul", [w, x], [y], ops.get("matmul").make_attrs())], [w])
    text = print_graph(g, elide=True)
    assert "const @w : f32[8, 8] = elided" in text
    with pytest.raises(ParseError, match=r"<text>:2:\d+: constant @w was elided"):
        parse_graph(text)


# --- hostile text (issue 37): refused in bounded time and memory, naming the place -----------

def _with_const(decl: str) -> str:
    return f"graph @g(%x: f32[4]) -> (f32[4]) {{\n  const @c : {decl}\n  %y = relu(%x) : f32[4]\n  return %y\n}}\n"


def test_a_splat_constant_larger_than_memory_is_refused_before_it_is_made():
    with pytest.raises(ParseError, match=r"2:14: constant @c \(float32\[1048576, 1048576, 16\]\) needs 64\.0 TiB"):
        parse_graph(_with_const("f32[1048576, 1048576, 16] = dense<1.0>"))


def test_a_dense_literal_whose_element_count_wraps_int64_is_refused():
    # 2^32 * 2^32 elements: an int64 product wraps to 0, which two elements would not match either
    with pytest.raises(ParseError, match=r"constant @c \(float32\[4294967296, 4294967296\]\) needs 64\.0 EiB"):
        parse_graph(_with_const("f32[4294967296, 4294967296] = dense<[1.0, 2.0]>"))


def test_an_integer_of_100000_digits_is_refused_quickly():
    with pytest.raises(ParseError, match=r"1:18: an integer of 100000 digits \(at most 40\)"):
        parse_graph("graph @g(%x: f32[" + "1" * 100_000 + "]) -> (f32[4]) {\n  return %x\n}\n")
    with pytest.raises(ParseError, match=r"an integer of 100000 digits"):
        parse_graph("graph @g(%x: i64[1]) -> (i64[1]) {\n  const @c : i64[1] = dense<[" + "9" * 100_000 + "]>\n"
                    "  %y = add(%x, @c) : i64[1]\n  return %y\n}\n")


def test_npz_side_file_that_is_a_named_pipe_is_never_opened(tmp_path):
    os.mkfifo(tmp_path / "w.npz")           # opening it would wait for a writer for ever
    text = _with_const('f32[4] = file("w.npz", "c")')
    with pytest.raises(ParseError, match=r"npz file w\.npz is not a regular file"):
        parse_graph(text, tmp_path / "g.mc")


def test_npz_member_is_checked_by_its_header_before_its_data_is_read(tmp_path, monkeypatch):
    """A zip bomb: a few KiB of compressed zeros whose header claims 2^28 floats (1 GiB)."""
    import io
    import zipfile
    with zipfile.ZipFile(tmp_path / "w.npz", "w", compression=zipfile.ZIP_DEFLATED) as z:
        with z.open("c.npy", "w", force_zip64=True) as f:
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 28,)})
            f.write(header.getvalue())
            f.write(bytes(1 << 20))
    reads = []
    real_read = zipfile.ZipExtFile.read
    monkeypatch.setattr(zipfile.ZipExtFile, "read", lambda self, n=-1: reads.append(n) or real_read(self, n))
    with pytest.raises(ParseError, match=r"array 'c' in w\.npz is float32\[268435456\], the constant is declared f32\[4\]"):
        parse_graph(_with_const('f32[4] = file("w.npz", "c")'), tmp_path / "g.mc")
    assert max(reads) < 1 << 16             # the header only
    np.savez_compressed(tmp_path / "ok.npz", c=np.arange(4, dtype=np.float32))
    graph = parse_graph(_with_const('f32[4] = file("ok.npz", "c")'), tmp_path / "g.mc")
    np.testing.assert_array_equal(graph.constants[0].data, np.arange(4, dtype=np.float32))
