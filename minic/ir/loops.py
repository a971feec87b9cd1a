"""The Loop IR: kernels as loop nests over named buffers.

A ``Function`` (one kernel) takes buffers and symbolic sizes (``B``, ``T``) as
arguments; its body is a tree of statements:

    For(var, start, extent, kind, body)   kind: serial | parallel | vectorized | unrolled
    Store(buffer, index, value)           buffer[index...] = value
    Allocate(buffer, body)                a local buffer that lives during body
    If(cond, then, otherwise)
    Seq(stmts)
    TileZero, TileDot, TileStore           a matrix unit's tiles (Intel AMX): see TileDot

and expressions ``Var``, ``Const``, ``BinOp``, ``Load``, ``Call``, ``Select``,
``Cast`` (a value conversion) and ``BitCast`` (the same bits seen as another
type).  Indices are multi-dimensional (``x[i, j]``); codegen flattens them
row-major.  Index arithmetic is i64; integer ``div``/``mod`` truncate toward
zero as in C.

A ``Program`` is what a whole Graph lowers to: kernels run in order over the
program's buffers (inputs, outputs, constants, temporaries).  Schedules rewrite
the loop nests; nodes are frozen dataclasses so a rewrite builds new trees.

Checking lives beside this file: ``loops_verify.py`` (the verifier) and
``loops_interp.py`` (the reference interpreter).
"""
from __future__ import annotations

import functools
import math
import operator
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Callable, Iterator, Sequence, Union

import numpy as np

from minic.ir.types import DType, Dim, _monomial, derived

# --- buffers --------------------------------------------------------------------


class Role(Enum):
    INPUT = "input"
    OUTPUT = "output"
    CONST = "const"            # a weight, bound once at compile time
    TEMP = "temp"              # an intermediate between kernels, placed by the buffer plan
    LOCAL = "local"            # a kernel's own scratch (an accumulator), from Allocate
    STATUS = "status"          # the program's status word (STATUS below): where data checks report


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[Dim, ...]     # ints or monomials over the size arguments ("B*T")
    dtype: DType
    role: Role

    def __str__(self) -> str:
        return self.name


# The status word of a program (a global of the compiled module, not a parameter):
# [0] = 0, or the code of the data check that failed (Program.checks), [1] = its value.
STATUS = Buffer("minic_status", (2,), DType.i64, Role.STATUS)


def data_error(name: str, checks: dict[int, str], code: int, value: int):
    """The DataError that a status word of ``[code, value]`` (code != 0) of program ``name`` reports."""
    from minic.errors import DataError
    what = checks.get(code, f"data check {code}")
    return DataError(f"{name}: {what.replace('{value}', str(value))}")


# --- expressions ----------------------------------------------------------------


class Expr:
    """Base of every expression; ``dtype`` says what it computes."""
    dtype: DType


@dataclass(frozen=True)
class Var(Expr):
    name: str
    dtype: DType = DType.i64


@dataclass(frozen=True)
class Const(Expr):
    value: Union[int, float, bool]
    dtype: DType = DType.i64


def _trunc_div(a: int, b: int) -> int:
    """Integer division as C and LLVM do it: toward zero (Python's // floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _div(a, b):
    return type(a)(_trunc_div(int(a), int(b))) if isinstance(a, np.integer) else a / b


def _mod(a, b):
    if isinstance(a, np.integer):
        return type(a)(int(a) - _trunc_div(int(a), int(b)) * int(b))
    return np.fmod(a, b)                         # LLVM's frem


# The binary ops, each with what it computes on numpy scalars of its operands' type (the
# interpreter runs these, and constant folding through it).
BINOPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": _div, "mod": _mod,
          "max": np.maximum, "min": np.minimum,      # a NaN propagates: codegen's llvm.maximum, PyTorch
          "shl": operator.lshift, "shr": operator.rshift,  # numpy: logical on unsigned, arithmetic on signed
          "lt": operator.lt, "le": operator.le, "gt": operator.gt,
          "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
          "and": operator.and_, "or": operator.or_, "xor": operator.xor}    # logical on np.bool_
COMPARE_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
LOGIC_OPS = ("and", "or", "xor")          # logical on bools, bitwise on integers


@dataclass(frozen=True)
class BinOp(Expr):
    op: str                    # one of BINOPS
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:
        return DType.bool if self.op in COMPARE_OPS else self.a.dtype


@dataclass(frozen=True)
class Load(Expr):
    buffer: Buffer
    index: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype


# Functions a Call may name, each with what it computes on scalars (the interpreter runs
# these); pow takes two arguments, the rest one.  Codegen maps each to an LLVM intrinsic or
# a libm function.
def power(a, b):
    """``a ** b``; for integers as numpy does (wrapping around), and a negative power is
    1 / a ** -b rounded toward zero: 1 for a base of 1, +-1 for -1, else 0 (ONNX Runtime's
    answer; 0 to a negative power is refused by pow's data check, and gives 0 here)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "iu":
        return np.power(a, b)
    negative = b < 0
    with np.errstate(over="ignore"):
        whole = np.power(a, np.where(negative, 0, b).astype(b.dtype))
    inverse = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 != 0, -1, 1), 0))
    return np.where(negative, inverse, whole).astype(a.dtype)


CALLS = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan, "floor": np.floor, "ceil": np.ceil,
    "round": np.round, "pow": power,    # round: halves to even; pow: integers too
    "erf": lambda x: type(x)(math.erf(float(x))),
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
}


@dataclass(frozen=True)
class Call(Expr):
    fn: str
    args: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:
        return self.args[0].dtype


@dataclass(frozen=True)
class Select(Expr):
    cond: Expr
    a: Expr                    # value where cond holds
    b: Expr

    @property
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True)
class Cast(Expr):
    to: DType
    value: Expr

    @property
    def dtype(self) -> DType:
        return self.to


@dataclass(frozen=True)
class BitCast(Expr):
    """``value``'s bits read as a ``to`` of the same width (numpy's ``x.view(to)``): f32 <-> i32,
    i8 -> u8; a bool is its byte, 0 or 1."""
    to: DType
    value: Expr

    @property
    def dtype(self) -> DType:
        return self.to


def bitcast_value(v, to: DType):
    """A numpy scalar or array ``v`` with its bits read as ``to`` (the interpreters' BitCast)."""
    return np.asarray(v).view(to.numpy)[()]


# --- statements -----------------------------------------------------------------


class Stmt:
    """Base of every statement."""


class ForKind(Enum):
    SERIAL = "serial"
    PARALLEL = "parallel"      # iterations split over threads
    VECTORIZED = "vectorized"  # iterations become the lanes of vector instructions
    UNROLLED = "unrolled"      # iterations copied out


@dataclass(frozen=True)
class For(Stmt):
    var: Var
    start: Expr
    extent: Expr               # the loop runs var = start .. start + extent - 1
    kind: ForKind
    body: Stmt


@dataclass(frozen=True)
class Store(Stmt):
    buffer: Buffer
    index: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True)
class Allocate(Stmt):
    buffer: Buffer             # role LOCAL; its shape must be constant
    body: Stmt


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None


@dataclass(frozen=True)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True)
class TileDot(Stmt):
    """``tile += a · b`` on a matrix unit's tiles (Intel AMX; minic/schedule/tiles.py).  A tile is
    a 2-D block of at most 16 rows of 64 bytes.  Each operand names its element (0, 0) with a
    Load; its row r and column c are then that index with the second-last axis + r and the last
    + c.  ``tile``: a LOCAL buffer's last two axes whole, [rows, cols] (codegen keeps it in a tile
    register); ``a``: [rows, k]; ``b``: [k / g, g * cols] in the layout the instruction reads, the
    g consecutive k of one column side by side (g = 4 bytes make the 32 bits of a lane):

        tile[i, j] += sum_{k} a[i, k] * b[k / g, g * j + k % g]        depth: k's bytes (<= 64)

    The operands' types pick the instruction (``TILE_DOTS``): u8 · i8 (tdpbusd) and i8 · u8
    (tdpbsud) into i32 sums, g = 4; bf16 · bf16 (tdpbf16ps) into f32 sums, g = 2.
    ``ahead`` (bytes, for a and for b; 0: none): where an operand is a panel of weights read once,
    tile after tile in memory order, the rows that far past the tile are prefetched as it is loaded
    (the hardware's prefetchers do not keep up with tile loads from memory); values are unchanged.
    """
    tile: Load
    a: Load
    b: Load
    rows: int
    cols: int
    depth: int
    ahead: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class TileZero(Stmt):
    """``tile[i, j] = 0`` for i < rows, j < cols (a tile as TileDot's)."""
    tile: Load
    rows: int
    cols: int


@dataclass(frozen=True)
class TileStore(Stmt):
    """``out[i, j] = tile[i, j]`` for i < rows, j < cols: a tile written to memory (i32 or f32, as
    the tile; ``out``'s window as TileDot's operands')."""
    out: Load
    tile: Load
    rows: int
    cols: int


TILE_STMTS = (TileDot, TileZero, TileStore)
# (a's dtype, b's dtype) -> (the tile's dtype, Intel AMX's instruction): what a TileDot may multiply.
TILE_DOTS = {(DType.u8, DType.i8): (DType.i32, "tdpbusd"), (DType.i8, DType.u8): (DType.i32, "tdpbsud"),
             (DType.bf16, DType.bf16): (DType.f32, "tdpbf16ps")}


@dataclass(frozen=True)
class Function:
    """One kernel: ``name(params..., sizes...)``."""
    name: str
    params: tuple[Buffer, ...]
    sizes: tuple[str, ...]     # symbolic sizes passed as i64 arguments
    body: Stmt
    origin: str = ""           # the graph nodes it computes, for the printer


@dataclass
class Program:
    """A whole Graph as kernels run in order over program-level buffers."""
    name: str
    inputs: list[Buffer]
    outputs: list[Buffer]
    constants: dict[str, np.ndarray]                 # CONST buffer name -> data
    buffers: dict[str, Buffer]                       # every buffer but LOCALs, by name
    kernels: list[Function]
    sizes: tuple[str, ...]                           # all symbols, bound from input shapes
    lifetimes: dict[str, tuple[int, int]] = field(default_factory=dict)   # TEMP -> first, last kernel
    values: dict[str, str] = field(default_factory=dict)                   # buffer -> graph value name
    checks: dict[int, str] = field(default_factory=dict)                   # status code -> what failed
    derived: tuple[str, ...] = ()        # the derived dims of its values: each must be >= 1 at a call

    def __str__(self) -> str:
        return print_program(self)


# --- building expressions -------------------------------------------------------


def const(value, dtype: DType = DType.i64) -> Const:
    kind = float if dtype.is_float else bool if dtype == DType.bool else int
    return Const(kind(value), dtype)


def dim_expr(d: Dim) -> Expr:
    """A shape dim as an i64 expression: 3 -> 3, "4*B*T" -> 4 * B * T, a derived dim
    "((H - 1)/2 + 1)" -> (H - 1) / 2 + 1 (the runtime has checked it is >= 1, so the
    division's operand is >= 0 and truncation is the floor)."""
    coef, syms = _monomial(d)
    factors = [const(coef)] if coef != 1 or not syms else []
    return fold("mul", factors + [_factor_expr(name) for name in sorted(syms.elements())])


def _factor_expr(name: str) -> Expr:
    form = derived(name)
    if form is None:
        return Var(name)
    terms = [dim_expr(k) if c == 1 else BinOp("mul", const(c), dim_expr(k)) for k, c in form.terms]
    total = fold("add", terms + ([const(form.offset)] if form.offset else []))
    if form.divisor > 1:
        total = BinOp("div", total, const(form.divisor))
    return BinOp("add", total, const(form.plus)) if form.plus else total


def fold(op: str, terms: Sequence[Expr]) -> Expr:
    """``(t0 op t1) op t2 ...``: the terms joined by the binary ``op``, left to right."""
    return functools.reduce(lambda a, b: BinOp(op, a, b), terms)


# --- traversal -------------------------------------------------------------------


# Each kind of expression with operands: the operands, in order, and the expression rebuilt on new ones.
_OPERANDS = {
    BinOp: (lambda e: (e.a, e.b), lambda e, kids: BinOp(e.op, *kids)),
    Load: (lambda e: e.index, lambda e, kids: Load(e.buffer, tuple(kids))),
    Call: (lambda e: e.args, lambda e, kids: Call(e.fn, tuple(kids))),
    Select: (lambda e: (e.cond, e.a, e.b), lambda e, kids: Select(*kids)),
    Cast: (lambda e: (e.value,), lambda e, kids: Cast(e.to, kids[0])),
    BitCast: (lambda e: (e.value,), lambda e, kids: BitCast(e.to, kids[0])),
}
_LEAF = (lambda e: (), lambda e, kids: e)      # Var, Const: no operands (a Reduce's: compute.r_children)


def children(e: Expr) -> tuple[Expr, ...]:
    return _OPERANDS.get(type(e), _LEAF)[0](e)


def rebuild(e: Expr, kids: tuple[Expr, ...]) -> Expr:
    """``e`` with its children replaced by ``kids`` (same order as ``children``)."""
    return _OPERANDS.get(type(e), _LEAF)[1](e, kids)


def map_expr(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Rewrite bottom-up; ``fn`` returns a replacement or None to keep a node."""
    kids = children(e)
    if kids:
        new = tuple(map_expr(k, fn) for k in kids)
        if any(a is not b for a, b in zip(new, kids)):
            e = rebuild(e, new)
    out = fn(e)
    return e if out is None else out


def substitute(e: Expr, env: dict[str, Expr]) -> Expr:
    """Replace variables by expressions."""
    return map_expr(e, lambda x: env.get(x.name) if isinstance(x, Var) else None)


def walk(e: Expr) -> Iterator[Expr]:
    """``e`` and every expression under it, parents before children, left to right."""
    return _preorder(e, children)


def _preorder(root, parts: Callable) -> Iterator:
    """``root`` and every node under it (``parts(node)``: its children), parents first, left to right.
    (A stack, not nested generators: each node costs O(1), not its depth.)"""
    todo = [root]
    while todo:
        x = todo.pop()
        yield x
        todo.extend(reversed(parts(x)))


def free_vars(e: Expr) -> set[str]:
    return {x.name for x in walk(e) if isinstance(x, Var)}


# Each kind of statement: the expressions it holds directly, the statements nested in it, and
# the statement rebuilt on new ones of each (same order).
_PARTS = {
    For: (lambda s: (s.start, s.extent), lambda s: (s.body,),
          lambda s, exprs, stmts: For(s.var, *exprs, s.kind, *stmts)),
    Store: (lambda s: (*s.index, s.value), lambda s: (),
            lambda s, exprs, stmts: Store(s.buffer, exprs[:-1], exprs[-1])),
    Allocate: (lambda s: (), lambda s: (s.body,), lambda s, exprs, stmts: Allocate(s.buffer, *stmts)),
    If: (lambda s: (s.cond,), lambda s: (s.then,) if s.otherwise is None else (s.then, s.otherwise),
         lambda s, exprs, stmts: If(*exprs, *stmts)),
    Seq: (lambda s: (), lambda s: s.stmts, lambda s, exprs, stmts: Seq(stmts)),
    TileDot: (lambda s: (s.tile, s.a, s.b), lambda s: (),
              lambda s, exprs, stmts: replace(s, tile=exprs[0], a=exprs[1], b=exprs[2])),
    TileZero: (lambda s: (s.tile,), lambda s: (), lambda s, exprs, stmts: replace(s, tile=exprs[0])),
    TileStore: (lambda s: (s.out, s.tile), lambda s: (),
                lambda s, exprs, stmts: replace(s, out=exprs[0], tile=exprs[1])),
}
_NO_PARTS = (lambda s: (), lambda s: ())      # not a statement: nothing inside (map_stmt refuses it)


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions a statement holds directly (not those of nested statements)."""
    return _PARTS.get(type(s), _NO_PARTS)[0](s)


def sub_stmts(s: Stmt) -> tuple[Stmt, ...]:
    return _PARTS.get(type(s), _NO_PARTS)[1](s)


def map_stmt(s: Stmt, expr: Callable[[Expr], Expr], stmt: Callable[[Stmt], Stmt]) -> Stmt:
    """The one statement visitor: ``s`` rebuilt with ``expr`` applied to the expressions
    it holds and ``stmt`` to the statements nested in it (one level; recurse in ``stmt``)."""
    if type(s) not in _PARTS:
        raise TypeError(f"not a Loop IR statement: {s!r}")
    exprs, stmts, rebuild_stmt = _PARTS[type(s)]
    return rebuild_stmt(s, tuple(map(expr, exprs(s))), tuple(map(stmt, stmts(s))))


def walk_stmts(s: Stmt) -> Iterator[Stmt]:
    """``s`` and every statement nested in it, outer before inner, in order."""
    return _preorder(s, sub_stmts)


def seq(*stmts: Stmt) -> Stmt:
    """A Seq of the statements, flattening nested Seqs; one statement stays itself."""
    flat = [t for s in stmts for t in (s.stmts if isinstance(s, Seq) else (s,))]
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


# --- printing (pseudo-C) ----------------------------------------------------------

_INFIX = {"add": ("+", 4), "sub": ("-", 4), "mul": ("*", 5), "div": ("/", 5), "mod": ("%", 5),
          "lt": ("<", 3), "le": ("<=", 3), "gt": (">", 3), "ge": (">=", 3), "eq": ("==", 2),
          "ne": ("!=", 2), "and": ("&&", 1), "or": ("||", 0), "xor": ("^", 1), "shl": ("<<", 3.5),
          "shr": (">>", 3.5)}


def _const_str(c: Const) -> str:
    if c.dtype == DType.bool:
        return "true" if c.value else "false"
    if c.dtype.is_float:
        text = repr(float(c.value))
        return text + "f" if c.dtype == DType.f32 and text[-1].isdigit() else text
    return str(c.value)


def expr_str(e: Expr, parent: int = -1) -> str:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Const):
        return _const_str(e)
    if isinstance(e, BinOp) and e.op not in ("max", "min"):
        sym, prec = _INFIX[e.op]
        text = f"{expr_str(e.a, prec)} {sym} {expr_str(e.b, prec + 1)}"
        return f"({text})" if prec < parent else text
    if isinstance(e, Load):                   # a scalar (rank-0) buffer, an accumulator, has no index
        return e.buffer.name + (f"[{', '.join(expr_str(i) for i in e.index)}]" if e.index else "")
    if isinstance(e, (BinOp, Call, Select)):  # max, min, the calls and select print as calls
        name = e.op if isinstance(e, BinOp) else e.fn if isinstance(e, Call) else "select"
        return f"{name}({', '.join(expr_str(k) for k in children(e))})"
    if isinstance(e, Cast):
        return f"({e.to.value}){expr_str(e.value, 9)}"
    if isinstance(e, BitCast):
        return f"bitcast<{e.to.value}>({expr_str(e.value)})"
    raise TypeError(f"not a Loop IR expression: {e!r}")


def _buffer_decl(b: Buffer) -> str:
    return f"{b.dtype.value} {b.name}" + (f"[{', '.join(map(str, b.shape))}]" if b.shape else "")


def stmt_lines(s: Stmt, indent: str = "  ") -> list[str]:
    if isinstance(s, For):
        v = s.var.name
        start = expr_str(s.start)
        end = expr_str(s.extent) if start == "0" else f"{start} + {expr_str(s.extent, 5)}"
        kind = "" if s.kind == ForKind.SERIAL else s.kind.value + " "
        head = f"{indent}{kind}for ({v} = {start}; {v} < {end}; {v}++) {{"
        return [head, *stmt_lines(s.body, indent + "  "), indent + "}"]
    if isinstance(s, Store):
        return [f"{indent}{expr_str(Load(s.buffer, s.index))} = {expr_str(s.value)};"]
    if isinstance(s, Allocate):
        return [f"{indent}{_buffer_decl(s.buffer)};", *stmt_lines(s.body, indent)]
    if isinstance(s, If):
        lines = [f"{indent}if ({expr_str(s.cond)}) {{", *stmt_lines(s.then, indent + "  ")]
        if s.otherwise is not None:
            lines += [f"{indent}}} else {{", *stmt_lines(s.otherwise, indent + "  ")]
        return lines + [indent + "}"]
    if isinstance(s, Seq):
        return [line for t in s.stmts for line in stmt_lines(t, indent)]
    if isinstance(s, TileDot):
        ahead = f", ahead {s.ahead[0]}, {s.ahead[1]}" if any(s.ahead) else ""
        return [f"{indent}tile_dot<{s.rows}x{s.cols}, {s.depth}{ahead}>({expr_str(s.tile)}, {expr_str(s.a)}, "
                f"{expr_str(s.b)});"]
    if isinstance(s, TileZero):
        return [f"{indent}tile_zero<{s.rows}x{s.cols}>({expr_str(s.tile)});"]
    if isinstance(s, TileStore):
        return [f"{indent}tile_store<{s.rows}x{s.cols}>({expr_str(s.out)}, {expr_str(s.tile)});"]
    raise TypeError(f"not a Loop IR statement: {s!r}")


def print_function(f: Function) -> str:
    params = [f"{_buffer_decl(b)} /*{b.role.value}*/" for b in f.params] + [f"i64 {s}" for s in f.sizes]
    head = f"// {f.origin}\n" if f.origin else ""
    return head + f"kernel {f.name}({', '.join(params)}) {{\n" + "\n".join(stmt_lines(f.body)) + "\n}"


def print_program(p: Program) -> str:
    lines = [f"program @{p.name}({', '.join(_buffer_decl(b) for b in p.inputs)})"
             f" -> ({', '.join(_buffer_decl(b) for b in p.outputs)})"]
    temps = [b for b in p.buffers.values() if b.role == Role.TEMP]
    if temps:
        lines.append("// temporaries: " + ", ".join(
            f"{_buffer_decl(b)} live {p.lifetimes[b.name][0]}..{p.lifetimes[b.name][1]}" for b in temps))
    if p.derived:
        lines.append("// derived sizes, checked >= 1 at a call: " + ", ".join(p.derived))
    lines += [print_function(k) for k in p.kernels]
    return "\n\n".join(lines) + "\n"


def structure(k: Function) -> str:
    """``k``'s code with the kernel and its parameters named by position: equal strings,
    equal machine code.  The parameters are renamed in the tree, not in the text: a
    buffer may be named like a function it calls (``ceil = ceil(x)``, ``atan = atan(x)``)."""
    named = {b.name: replace(b, name=f"%p{i}") for i, b in enumerate(k.params)}

    def expr(e: Expr) -> Expr:
        return map_expr(e, lambda x: Load(named[x.buffer.name], x.index)
                        if isinstance(x, Load) and x.buffer.name in named else None)

    def stmt(s: Stmt) -> Stmt:
        s = map_stmt(s, expr, stmt)
        return Store(named[s.buffer.name], s.index, s.value) if isinstance(s, Store) and s.buffer.name in named else s

    return print_function(replace(k, name="kernel", origin="", params=tuple(named.values()), body=stmt(k.body)))