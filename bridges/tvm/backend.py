"""Backend ``tvm`` for ``minic.compile``: the whole lab as one function.

    run = minic.compile("mlp", backend="tvm")                    # untuned
    run = minic.compile("mlp", backend="tvm", tuned=True)        # tune, then build
    run = minic.compile("mlp", backend="tvm", records="tuning/mlp")  # reuse a database

import (torch.export or ONNX) → Relax passes → [MetaSchedule tuning] → build →
Relax VM.  Shapes are static in this bridge: the callable compiles once per
distinct input shape (the example inputs are compiled straight away, so errors
show at compile time).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from minic.backends import ModelSource
from minic.errors import UnsupportedError, UserError

OPTIONS = ("tuned", "records", "trials", "target", "population")
DEFAULT_TRIALS = 8          # per kernel; enough to beat the naive loops, far from converged
CACHE = Path(".minic-cache") / "tvm"


def compile(source: ModelSource, **options: Any):
    """``source`` → callable(*numpy arrays) -> numpy array (or tuple).

    Options: ``tuned`` (bool, default False): tune with MetaSchedule first;
    ``records`` (path): the tuning database directory (tuned: tuned into and
    resumed from; untuned: applied if given); ``trials`` (int): measured
    candidates per kernel when tuning; ``target`` (dict): default the host CPU;
    ``population``: the evolutionary search's population (default 512).
    """
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise UserError(f"backend 'tvm': unknown option '{unknown[0]}' (options: {', '.join(OPTIONS)})")
    compiled: dict[tuple, Any] = {}

    def runner(arrays: tuple[np.ndarray, ...]):
        key = tuple((a.shape, a.dtype.str) for a in arrays)
        if key not in compiled:
            compiled[key] = compile_for_shapes(source, arrays, **options)
        return compiled[key]

    def run(*arrays: np.ndarray):
        arrays = tuple(np.asarray(a) for a in arrays)
        return runner(arrays)(*arrays)

    def op_times(*arrays: np.ndarray, repeat: int = 10):
        """Each VM call's time (``VMRunner.op_times``) at these inputs' shapes."""
        arrays = tuple(np.asarray(a) for a in arrays)
        return runner(arrays).op_times(*arrays, repeat=repeat)

    run.op_times = op_times

    compiled[tuple((a.shape, a.dtype.str) for a in source.example_inputs)] = \
        compile_for_shapes(source, source.example_inputs, **options)
    return run


def compile_for_shapes(source: ModelSource, arrays: tuple[np.ndarray, ...], *, tuned: bool = False,
                       records: str | Path | None = None, trials: int = DEFAULT_TRIALS,
                       target: dict | None = None, population: int = 512) -> Any:
    """One static-shape compilation: import, optimize, maybe tune, build, load.

    Tuning progress goes to stderr (stdout may be a program's own output).
    """
    from bridges.tvm.build import VMRunner, as_target, build
    from bridges.tvm.checks import add_data_checks
    from bridges.tvm.passes import optimize
    from bridges.tvm.tune import tune

    imported = import_source(source, arrays)
    checked, checks = add_data_checks(imported.mod)
    mod, _ = optimize(checked)
    tvm_target = as_target(target)
    if tuned:
        records = Path(records) if records is not None else default_records(source.name, arrays)
        tune(mod, tvm_target, records, trials, population=population, out=sys.stderr)
    elif records is not None and not Path(records).is_dir():
        raise UserError(f"backend 'tvm': records directory '{records}' does not exist")
    executable = build(mod, tvm_target, records)
    return VMRunner(executable, imported.input_shapes, imported.input_dtypes, tuple(checks), source.name)


def import_source(source: ModelSource, arrays: tuple[np.ndarray, ...]) -> Any:
    """The Relax module for ``source`` at the shapes of ``arrays``."""
    from bridges.tvm.importer import from_onnx, from_torch

    if source.module is not None:
        return from_torch(source.module, arrays, source.name)
    if source.onnx_path is not None:
        return from_onnx(source.onnx_path, arrays, source.name)
    raise UnsupportedError(f"backend 'tvm' needs a torch module or an ONNX file; "
                           f"'{source.name}' is only a minic graph")


def default_records(name: str, arrays: tuple[np.ndarray, ...]) -> Path:
    """``.minic-cache/tvm/<model>-<shapes>``: one database per model and input shape."""
    shapes = "_".join("x".join(str(d) for d in a.shape) for a in arrays)
    return CACHE / f"{name}-{shapes}"
