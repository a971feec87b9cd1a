"""The textual form of the tensor IR: ``print_graph`` and ``parse_graph``.

    graph @mlp(%x: f32[B, 784]) -> (f32[B, 10]) {
      const @b0 : f32[10] = dense<0.0>
      const @w0 : f32[784, 10] = file("mlp.npz", "w0")
      %0 = matmul(%x, @w0) : f32[B, 10]
      %1 = add(%0, @b0) : f32[B, 10] group 0
      return %1
    }

The grammar is ``grammar.lark`` beside this file.  Printing then parsing gives
a structurally equal graph, and printing that again gives the same text:
floats are spelled so that they read back to the same bits.  Every error in a
text — syntax, unknown op or attribute, a type that disagrees with the op's
inference, an undefined or twice-defined value, a bad ``.npz`` reference —
is one ``ParseError`` that starts with ``file:line:col``.
"""
from __future__ import annotations

import functools
import io
import json
import os
import math
import re
import stat
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput

from minic.errors import UserError
from minic.ir import ops
from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value, shown_attr_items
from minic.ir.ops.layout import END
from minic.files import write_atomic
from minic.ir.types import DType, Dim, TensorType, canon
from minic.ir.verify import VerifyError, verify
from minic.limits import ensure_array_fits, fewer_collections


class ParseError(UserError):
    """Bad IR text.  The message reads ``file:line:col: what is wrong``."""

    def __init__(self, path: str, line: int, column: int, reason: str):
        super().__init__(f"{path}:{line}:{column}: {reason}")
        self.path, self.line, self.column, self.reason = path, line, column, reason


# --- printing -------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9_.]+")


def print_graph(graph: Graph, npz_path: str | os.PathLike | None = None, inline_limit: int = 16,
                elide: bool = False) -> str:
    """The text of ``graph``.  With ``npz_path``, each constant of more than
    ``inline_limit`` elements is saved there (unless all its elements are equal:
    a splat ``dense<0.0>`` is short at any size) and named as ``file("x.npz", "w")``;
    the text names the file without a folder, so keep it beside the text file.
    Without ``npz_path`` every constant is written inline — or, with ``elide``
    (dumps for reading), large ones print as ``elided`` and the text no longer parses."""
    side: dict[str, np.ndarray] = {}
    params = ", ".join(f"{_ref(v)}: {v.type}" for v in graph.inputs)
    results = ", ".join(str(v.type) for v in graph.outputs)
    lines = [f"graph @{_name(graph.name)}({params}) -> ({results}) {{"]
    for c in graph.constants:
        large = c.data.size > inline_limit and not _is_splat(c.data)
        if large and npz_path is not None:
            # bf16 has no numpy dtype of its own: its bits go to the file as u16, and the
            # declared type reads them back (see ``load``).
            side[c.name] = c.data.view(np.uint16) if c.type.dtype == DType.bf16 else c.data
            data = f"file({json.dumps(os.path.basename(npz_path))}, {json.dumps(c.name)})"
        elif large and elide:
            data = "elided"
        else:
            data = _dense(c.data)
        lines.append(f"  const {_ref(c)} : {c.type} = {data}")
    lines += ["  " + _node_text(node) for node in graph.nodes]
    lines += [("  return " + ", ".join(_ref(v) for v in graph.outputs)).rstrip(), "}"]
    if side:                             # written atomically: a reader never sees half a file
        buffer = io.BytesIO()
        np.savez(buffer, **side)
        write_atomic(Path(npz_path), buffer.getvalue())
    bodies = [v for node in graph.nodes for _, v in shown_attr_items(node.attrs) if isinstance(v, Graph)]
    for body in bodies:                  # a loop's body (ops/control.py), after the graph: for reading only
        lines += ["", print_graph(body, inline_limit=inline_limit, elide=True).rstrip("\n")]
    return "\n".join(lines) + "\n"


def _name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise UserError(f"name '{name}' cannot be printed: names use letters, digits, '_' and '.'")
    return name


def _ref(v: Value) -> str:
    return ("@" if v.is_constant else "%") + _name(v.name)


def _node_text(node: Node) -> str:
    outs = ", ".join(_ref(v) for v in node.outputs)
    ins = ", ".join(_ref(v) for v in node.inputs)
    items = shown_attr_items(node.attrs)
    attrs = " {" + ", ".join(f"{k} = {_attr_text(v)}" for k, v in items) + "}" if items else ""
    group = f" group {node.group}" if node.group is not None else ""
    return f"{outs} = {node.op}({ins}){attrs} : {', '.join(str(v.type) for v in node.outputs)}{group}"


def _attr_text(v: Any, in_list: bool = False) -> str:
    if v is None:
        return "none"
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, DType):
        return v.value
    if isinstance(v, (int, np.integer)):
        return "end" if v == END else str(int(v))
    if isinstance(v, (float, np.floating)):
        return repr(float(v))            # Python's repr reads back to the same double
    if isinstance(v, str):
        return v if in_list else json.dumps(v)     # in a list a str is a dim: B*T
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_attr_text(x, in_list=True) for x in v) + "]"
    if isinstance(v, Graph):             # a loop's body, printed after the graph
        return "@" + _name(v.name)
    raise TypeError(f"cannot print attribute value {v!r} of type {type(v).__name__}")


def _is_splat(data: np.ndarray) -> bool:
    bits = data.reshape(-1).view(f"u{data.dtype.itemsize}")
    return bits.size > 0 and bool((bits == bits[0]).all())


def _dense(data: np.ndarray) -> str:
    if _is_splat(data):
        return f"dense<{_element_text(data.reshape(-1)[0])}>"
    return "dense<[" + ", ".join(_element_text(x) for x in data.reshape(-1)) + "]>"


def _element_text(x: np.generic) -> str:
    if x.dtype == np.bool_:
        return "true" if x else "false"
    if x.dtype.kind in "iu":
        return str(int(x))
    if np.isnan(x):
        text = "-nan" if np.signbit(x) else "nan"
    else:
        text = str(x)                    # numpy's shortest spelling for this dtype: 0.1, 1e-08
        if text.lstrip("-").isdigit():
            text += ".0"                 # bf16 spells -0.0 as "-0", which would read back as the int 0
    if _float_of(text, x.dtype).tobytes() == x.tobytes():
        return text
    # The readable spelling does not read back to x's bits: an exact one, though not as readable.
    return f"nan:0x{int(x.view(f'u{x.dtype.itemsize}')):x}" if np.isnan(x) else float(x).hex()


def _float_of(text: str, dtype: np.dtype) -> np.generic:
    """The float of ``dtype`` that ``text`` spells (the parser uses this too)."""
    if ":0x" in text:
        bits = int(text.split(":0x")[1], 16)
        if bits >= 1 << (8 * dtype.itemsize):
            raise ValueError(f"NaN bits {text} do not fit in {dtype}")
        return np.array(bits, f"u{dtype.itemsize}").view(dtype)[()]
    value = float.fromhex(text) if "0x" in text else float(text)
    with np.errstate(over="ignore"):
        return np.array(value).astype(dtype)[()]


# --- parsing --------------------------------------------------------------------

@functools.cache
def _lark() -> Lark:
    grammar = (Path(__file__).parent / "grammar.lark").read_text()
    return Lark(grammar, parser="lalr", propagate_positions=True)


@fewer_collections
def parse_graph(text: str, path: str | os.PathLike | None = None) -> Graph:
    """The Graph that ``text`` spells, verified.  ``path`` (the file the text came
    from) names errors and is where ``file("x.npz", ...)`` is looked for."""
    where = str(path) if path is not None else "<text>"
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, where) from None
    folder = Path(path).parent if path is not None else Path(".")
    return _Builder(text, where, folder).graph(tree)


# How a syntax error names what it expected; string terminals show as themselves.
_TERMINALS = {"LOCAL": "a value like %x", "GLOBAL": "a name like @w", "IDENT": "a name",
              "INT": "an integer", "FLOAT": "a float", "STRING": "a string",
              "$END": "end of input", "<END-OF-FILE>": "end of input"}


def _syntax_error(e: UnexpectedInput, text: str, where: str) -> ParseError:
    if isinstance(e, UnexpectedCharacters):
        found, expected = repr(text[e.pos_in_stream]), e.allowed
    else:                                          # an UnexpectedToken: LALR raises no other kind
        found = "end of input" if e.token.type == "$END" else repr(str(e.token))
        expected = e.accepts or e.expected     # accepts: what this parse state really takes
    line, column = e.line, e.column
    if found == "end of input":                    # point just past the last character
        end = len(text.rstrip())
        line, column = text.count("\n", 0, end) + 1, end - text.rfind("\n", 0, end)
    names = " or ".join(sorted({_describe(t) for t in expected}))
    return ParseError(where, line, column, f"syntax error: unexpected {found}" + (f"; expected {names}" if names else ""))


def _describe(terminal: str) -> str:
    # Any other terminal the parser expects is one of the grammar's literal strings: "(", "const".
    # (The lexer never names the ignored WS and COMMENT among those it expected.)
    return _TERMINALS.get(terminal) or f"'{_lark().get_terminal(terminal).pattern.value}'"


# No dim, attribute or i64/u64 element needs more digits; a longer one is refused before Python
# converts it (100,000 digits take Python's int() a long time, and past 4,300 it raises).
MAX_DIGITS = 40

# What a lone word means in a scalar; any other word is a dim (a symbol).
_WORDS: dict[str, Any] = {"true": True, "false": False, "none": None, "end": END,
                          **{d.value: d for d in DType}}


class _Builder:
    """Walks the parse tree in text order, building Values and Nodes, and checks
    each node as it goes so that every error can point at its place."""

    def __init__(self, text: str, where: str, folder: Path):
        self.text, self.where, self.folder = text, where, folder
        self.values: dict[str, Value] = {}                 # one namespace for %x and @w
        self.defined_at: dict[str, tuple[int, int]] = {}
        self.npz: dict[Path, Any] = {}                     # the .npz files read so far, open
        self.files = ExitStack()                           # closes them

    def fail(self, at: Token | Tree, reason: str) -> NoReturn:
        meta = at if isinstance(at, Token) else at.meta
        raise ParseError(self.where, getattr(meta, "line", 1), getattr(meta, "column", 1), reason)

    def source(self, at: Tree) -> str:
        return self.text[at.meta.start_pos:at.meta.end_pos]

    def graph(self, tree: Tree) -> Graph:
        name, params, out_types, *body = tree.children
        inputs = [self.define(p.children[0], Value(p.children[0][1:], self.type(p.children[1])))
                  for p in params.children]
        with self.files:                   # the grammar puts every const before the first node
            constants = [self.constant(item) for item in body[:-1] if item.data == "const"]
            nodes = [self.node(item) for item in body[:-1] if item.data == "node"]
        outputs = self.outputs(body[-1], out_types)
        graph = Graph(name[1:], inputs, outputs, nodes, constants)
        try:
            return verify(graph)           # every check is made above; this only backs them up
        except VerifyError as e:
            self.fail(name, str(e))

    # --- values

    def define(self, token: Token, value: Value) -> Value:
        if value.name in self.values:
            line, col = self.defined_at[value.name]
            self.fail(token, f"duplicate definition: '{value.name}' is already defined at {line}:{col}")
        self.values[value.name] = value
        self.defined_at[value.name] = (token.line, token.column)
        return value

    def use(self, token: Token) -> Value:
        value = self.values.get(token[1:])
        if value is None:
            self.fail(token, f"undefined value {token}")
        if (token[0] == "@") != value.is_constant:
            what = "a constant" if value.is_constant else "not a constant"
            self.fail(token, f"{token} is {what}: write {_ref(value)}")
        return value

    def outputs(self, ret: Tree, out_types: Tree) -> list[Value]:
        outputs = [self.use(t) for t in ret.children[0].children]
        declared = [self.type(t) for t in out_types.children]
        if len(outputs) != len(declared):
            self.fail(ret, f"return gives {len(outputs)} values, the signature declares {len(declared)}")
        for token, value, t in zip(ret.children[0].children, outputs, declared):
            if value.type != t:
                self.fail(token, f"type mismatch: {token} is {value.type}, the signature declares {t}")
        return outputs

    # --- types and scalars

    def type(self, tree: Tree) -> TensorType:
        dtype, *dims = tree.children
        if dtype not in DType.__members__:
            self.fail(dtype, f"unknown dtype '{dtype}'; expected one of {', '.join(DType.__members__)}")
        return TensorType(tuple(self.dim(d, size=True)[1] for d in dims), DType[dtype])

    def dim(self, tree: Tree, size: bool = False) -> tuple[Any, Any]:
        """(int, 3) or (Dim, "B*T").  A ``size`` (a type's dim) is >= 0; an attribute's may be -1."""
        parts = tree.children
        long = next((p for p in parts if p.type == "INT" and len(p.lstrip("+-")) > MAX_DIGITS), None)
        if long is not None:
            self.fail(long, f"an integer of {len(long.lstrip('+-'))} digits (at most {MAX_DIGITS})")
        if len(parts) == 1 and parts[0].type == "INT":
            if size and int(parts[0]) < 0:
                self.fail(tree, f"a dim must be >= 0, got {int(parts[0])}")
            return int, int(parts[0])
        text = "*".join(parts)
        try:
            canon(text)
        except UserError:
            self.fail(tree, f"bad symbolic dim '{text}': expected a product like B*T or 4*T")
        return Dim, text

    def scalar(self, tree: Tree) -> tuple[Any, Any]:
        """(kind, value) of a scalar or, for an attribute, a list of them.  The kind is the
        type of the value (True: bool, END: int, f16: DType), but tuple for a list of
        (kind, value) items, float for a float's text, and Dim for a symbolic dim."""
        if tree.data == "list":
            return tuple, [self.scalar(s) for s in tree.children]
        item = tree.children[0]
        if isinstance(item, Tree):
            if len(item.children) == 1 and item.children[0] in _WORDS:
                return type(_WORDS[item.children[0]]), _WORDS[item.children[0]]
            return self.dim(item)
        if item.type == "STRING":
            return str, self.string(item)
        return float, str(item)

    def string(self, token: Token) -> str:
        try:
            return json.loads(token)
        except ValueError:
            self.fail(token, f"bad string {token}: use JSON escapes")

    # --- constants

    def constant(self, tree: Tree) -> Value:
        token, type_tree, data = tree.children
        t = self.type(type_tree)
        if not all(isinstance(d, int) for d in t.shape):
            self.fail(type_tree, f"constant {token} needs a static shape, got {t}")
        if data.data == "elided":
            self.fail(data, f"constant {token} was elided when this text was printed; "
                            "print it with an .npz side file to keep the data")
        count = math.prod(t.shape)                 # a Python int: no int64 to wrap round
        try:
            ensure_array_fits(t.shape, t.dtype.numpy, f"constant {token}")
        except UserError as e:
            self.fail(type_tree, str(e))
        if data.data == "file":
            array = self.load(data, t)
        else:
            if data.data != "splat" and len(data.children) != count:
                self.fail(data, f"dense literal has {len(data.children)} elements, {t} needs {count}")
            items = [self.element(s, t.dtype) for s in data.children]
            if data.data == "splat":
                try:
                    array = np.full(t.shape, items[0], t.dtype.numpy)
                except MemoryError:              # fits in free memory, but not under this process's limit
                    self.fail(type_tree, f"constant {token} ({t}): out of memory making it")
            else:
                array = np.array(items, t.dtype.numpy).reshape(t.shape)
        return self.define(token, Value(token[1:], t, array))

    def element(self, tree: Tree, dtype: DType) -> Any:
        kind, value = self.scalar(tree)
        if dtype == DType.bool and kind is bool:
            return value
        if dtype.is_int and kind is int:
            info = np.iinfo(dtype.numpy)
            if not info.min <= value <= info.max:
                self.fail(tree, f"{value} is out of range for {dtype.value}")
            return value
        if dtype.is_float and kind in (float, int):
            try:
                return _float_of(str(value), dtype.numpy)
            except (ValueError, OverflowError) as e:
                self.fail(tree, f"bad {dtype.value} literal '{self.source(tree)}': {e}")
        want = "true or false" if dtype == DType.bool else "integers" if dtype.is_int else "numbers"
        self.fail(tree, f"type mismatch: constant of {dtype.value} holds {want}, got '{self.source(tree)}'")

    def load(self, data: Tree, t: TensorType) -> np.ndarray:
        file_token, key_token = data.children
        file, key = self.string(file_token), self.string(key_token)
        path = self.folder / file
        try:
            if path not in self.npz:
                if not stat.S_ISREG(path.stat().st_mode):      # a pipe or a device could block for ever
                    self.fail(file_token, f"npz file {file} is not a regular file (looked at {path})")
                self.npz[path] = self.files.enter_context(zipfile.ZipFile(path))
            archive = self.npz[path]
            if key + ".npy" not in archive.namelist():
                names = ", ".join(n[:-4] for n in archive.namelist() if n.endswith(".npy")) or "none"
                self.fail(key_token, f"{file} has no array '{key}' (it has {names})")
            with archive.open(key + ".npy") as member:
                array = self._read_npy(member, data, key, file, t)
        except FileNotFoundError:
            self.fail(file_token, f"npz file {file} not found (looked for {path})")
        except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:   # unreadable or corrupt: say which
            self.fail(file_token, f"cannot read array '{key}' from {file} (looked in {path}): {e}")
        return array

    def _read_npy(self, member, data: Tree, key: str, file: str, t: TensorType) -> np.ndarray:
        """The array in an .npy member, its header checked against the declared type before a
        byte of data is read (a small compressed file can claim gigabytes)."""
        version = np.lib.format.read_magic(member)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(member)
        want = np.dtype(np.uint16) if t.dtype == DType.bf16 else np.dtype(t.dtype.numpy)
        if dtype.hasobject or dtype.newbyteorder("=") != want.newbyteorder("=") or tuple(shape) != t.shape:
            self.fail(data, f"type mismatch: array '{key}' in {file} is {dtype}{list(shape)}, "
                            f"the constant is declared {t}")
        nbytes = math.prod(shape) * dtype.itemsize
        raw = member.read(nbytes)
        if len(raw) != nbytes:
            raise ValueError(f"the data ends after {len(raw)} of {nbytes} bytes")
        array = np.frombuffer(raw, dtype).reshape(shape, order="F" if fortran else "C")
        array = np.ascontiguousarray(array, want.newbyteorder("="))
        return array.view(t.dtype.numpy) if t.dtype == DType.bf16 else array

    # --- nodes

    def node(self, tree: Tree) -> Node:
        # The grammar's [attrs] and ["group" INT] are None where the text leaves them out.
        results, op_name, operands, attrs_tree, *type_trees, group = tree.children
        try:
            op = ops.get(op_name)
        except UserError:
            self.fail(op_name, f"unknown op '{op_name}'")
        inputs = [self.use(t) for t in operands.children]
        attrs = self.attrs(op, attrs_tree, op_name)
        declared = [self.type(t) for t in type_trees]
        if len(declared) != len(results.children):
            self.fail(results, f"{len(results.children)} results but {len(declared)} types")
        # Names as a function, not a list: a count that differs is this parser's error, told below.
        names = [tok[1:] for tok in results.children]
        try:
            node = make_node(op.name, inputs, attrs, names=lambda k: names[k] if k < len(names) else "",
                             group=int(group) if group is not None else None)
        except UserError as e:
            reason = str(e)
            self.fail(op_name, reason if reason.startswith(op.name) else f"{op.name}: {reason}")
        if len(node.outputs) != len(declared):
            self.fail(results, f"{op.name} gives {len(node.outputs)} results, the node names {len(declared)}")
        for token, type_tree, d, v in zip(results.children, type_trees, declared, node.outputs):
            if d != v.type:
                self.fail(type_tree, f"type mismatch: {token} is declared {d} but {op.name} gives {v.type}")
        node.outputs = [self.define(tok, v) for tok, v in zip(results.children, node.outputs)]
        return node

    def attrs(self, op: ops.OpDef, tree: Tree | None, at: Token) -> Any:
        hints = ops.field_types(op.attrs)
        values: dict[str, Any] = {}
        for attr in tree.children if tree is not None else []:
            name, value_tree = attr.children
            if name not in hints:
                self.fail(name, f"unknown attribute '{name}' of {op.name}; it takes {', '.join(hints) or 'none'}")
            if name in values:
                self.fail(name, f"attribute '{name}' is given twice")
            value = _attr_value(self.scalar(value_tree))
            if not ops.conforms(value, hints[name]):
                self.fail(value_tree, f"type mismatch: attribute '{name}' of {op.name} must be "
                                      f"{ops.describe_type(hints[name])}, got '{self.source(value_tree)}'")
            if hints[name] is float and isinstance(value, int):
                value = float(str(value))        # eps = 1 is held as 1.0 (and 1e400's digits as inf)
            values[name] = value
        try:
            return op.make_attrs(**values)
        except UserError as e:
            self.fail(at, str(e))


# --- attribute values: read as the printer writes them; ops.conforms checks the field's type

_BAD = object()                          # what the printer never writes: conforms to no field type


def _attr_value(item: tuple[Any, Any], in_list: bool = False) -> Any:
    """The attribute value that the parsed (kind, value) ``item`` spells.  The printer
    writes a str as a JSON string ("tanh"), but in a list as a bare dim ([B*T, 4])."""
    kind, value = item
    if kind is tuple:
        return tuple(_attr_value(x, in_list=True) for x in value)
    if kind is float:
        try:
            return float(_float_of(value, np.dtype(np.float64)))
        except (ValueError, OverflowError):
            return _BAD
    if kind is (str if in_list else Dim):  # "B" in a list, or B*T outside one: never printed
        return _BAD
    return value
