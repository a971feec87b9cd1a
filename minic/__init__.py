"""minic: a small ML compiler written to be read.

    import minic
    run = minic.compile("llama-tiny")            # zoo name, nn.Module, .onnx, .mc or Graph
    logits = run(*inputs)                        # numpy in, numpy out
    minic.save(run, "out/llama")                 # a shared library + manifest (minic backend)
    again = minic.load_compiled("out/llama")     # runs with ctypes + numpy: no torch, no LLVM

Pipeline (and reading order): ir → frontend → passes → lowering → schedule →
codegen → runtime; the stages are named once in ``minic/pipeline.py``.
docs/README.md is the walkthrough, one chapter per stage.
"""
from minic.errors import DataError, MinicError, UnsupportedError, UserError

__version__ = "0.1.0"           # pyproject.toml reads it from here; a saved model records it

__all__ = ["compile", "load", "save", "load_compiled", "DataError", "MinicError", "UserError", "UnsupportedError"]

# Imported on first use, so that a process that only runs a saved model loads no more than it needs.
_LAZY = {"compile": "minic.api", "load": "minic.api", "save": "minic.runtime.saved",
         "load_compiled": "minic.runtime.saved"}


def __getattr__(name: str):
    from importlib import import_module
    from importlib.util import find_spec
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    if not name.startswith("_") and find_spec(f"minic.{name}") is not None:
        return import_module(f"minic.{name}")      # minic.api, minic.ir, ...: a submodule, as before
    raise AttributeError(f"module 'minic' has no attribute '{name}'")
