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
from minic.api import compile, load
from minic.errors import DataError, MinicError, UnsupportedError, UserError
from minic.runtime.saved import load_compiled, save

__all__ = ["compile", "load", "save", "load_compiled", "DataError", "MinicError", "UserError", "UnsupportedError"]
