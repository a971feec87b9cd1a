"""The PyTorch frontend: ``torch.export`` → core ATen → minic Graph.

    graph = from_torch(model, (input_ids,), dynamic_axes=({0: "B", 1: "T"},))

Steps, in order:

1. ``torch.export.export`` traces ``forward`` into an FX graph of ATen ops.
   Each named dynamic axis is exported as ``Dim.DYNAMIC``: named ``Dim``\\ s need
   bounds that only the model knows (llama-tiny's T <= max_seq_len), while
   ``Dim.DYNAMIC`` lets torch derive them from the code.  The symbols torch
   picks (``s70``, ``s72``) are then mapped back to the user's names.
2. ``run_decompositions`` lowers it to core ATen, except for the few ops in
   ``KEEP`` that minic has directly (``linear`` is one node, not
   permute + view + addmm + view).
3. Every FX node becomes zero or more minic nodes (see ``torch_ops``).
   Parameters and buffers become constants named by their FQN
   (``layers.0.attention.wq.weight``); shape arithmetic (``sym_size``,
   ``s0*s1``) becomes symbolic dims (``"B*T"``), never nodes.

Numerics: the interpreter matches torch eager within 1e-4 (abs or rel) on the
zoo; the tests check exactly that.
"""
from __future__ import annotations

import linecache
import re
import warnings
from pathlib import Path
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import sympy
import torch
from torch import fx
from torch.utils._sympy.functions import FloorDiv

from minic.errors import UnsupportedError, UserError
from minic.frontend import torch_attention, torch_ops, torch_ops_core, torch_ops_index, torch_ops_window, torch_recurrent
from minic.frontend.torch_arrays import numpy_of, tensor_of  # noqa: F401  (re-exported)
from minic.frontend.torch_ops import Handler, fold
from minic.ir import ops
from minic.ir.build import make_node
from minic.ir.graph import Graph, Node, Value, constant
from minic.ir.types import Dim, DType, TensorType, dim_floordiv, dim_prod, dim_sum
from minic.registry import Registry

aten = torch.ops.aten

# Every family's handlers in one table (an op in two families is refused); ``handles`` adds
# one at run time (an op of your own: docs/09-adding-an-op.md).
HANDLERS = Registry.merged("ATen op", [f.HANDLERS for f in (
    torch_ops, torch_ops_core, torch_ops_index, torch_ops_window, torch_attention, torch_recurrent)], UnsupportedError)
handles = HANDLERS.add


def handler_of(target: Any) -> Handler | None:
    """The handler of an FX node's target: by the overload itself, else by its qualified name
    (``"transformers::grouped_mm_fallback"``) — an op a library defines exists only once that
    library is imported, and minic does not import it to build the table."""
    if target in HANDLERS:
        return HANDLERS[target]
    return HANDLERS.get(target.name()) if isinstance(target, torch._ops.OpOverload) else None

# Composite ops kept whole through run_decompositions: minic has a direct op for each,
# or (scaled_dot_product_attention) a conversion of its own: torch 2.13's decomposition
# of it leaves output strides that its own later view decomposition rejects (GPT-2
# with dynamic B and T: "Cannot view a tensor with shape [s77, s27, 32] and strides
# (32, 32*s77, 1)"), and whole, its mask and GQA arguments read plainly.
KEEP = (aten.linear.default, aten.matmul.default, aten.silu.default,
        aten.adaptive_avg_pool2d.default, aten.max_pool2d.default, aten.scaled_dot_product_attention.default,
        aten.col2im.default,        # fold: one scatter-add, not index_put plus a cropping pad
        aten.multilabel_margin_loss_forward.default)      # torch 2.13's decomposition is wrong for a batch

_DTYPES = {torch.float64: DType.f64, torch.float32: DType.f32, torch.float16: DType.f16,
           torch.bfloat16: DType.bf16, torch.int64: DType.i64, torch.int32: DType.i32, torch.int16: DType.i16,
           torch.int8: DType.i8, torch.uint8: DType.u8, torch.bool: DType.bool}
TORCH_DTYPES = {d: t for t, d in _DTYPES.items()}


def from_torch(module: torch.nn.Module, example_inputs: tuple,
               dynamic_axes: tuple[dict[int, str], ...] | None = None,
               name: str | None = None) -> Graph:
    """Export ``module`` (put in eval mode: this is inference) at ``example_inputs``
    and convert it to a minic Graph named ``name`` (default: the class name, lower case).

    ``dynamic_axes`` has one ``{axis: symbol}`` dict per input; axes that share
    a name share a symbol.  Without it every shape is static.  The ranges torch
    derives (T <= 64) are not kept: running past them fails in the interpreter.
    """
    example_inputs = tuple(example_inputs)
    program = _export(module, example_inputs, dynamic_axes)
    graph_name = name or type(module).__name__.lower()
    graph = Converter(program, graph_name, dynamic_axes).run()
    _release_trace()
    return graph


def _release_trace() -> None:
    """Let go of what torch.export keeps of the last trace once it is converted (memory
    a compile would otherwise hold to its end): torch 2.13's proxy tensor tracer keeps
    every node of the last trace in a module-level map until the next trace (and with
    them the FX graph, its fake tensors and the shape environment), and the nodes' stack
    traces read every frame's source file into ``linecache``."""
    from torch.fx.experimental import proxy_tensor
    getattr(proxy_tensor, "_FAKE_TENSOR_ID_TO_PROXY_MAP_FOR_EXPORT", {}).clear()
    linecache.clearcache()


def _export(module: torch.nn.Module, inputs: tuple, dynamic_axes) -> torch.export.ExportedProgram:
    dynamic_shapes = None
    if dynamic_axes is not None:
        if len(dynamic_axes) != len(inputs):
            raise UserError(f"dynamic_axes has {len(dynamic_axes)} entries for {len(inputs)} inputs")
        dynamic_shapes = tuple({axis: torch.export.Dim.DYNAMIC for axis in axes} for axes in dynamic_axes)
        inputs = tuple(_at_least_two(x, axes) for x, axes in zip(inputs, dynamic_axes))
    table = torch.export.default_decompositions()
    for op in KEEP:
        table.pop(op, None)
    with warnings.catch_warnings(), torch_recurrent.keep_recurrent():
        # torch 2.13 warns about its own pytree internals (LeafSpec); not the user's concern.
        warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
        try:
            program = torch.export.export(module.eval(), inputs, dynamic_shapes=dynamic_shapes)
        except Exception as e:
            # Non-strict export runs forward in Python on fake tensors, so a data-dependent
            # branch (.item(), int(t), a check on values) fails there; strict export traces
            # it with TorchDynamo, which can guard on it or graph-break into a trace of its own.
            try:
                program = torch.export.export(module.eval(), inputs, dynamic_shapes=dynamic_shapes, strict=True)
            except Exception:
                raise UnsupportedError(f"torch.export failed for {type(module).__name__} "
                                       f"(non-strict, then strict): {_first_line(e)}") from e
        try:
            return program.run_decompositions(table)
        except Exception as e:
            raise UnsupportedError(f"torch's run_decompositions failed for {type(module).__name__}: "
                                   f"{_first_line(e)}") from e


def _first_line(e: Exception) -> str:
    """torch's messages run to many lines; the first says what went wrong."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def _at_least_two(x: Any, axes: dict[int, str]) -> Any:
    """torch.export specialises axes of size 0 or 1 to constants, so an example
    of size 1 on a dynamic axis is traced repeated to size 2 (values do not matter)."""
    if not isinstance(x, torch.Tensor):
        return x
    for axis in axes:
        if x.shape[axis] == 0:
            raise UserError(f"dynamic axis {axis} of an example input has size 0")
        if x.shape[axis] == 1:
            x = torch.cat([x, x], dim=axis)
    return x


_TORCH_DIR = str(Path(torch.__file__).parent)


def source_of(node: fx.Node) -> str:
    """``file:line (code)`` of the user's line that produced ``node``: the innermost
    frame outside torch itself (``F.linear`` inside ``nn.Linear`` is not the user's)."""
    trace = node.meta.get("stack_trace") or ""
    # A frame's code line is missing when its source is not a file (code run with exec).
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*(?:\n(?![ \t]*File ")[ \t]*([^\n]*))?', trace)
    if not frames:
        return "<unknown source>"
    user = [f for f in frames if not f[0].startswith(_TORCH_DIR)]
    path, line, code = (user or frames)[-1]
    return f"{path}:{line}" + (f" ({code.strip()})" if code.strip() else "")


def scope_of(node: fx.Node) -> str:
    """The dotted path of the innermost module ``node`` runs in ("layers.0.attention.wq"; "" for the top)."""
    stack = node.meta.get("nn_module_stack") or {}
    return list(stack.values())[-1][0] if stack else ""


def op_name(node: fx.Node) -> str:
    return str(node.target) if isinstance(node.target, torch._ops.OpOverload) else getattr(
        node.target, "__name__", str(node.target))


@dataclass
class Converter:
    """Walks the exported FX graph once, building the minic Graph as it goes."""
    program: torch.export.ExportedProgram
    name: str
    dynamic_axes: tuple[dict[int, str], ...] | None
    values: dict[fx.Node, Any] = field(default_factory=dict)       # a Value, or a tuple for multi-output ops
    symbols: dict[sympy.Symbol, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    constants: list[Value] = field(default_factory=list)
    by_fqn: dict[str, Value] = field(default_factory=dict)          # one constant per parameter
    taken: set[str] = field(default_factory=set)
    current: fx.Node | None = None

    # --- the walk -------------------------------------------------------------

    def run(self) -> Graph:
        sig = self.program.graph_signature
        lifted = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                  **sig.inputs_to_lifted_tensor_constants}
        inputs: list[Value] = []
        for node in self.program.graph.nodes:
            self.current = node
            if node.op == "placeholder":
                if node.name in lifted:
                    self.values[node] = self._lifted(lifted[node.name])
                else:
                    inputs.append(self._input(node, len(inputs)))
            elif node.op == "call_function":
                self._call(node)
            elif node.op == "output":
                outputs = [self._output(a, i) for i, a in enumerate(node.args[0])]
        used = {id(v) for n in self.nodes for v in n.inputs} | {id(v) for v in outputs}
        consts = [c for c in self.constants if id(c) in used]
        return Graph(self.name, inputs, outputs, self.nodes, consts)

    def _call(self, node: fx.Node) -> None:
        val = node.meta.get("val")
        if (isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool, int, float, bool))
                and node.target != aten._local_scalar_dense.default) or (val is None and node.target in _ASSERTS):
            return                      # shape arithmetic and guards: sizes are read from meta on use
        convert = handler_of(node.target) or (fold if _is_static(node) else None)
        if convert is None:
            raise UnsupportedError(f"unsupported ATen op {op_name(node)} at {source_of(node)}")
        try:
            result = convert(self, node, _bind(node))
            if isinstance(result, Value) and isinstance(val, torch.Tensor):
                self._learn_sizes(result, val)
                self._check_type(result, val)
        except UserError as e:
            raise UnsupportedError(f"{op_name(node)} at {source_of(node)}: {e}") from None
        self.values[node] = result

    def _output(self, arg: Any, index: int) -> Value:
        """A tensor output as itself; a Python number the model returns (a constant, or a size
        torch traced as a number) as a 0-d array of numpy's dtype for it."""
        if isinstance(arg, fx.Node) and isinstance(self.values.get(arg), Value):
            return self.values[arg]
        number = arg.meta.get("val") if isinstance(arg, fx.Node) else arg
        if isinstance(number, torch.SymInt):
            number = self.dim(number)
        if isinstance(number, (bool, int, float)) and not isinstance(number, np.ndarray):
            return self.add_constant(f"output_{index}", np.asarray(number))
        raise UserError(f"output {index} of the model is {number!r}, not a tensor or a static number; "
                        "minic graphs return tensors (numbers as 0-d arrays)")

    def _learn_sizes(self, value: Value, val: torch.Tensor) -> None:
        """A size the data decides (nonzero's count) is a fresh symbol to torch (``u0``, unbacked) and
        to minic (``fresh_symbol``): where the converted value has one, torch's is the same size."""
        for d, size in zip(value.type.shape, val.shape):
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if isinstance(d, str) and isinstance(expr, sympy.Symbol) and expr not in self.symbols:
                self.symbols[expr] = d

    def _check_type(self, value: Value, val: torch.Tensor) -> None:
        """The converted value must have the type torch traced: this catches table bugs early."""
        want = TensorType(self.shape(val.shape), self.dtype(val.dtype))
        if value.type != want:
            raise UserError(f"converted to {value.type}, but torch traced {want}")

    # --- graph inputs and constants ------------------------------------------

    def _input(self, node: fx.Node, index: int) -> Value:
        val = node.meta["val"]
        if not isinstance(val, torch.Tensor):
            raise UserError(f"input '{node.name}' is {val!r}, not a tensor; minic graphs take tensors only")
        axes = self.dynamic_axes[index] if self.dynamic_axes else {}
        for axis, sym_name in axes.items():
            size = val.shape[axis]
            expr = size.node.expr if isinstance(size, torch.SymInt) else None
            if not isinstance(expr, sympy.Symbol):
                raise UserError(f"input '{node.name}' axis {axis} ('{sym_name}') was traced as {size}, not a free size")
            known = self.symbols.setdefault(expr, sym_name)
            if known != sym_name:
                raise UserError(f"input '{node.name}' axis {axis}: '{sym_name}' and '{known}' are the same size "
                                f"in the traced program; give them one name")
        value = Value(self.fresh(node.name), TensorType(self.shape(val.shape), self.dtype(val.dtype)))
        self.values[node] = value
        return value

    def _lifted(self, fqn: str) -> Value:
        """The constant for a parameter, buffer or lifted tensor constant (one per FQN)."""
        if fqn not in self.by_fqn:
            tensor = self.program.state_dict.get(fqn)
            if tensor is None:
                tensor = self.program.constants[fqn]
            self.by_fqn[fqn] = self.add_constant(fqn, tensor)
        return self.by_fqn[fqn]

    def add_constant(self, name: str, data: torch.Tensor | np.ndarray) -> Value:
        if isinstance(data, torch.Tensor):
            self.dtype(data.dtype)                          # raises for dtypes minic lacks
            # A read-only view of the module's tensor, not a copy: a compile would otherwise
            # hold every weight twice more (torch's, the Graph's).  The compiled model copies
            # the views it keeps (``CompiledModel`` owns its constants).
            data = np.asarray(numpy_of(data), order="C")          # (ascontiguousarray makes a 0-d array 1-d)
            data.flags.writeable = False
        value = constant(self.fresh(name), np.asarray(data))
        self.constants.append(value)
        return value

    def scalar(self, x: float | int | bool, dtype: DType, name: str) -> Value:
        """A 0-d constant holding a Python scalar argument, in ``dtype``."""
        return self.add_constant(name, np.array(x, dtype=dtype.numpy))

    # --- reading FX arguments -------------------------------------------------

    def value(self, arg: Any) -> Value:
        if not isinstance(arg, fx.Node) or arg not in self.values:
            raise UserError(f"expected a tensor argument, got {arg!r}")
        v = self.values[arg]
        if not isinstance(v, Value):
            raise UserError(f"'{arg.name}' is a tuple of outputs, not a tensor")
        return v

    def dim(self, arg: Any) -> Dim:
        """A size argument: an int, a SymInt, or an FX node computing one."""
        if isinstance(arg, fx.Node):
            arg = arg.meta["val"]
        if isinstance(arg, torch.SymInt):
            return self.sym_dim(arg.node.expr)
        return int(arg)

    def shape(self, sizes: Sequence[Any]) -> tuple[Dim, ...]:
        return tuple(self.dim(s) for s in sizes)

    def sym_dim(self, expr: sympy.Expr) -> Dim:
        """A sympy size expression as a minic dim: ``2*s0*s1`` -> ``"2*B*T"``, a strided
        convolution's ``(s1//5) - 1`` -> the derived dim ``((T - 5)/5)`` (sums, integer
        multiples and floor division by a constant; see minic/ir/types.py)."""
        if expr.is_Integer:
            return int(expr)
        if isinstance(expr, sympy.Symbol) and expr in self.symbols:
            return self.symbols[expr]
        if isinstance(expr, sympy.Pow) and expr.args[1].is_Integer and expr.args[1] > 0:
            return dim_prod([self.sym_dim(expr.args[0])] * int(expr.args[1]))
        if isinstance(expr, sympy.Add):
            return dim_sum((self.sym_dim(a), 1) for a in expr.args)
        if isinstance(expr, sympy.Mul):
            coef = int(sympy.Mul(*[a for a in expr.args if a.is_Integer]))
            rest = [self.sym_dim(a) for a in expr.args if not a.is_Integer]
            return dim_sum([(rest[0], coef)]) if len(rest) == 1 else dim_prod([coef, *rest])
        if isinstance(expr, FloorDiv) and expr.args[1].is_Integer and expr.args[1] > 0:
            return dim_floordiv(self.sym_dim(expr.args[0]), 0, int(expr.args[1]))
        raise UserError(f"size {expr} is not a sum, multiple or floor division of named dynamic axes "
                        f"({', '.join(f'{k}={v}' for k, v in self.symbols.items()) or 'none named'})")

    def dtype(self, dtype: torch.dtype) -> DType:
        if dtype not in _DTYPES:
            raise UserError(f"dtype {dtype} is not supported (minic has {', '.join(d.value for d in DType)})")
        return _DTYPES[dtype]

    # --- emitting minic nodes -------------------------------------------------

    def fresh_symbol(self, hint: str) -> str:
        """A dim symbol for a size only the data decides (nonzero's count)."""
        return self.fresh(f"{self.current.name}_{hint}")

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self.taken:
            name, i = f"{base}_{i}", i + 1
        self.taken.add(name)
        return name

    def emit(self, op: str, inputs: list[Value], attrs: Any = None, name: str | None = None,
             many: bool = False) -> Any:
        """Append one minic node (``make_node``), with the FX node's source line and module scope.
        The last node emitted for an FX node carries that node's name.  Returns
        the output Value, or the tuple of outputs when ``many``."""
        base = name or self.current.name
        node = make_node(op, inputs, attrs, names=lambda i: self.fresh(base if not many else f"{base}_{i}"),
                         source=source_of(self.current), scope=scope_of(self.current))
        self.nodes.append(node)
        return tuple(node.outputs) if many else node.outputs[0]

    def attrs(self, op: str, **values: Any) -> Any:
        return ops.get(op).make_attrs(**values)

    # --- the builder face the shared decompositions use (minic.frontend.compose) --

    @property
    def where(self) -> str:
        return self.current.name

    def one(self, op: str, *inputs: Value, **attrs: Any) -> Value:
        return self.emit(op, list(inputs), attrs)

    def many(self, op: str, *inputs: Value, **attrs: Any) -> list[Value]:
        return list(self.emit(op, list(inputs), attrs, many=True))

    def const(self, data: Any, like: Value | None = None) -> Value:
        """A new constant; with ``like``, of that value's dtype."""
        array = np.asarray(data, dtype=like.type.dtype.numpy if like is not None else None)
        return self.add_constant(f"{self.current.name}_c", array)

    def cast(self, v: Value, dtype: DType) -> Value:
        if v.type.dtype == dtype:
            return v
        return self.emit("cast", [v], self.attrs("cast", dtype=dtype), name=f"{self.current.name}_{v.name}_cast")


_ASSERTS = {aten._assert_scalar.default, aten._assert_tensor_metadata.default,
            aten.sym_constrain_range_for_size.default}


def _bind(node: fx.Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    bound: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            bound[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            bound[arg.name] = node.kwargs[arg.name]
        else:
            bound[arg.name] = arg.default_value if arg.has_default_value() else None
    return bound


def _is_static(node: fx.Node) -> bool:
    """No inputs at all (no tensors, no symbolic sizes) and not random: full, arange, scalar_tensor, ..."""
    return (not node.all_input_nodes and isinstance(node.target, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded not in node.target.tags)
