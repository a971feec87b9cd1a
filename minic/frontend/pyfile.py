"""Models from the user's own Python files: ``path/to/file.py:Name``.

``Name`` is one of
- an ``nn.Module`` subclass that constructs with no arguments,
- an ``nn.Module`` instance,
- a function of no arguments returning a module, or ``(module, example_inputs)``
  (a tensor, or a tuple/list of tensors or arrays).

The file is imported as a fresh module (its folder on ``sys.path`` while it
runs, so it may import its neighbours); every way this can go wrong is a
one-line ``UserError`` naming the file and the name.
"""
from __future__ import annotations

import importlib.util
import inspect
import itertools
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minic.errors import UserError

_SPEC = re.compile(r"^(?P<path>.+\.py)(?::(?P<name>[A-Za-z_][\w.]*))?$")
_counter = itertools.count()


@dataclass
class PythonModel:
    name: str                               # the attribute's name: the model's name in minic
    module: Any                             # torch.nn.Module, in eval mode
    example_inputs: tuple | None            # from a factory, else None
    input_names: tuple[str, ...]            # forward's positional parameters


def is_python_spec(model: object) -> bool:
    """Whether ``model`` names a Python file (``file.py`` or ``file.py:Name``)."""
    return isinstance(model, (str, Path)) and _SPEC.match(str(model)) is not None


def load_python_model(spec: str | Path) -> PythonModel:
    """Import ``file.py`` and build the model ``Name`` names (see the module docstring)."""
    import torch
    m = _SPEC.match(str(spec))
    if m is None:
        raise UserError(f"{spec}: not a Python model (expected path/to/file.py:Name)")
    path, name = Path(m["path"]), m["name"]
    if not path.is_file():
        raise UserError(f"{path}: no such Python file")
    if name is None:
        raise UserError(f"{spec}: name the model in the file: {path}:Name (a module class or a factory function)")
    namespace = _import(path)
    obj: Any = namespace
    for part in name.split("."):
        if not hasattr(obj, part):
            found = sorted(k for k, v in vars(namespace).items() if _is_candidate(v, torch) and not k.startswith("_"))
            raise UserError(f"{path}: has no attribute '{name}'"
                            + (f" (models found there: {', '.join(found)})" if found else ""))
        obj = getattr(obj, part)
    inputs = None
    if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
        module = _call(obj, path, name, "constructing it")
    elif isinstance(obj, torch.nn.Module):
        module = obj
    elif callable(obj) and not isinstance(obj, type):
        result = _call(obj, path, name, "calling it")
        if isinstance(result, torch.nn.Module):
            module = result
        elif isinstance(result, (tuple, list)) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
            module, inputs = result
            inputs = _as_inputs(inputs, path, name)
        else:
            raise UserError(f"{path}:{name} returned a {type(result).__name__}; expected an nn.Module or "
                            "(module, example_inputs)")
    else:
        raise UserError(f"{path}:{name} is a {type(obj).__name__}; expected an nn.Module class, instance or a "
                        "factory function")
    return PythonModel(name.rsplit(".", 1)[-1], module.eval(), inputs, forward_names(module))


def forward_names(module) -> tuple[str, ...]:
    """The names of ``module.forward``'s positional parameters (no ``*args``)."""
    try:
        params = inspect.signature(module.forward).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in params
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


def _is_candidate(v, torch) -> bool:
    return (isinstance(v, type) and issubclass(v, torch.nn.Module) and v.__module__.startswith("minic_user_")) \
        or (inspect.isfunction(v) and v.__module__.startswith("minic_user_"))


def _import(path: Path):
    """Run the file as a new module (a unique name: two files called model.py do not collide)."""
    module_name = f"minic_user_{next(_counter)}_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)
    sys.modules[module_name] = module          # dataclasses and pickling look their module up here
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        sys.modules.pop(module_name, None)
        raise UserError(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 - whatever the user's file raises, said in one line
        sys.modules.pop(module_name, None)
        raise UserError(f"{path}: importing it raised {_one_line(e)}") from None
    finally:
        if folder in sys.path:
            sys.path.remove(folder)
    return module


def _call(fn, path: Path, name: str, doing: str):
    try:
        return fn()
    except TypeError as e:
        if "argument" in str(e):
            raise UserError(f"{path}:{name} needs arguments ({e}); minic builds it with none: "
                            "write a factory function that does") from None
        raise UserError(f"{path}:{name}: {doing} raised {_one_line(e)}") from None
    except Exception as e:  # noqa: BLE001
        raise UserError(f"{path}:{name}: {doing} raised {_one_line(e)}") from None


def _as_inputs(inputs, path: Path, name: str) -> tuple:
    import numpy as np
    import torch
    if isinstance(inputs, (torch.Tensor, np.ndarray)):
        inputs = (inputs,)
    if not isinstance(inputs, (tuple, list)) or not all(isinstance(x, (torch.Tensor, np.ndarray)) for x in inputs):
        raise UserError(f"{path}:{name}: the example inputs must be a tensor or a tuple of tensors, "
                        f"not {type(inputs).__name__}")
    return tuple(inputs)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
