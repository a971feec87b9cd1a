"""``minic.compile``: turn any model a user has into a callable on numpy arrays.

A model may be a torch.nn.Module (with example inputs), a zoo name
("llama-tiny"), a path to an ``.onnx`` file or to ``.mc`` text IR, a Python
file's model (``path/to/file.py:Name``, minic/frontend/pyfile.py), or a Graph.
Example inputs are a sequence in the model's input order, or a mapping by input
name (``minic.inputs``).
``load`` turns each into a ``ModelSource``; a backend turns that into a callable.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import numpy as np

from minic import backends
from minic.backends import ModelSource, Runner, graph_of
from minic.errors import DataError, UserError
from minic.frontend.pyfile import forward_names, is_python_spec, load_python_model
from minic.inputs import bind
from minic.ir.graph import Graph

DEFAULT_BACKEND = "minic"


def load(model: Any, example_inputs: Sequence[Any] | None = None, *, size: str = "full",
         seed: int = 0) -> ModelSource:
    """Describe ``model`` as a ModelSource (inputs become numpy arrays)."""
    if isinstance(model, ModelSource):
        return model
    if isinstance(model, Graph):
        names = tuple(v.name for v in model.inputs)
        return ModelSource(model.name, _arrays(bind(example_inputs, names, len(names))) if example_inputs
                           else _random_inputs(model, seed), graph=model, input_names=names)
    if is_python_spec(model):
        return _load_python(str(model), example_inputs)
    if isinstance(model, (str, Path)):
        path = Path(model)
        if path.suffix == ".onnx":
            return _load_onnx(path, example_inputs, seed)
        if path.suffix == ".mc":
            return load(_read_text_ir(path), example_inputs, seed=seed)
        if path.suffix:
            raise UserError(f"{path}: unknown model file type '{path.suffix}' (expected .onnx, .mc or .py:Name)")
        return _load_zoo(str(model), example_inputs, size, seed)
    import torch
    if isinstance(model, torch.nn.Module):
        if example_inputs is None:
            raise UserError("a torch.nn.Module needs example_inputs")
        names = forward_names(model)
        return ModelSource(type(model).__name__, _arrays(bind(example_inputs, names, None)), module=model.eval(),
                           input_names=names)
    raise UserError(f"cannot compile a {type(model).__name__}: expected a torch.nn.Module, a zoo name, "
                    "an .onnx or .mc path, a file.py:Name, or a Graph")


def _load_python(spec: str, example_inputs) -> ModelSource:
    """A model from a Python file; PyTorch eager is then the reference (it has a module)."""
    found = load_python_model(spec)
    if example_inputs is not None:
        inputs = bind(example_inputs, found.input_names,
                      len(found.example_inputs) if found.example_inputs is not None else None)
    elif found.example_inputs is not None:
        inputs = found.example_inputs
    else:
        raise UserError(f"{spec}: no example inputs; give --inputs FILE.npz or --shape D,D,... "
                        "(or let a factory function return (module, example_inputs))")
    names = found.input_names if len(found.input_names) == len(inputs) else ()
    return ModelSource(found.name, _arrays(inputs), module=found.module, input_names=names,
                       extra={"file": spec})


def _read_text_ir(path: Path) -> Graph:
    from minic.ir.text import parse_graph
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read text IR ({e})") from None
    return parse_graph(text, path)


def _arrays(inputs: Sequence[Any]) -> tuple[np.ndarray, ...]:
    if any(hasattr(x, "detach") for x in inputs):
        from minic.frontend.torch_arrays import numpy_of
        inputs = [numpy_of(x) if hasattr(x, "detach") else x for x in inputs]
    return tuple(np.asarray(x, order="C") for x in inputs)


def _load_zoo(name: str, example_inputs, size: str, seed: int) -> ModelSource:
    from minic import models
    info = models.info(name)
    module, inputs = models.get(name, size=size, seed=seed)
    given = bind(example_inputs, info.input_names, len(inputs)) if example_inputs is not None else inputs
    return ModelSource(name, _arrays(given),
                       module=module, dynamic_axes=info.dynamic_axes, input_names=info.input_names,
                       extra={"size": size, "seed": seed})


def _load_onnx(path: Path, example_inputs, seed: int) -> ModelSource:
    from minic.errors import UnsupportedError
    from minic.frontend.onnx import NeedsConstantError, UnknownOpError, from_onnx_file
    from minic.runtime import specialize
    try:
        graph, symbolic = from_onnx_file(path), None
    except UserError as e:
        # An import that needs input values (a shape read from an input) specializes on them too.
        by_value = isinstance(e, NeedsConstantError) and bool(e.inputs)
        symbolic = None if isinstance(e, UnknownOpError) else specialize.onnx_inputs(path, static_too=by_value)
        if symbolic is None:
            if not isinstance(e, UnsupportedError):
                raise
            # A valid file that minic cannot state (an op it lacks): the engines that read ONNX
            # files themselves may still run it; minic's own paths raise this refusal again
            # (graph_of), and ONNX Runtime is the reference (backends.reference_name).
            inputs = _arrays(example_inputs) if example_inputs is not None else _onnx_random_inputs(path, seed)
            return ModelSource(path.stem, inputs, onnx_path=path, extra={"minic_refused": str(e)})
        # an op needs a static size of a symbolic dim, or an input's value (see runtime/specialize.py)
        graph = Graph(path.stem, symbolic, [])            # its inputs only, to draw example inputs from
    source = load(graph, example_inputs, seed=seed)
    if symbolic is not None:                              # graph_of imports it at the example inputs' sizes
        source.graph, source.extra["symbolic inputs"] = None, symbolic
    source.onnx_path = path
    source.name = path.stem
    return source


def _onnx_random_inputs(path: Path, seed: int, dim: int = 2) -> tuple[np.ndarray, ...]:
    """Inputs for an ONNX file minic does not import, from its declared input types
    (symbolic dims set to ``dim``, as ``_random_inputs`` does)."""
    import onnx
    from minic.frontend.onnx import graph_input_names
    model = onnx.load(str(path), load_external_data=False)
    declared = {i.name: i.type.tensor_type for i in model.graph.input}
    rng = np.random.default_rng(seed)
    out = []
    for name in graph_input_names(model):
        t = declared[name]
        try:
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
        except (KeyError, TypeError, ValueError):
            raise UserError(f"{path}: input '{name}' has no tensor type minic can draw; "
                            "give example inputs") from None
        shape = tuple(d.dim_value if d.HasField("dim_value") else dim for d in t.shape.dim)
        if dtype.kind == "f":
            out.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 2, shape).astype(dtype))
    return tuple(out)


def _random_inputs(graph: Graph, seed: int, dim: int = 2) -> tuple[np.ndarray, ...]:
    """Inputs for a graph that came without any: symbolic dims set to ``dim``."""
    from minic.limits import array_bytes, ensure_fits
    rng = np.random.default_rng(seed)
    out = []
    for v in graph.inputs:
        shape = tuple(d if isinstance(d, int) else dim for d in v.type.shape)
        # the draw is made in f64, then cast: both arrays exist for a moment
        ensure_fits(array_bytes(shape, 8 + v.type.dtype.numpy.itemsize),
                    f"a random example input for '{v.name}' ({v.type.dtype.value}{list(shape)}, with its f64 draw)")
        if v.type.dtype.is_float:
            out.append(rng.standard_normal(shape).astype(v.type.dtype.numpy))
        elif v.type.dtype.value == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 2, shape).astype(v.type.dtype.numpy))
    return tuple(out)


def compile(model: Any, example_inputs: Sequence[Any] | None = None, backend: str = DEFAULT_BACKEND,
            **options: Any) -> Runner:
    """Compile ``model`` with ``backend``; the result maps numpy inputs to numpy outputs.

    ``size`` and ``seed`` pick the zoo variant and its example inputs; every other
    option goes to the backend (``dynamic``, to minic and interp: which symbolic dims
    stay symbolic, see minic/runtime/specialize.py).
    """
    source = load(model, example_inputs, size=options.pop("size", "full"), seed=options.pop("seed", 0))
    return backends.get(backend)(source, **options)


# --- the two backends that need nothing but minic and torch ------------------------

@backends.register("torch")
def _torch_backend(source: ModelSource, **options: Any) -> Runner:
    """PyTorch eager: the reference every other path is checked against."""
    import torch
    from minic.frontend.torch_arrays import numpy_of, tensor_of
    if source.module is None:
        raise UserError(f"backend 'torch' needs a torch model; '{source.name}' is not one")
    module = source.module.eval()

    def run(*arrays: np.ndarray):
        try:
            with torch.no_grad():
                out = module(*(tensor_of(a) for a in arrays))
        except IndexError as e:              # torch's "index out of range in self": a bad token id ...
            raise DataError(f"PyTorch ({source.name}): {e}") from None
        if isinstance(out, (tuple, list)):
            return tuple(numpy_of(o) for o in out)
        return numpy_of(out)
    return run


@backends.register("inductor")
def _inductor_backend(source: ModelSource, **options: Any) -> Runner:
    """``torch.compile`` (TorchInductor's C++/OpenMP kernels) of the torch module; it
    compiles on the first call, which is made here (compile time, not run time).
    Its threads are torch's (``torch.set_num_threads``).  ``autocast="bf16"`` runs it
    under ``torch.autocast("cpu", torch.bfloat16)`` (matmuls and convs in bf16, the
    results handed back as f32), how a PyTorch user asks for bf16."""
    import torch
    if source.module is None:
        raise UserError(f"backend 'inductor' needs a torch model; '{source.name}' is not one")
    autocast = options.pop("autocast", None)
    if options:
        raise UserError(f"backend 'inductor' has no option '{sorted(options)[0]}' (options: autocast)")
    if autocast not in (None, "bf16"):
        raise UserError(f"backend 'inductor': autocast must be 'bf16', not {autocast!r}")
    compiled = torch.compile(source.module.eval())

    def f32(o):
        return (o.float() if o.dtype == torch.bfloat16 else o).numpy()

    def run(*arrays: np.ndarray):
        with torch.no_grad(), torch.autocast("cpu", torch.bfloat16, enabled=autocast == "bf16"):
            out = compiled(*(torch.from_numpy(np.asarray(a, order="C")) for a in arrays))
        return tuple(f32(o) for o in out) if isinstance(out, (tuple, list)) else f32(out)
    run(*source.example_inputs)
    return run


@backends.register("interp")
def _interp_backend(source: ModelSource, precision: str = "f32", dynamic: Any = None, **options: Any) -> Runner:
    """minic's reference interpreter: each op's numpy implementation, node by node.
    ``precision="f16"`` (``"bf16"``) runs the graph after the to-f16 (to-bf16) pass: f16 (bf16) storage,
    see docs/f16.md; ``"int8"`` the graph minic's post-training quantization made, its QDQ pairs
    computed as written (fake quantization: what the integer kernels must reproduce)."""
    from minic.ir.interpret import interpret
    from minic.ir.verify import verify
    from minic.runtime import specialize
    if precision not in ("f32", "f16", "bf16", "int8"):
        raise UserError(f"interp: precision must be f32, f16, bf16 or int8 (how it accumulates is not its "
                        f"choice), got '{precision}'")
    source, precision = backends.at_precision(source, precision)

    def build(graph: Graph) -> Runner:
        graph = verify(graph)
        if precision != "f32":
            from minic.lowering.precision import MODES
            from minic.passes.to_f16 import store_as
            graph = verify(store_as(graph, MODES[precision][0]))

        def run(*arrays: np.ndarray):
            outs = interpret(graph, arrays)
            return outs[0] if len(outs) == 1 else tuple(outs)
        return run
    return specialize.compile(source, build, dynamic)
