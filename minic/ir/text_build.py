"""The text form's parse tree turned into Graphs, checked as they are built (minic/ir/text.py
parses the text with lark and hands the tree here; its docstring shows the syntax).

A file's graphs are built on first use: the model, the first graph, and each graph that a
node's attribute names (``body = @step``), once, however many nodes name it.  Each graph has
its own values (a body's ``%x`` is not the model's).  Every error is a ``ParseError`` that
starts with ``file:line:col``.
"""
from __future__ import annotations

import json
import math
import stat
import zipfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
from lark import Token, Tree

from minic.errors import UserError
from minic.ir import ops
from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value
from minic.ir.ops.layout import END
from minic.ir.types import DType, Dim, TensorType, canon
from minic.ir.verify import VerifyError, verify
from minic.limits import ensure_array_fits


class ParseError(UserError):
    """Bad IR text.  The message reads ``file:line:col: what is wrong``."""

    def __init__(self, path: str, line: int, column: int, reason: str):
        super().__init__(f"{path}:{line}:{column}: {reason}")
        self.path, self.line, self.column, self.reason = path, line, column, reason


def float_of(text: str, dtype: np.dtype) -> np.generic:
    """The float of ``dtype`` that ``text`` spells (the parser uses this too)."""
    if ":0x" in text:
        bits = int(text.split(":0x")[1], 16)
        if bits >= 1 << (8 * dtype.itemsize):
            raise ValueError(f"NaN bits {text} do not fit in {dtype}")
        return np.array(bits, f"u{dtype.itemsize}").view(dtype)[()]
    value = float.fromhex(text) if "0x" in text else float(text)
    with np.errstate(over="ignore"):
        return np.array(value).astype(dtype)[()]


# No dim, attribute or i64/u64 element needs more digits; a longer one is refused before Python
# converts it (100,000 digits take Python's int() a long time, and past 4,300 it raises).
MAX_DIGITS = 40

# What a lone word means in a scalar; any other word is a dim (a symbol).
_WORDS: dict[str, Any] = {"true": True, "false": False, "none": None, "end": END,
                          **{d.value: d for d in DType}}


def graph_of_tree(text: str, where: str, folder: Path, tree: Tree) -> Graph:
    """The model that the parse ``tree`` of ``text`` spells (``where`` names the file in errors;
    ``folder`` is where its ``.npz`` files are), with the graphs its attributes name."""
    return _File(text, where, folder, tree).model()


class _File:
    """The graphs of one text by name, each built on its first use: the model (the first
    graph) and the graphs its attributes name (``body = @step``), which may come after it."""

    def __init__(self, text: str, where: str, folder: Path, tree: Tree):
        self.text, self.where, self.folder = text, where, folder
        self.npz: dict[Path, Any] = {}                     # the .npz files read so far, open
        self.files = ExitStack()                           # closes them
        self.trees: dict[str, Tree] = {}
        for graph in tree.children:
            token = graph.children[0]
            if token[1:] in self.trees:
                first = self.trees[token[1:]].children[0]
                _fail(where, token, f"graph {token} is defined twice (first at {first.line}:{first.column})")
            self.trees[token[1:]] = graph
        self.built: dict[str, Graph] = {}
        self.building: list[str] = []                      # the graphs being built, outermost first

    def model(self) -> Graph:
        with self.files:
            model = self.graph(next(iter(self.trees.values())).children[0])
        unused = next((tree for name, tree in self.trees.items() if name not in self.built), None)
        if unused is not None:
            _fail(self.where, unused.children[0], f"graph {unused.children[0]} is not the model (the first graph), "
                                                  "and no attribute names it")
        return model

    def graph(self, token: Token) -> Graph:
        """The graph ``token`` (``@step``) names, built once: two loops naming it share it."""
        name = token[1:]
        if name in self.built:
            return self.built[name]
        if name not in self.trees:
            _fail(self.where, token, f"undefined graph {token}")
        if name in self.building:
            path = " -> ".join("@" + n for n in self.building[self.building.index(name):] + [name])
            _fail(self.where, token, f"graph {token} holds itself ({path}): a body cannot")
        self.building.append(name)
        self.built[name] = _Builder(self).graph(self.trees[name])
        self.building.pop()
        return self.built[name]


def _fail(where: str, at: Token | Tree, reason: str) -> NoReturn:
    meta = at if isinstance(at, Token) else at.meta
    raise ParseError(where, getattr(meta, "line", 1), getattr(meta, "column", 1), reason)


class _Builder:
    """Walks one graph's parse tree in text order, building Values and Nodes, and checks
    each node as it goes so that every error can point at its place.  Each graph of a
    file has its own values: a body's %x is not the model's."""

    def __init__(self, file: _File):
        self.file, self.text, self.where, self.folder = file, file.text, file.where, file.folder
        self.npz, self.files = file.npz, file.files
        self.values: dict[str, Value] = {}                 # one namespace for %x and @w
        self.defined_at: dict[str, tuple[int, int]] = {}

    def fail(self, at: Token | Tree, reason: str) -> NoReturn:
        _fail(self.where, at, reason)

    def source(self, at: Tree) -> str:
        return self.text[at.meta.start_pos:at.meta.end_pos]

    def graph(self, tree: Tree) -> Graph:
        name, params, out_types, *body = tree.children
        inputs = [self.define(p.children[0], Value(p.children[0][1:], self.type(p.children[1])))
                  for p in params.children]
        # the grammar puts every const before the first node
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
            self.fail(token, f"{token} is {what}: write {'@' if value.is_constant else '%'}{value.name}")
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
                return float_of(str(value), dtype.numpy)
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
            if isinstance(value_tree, Token):      # @step: a graph of this file
                value = self.file.graph(value_tree) if hints[name] is Graph else _BAD
            else:
                value = _attr_value(self.scalar(value_tree))
            if not ops.conforms(value, hints[name]):
                want = "a graph (@name)" if hints[name] is Graph else ops.describe_type(hints[name])
                got = value_tree if isinstance(value_tree, Token) else self.source(value_tree)
                self.fail(value_tree, f"type mismatch: attribute '{name}' of {op.name} must be {want}, got '{got}'")
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
            return float(float_of(value, np.dtype(np.float64)))
        except (ValueError, OverflowError):
            return _BAD
    if kind is (str if in_list else Dim):  # "B" in a list, or B*T outside one: never printed
        return _BAD
    return value
