"""``python -m minic tvm build|tune|bench|cross|reorder MODEL``.

MODEL is a zoo name (``resnet50``, ``bert-base``, ...) or an ``.onnx`` file (the
ONNX bridge's output; symbolic dims are set by ``--dim``).  Tuning databases
live in ``--work-dir`` (default ``.minic-cache/tvm/<model>-<size>``) and are
resumed: running ``tune`` again with a larger ``--trials`` only adds trials.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

DEFAULT_TRIALS = 8


def register(subparsers) -> None:
    parser = subparsers.add_parser("tvm", help="the TVM bridge: Relax passes, MetaSchedule, ARM cross-compile")
    steps = parser.add_subparsers(dest="tvm_command", required=True, metavar="STEP")

    def step(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        p = steps.add_parser(name, help=help_text)
        p.add_argument("model", metavar="MODEL", help="zoo name (e.g. resnet50) or .onnx file")
        p.add_argument("--size", default="full", choices=["full", "small"])
        p.add_argument("--dim", type=int, default=1, help="value of symbolic dims of an .onnx input")
        p.add_argument("--work-dir", type=Path, help="tuning database folder")
        p.set_defaults(handler=handler)
        return p

    p = step("build", "import, run the Relax passes (counts, IR dumps), build untuned, check", _build)
    p.add_argument("--dump-dir", type=Path, help="write the IR before and after every pass here")
    p.add_argument("--print-after", action="append", default=[], metavar="PASS",
                   help="print the IR after PASS (repeatable; 'all' for every pass)")
    p.add_argument("--tuned", action="store_true", help="apply the database in --work-dir")
    for name, text, handler in (("tune", "MetaSchedule-tune every kernel into --work-dir", _tune),
                                ("bench", "timing table: PyTorch eager vs TVM untuned vs tuned", _bench)):
        p = step(name, text, handler)
        budget = p.add_mutually_exclusive_group()
        budget.add_argument("--trials", type=int, help=f"measured trials per kernel (default {DEFAULT_TRIALS})")
        budget.add_argument("--total-trials", type=int, metavar="N",
                            help="one budget for all kernels, spent where the time is (gradient scheduler)")
        p.add_argument("--population", type=int, default=512, help="evolutionary search population")
        p.add_argument("--tune-threads", type=int, metavar="N",
                       help="TVM threads of the kernels measured while tuning (default: every core)")
        if name == "bench":
            p.add_argument("--repeat", type=int, default=20, help="timed runs per path (median)")
            p.add_argument("--threads", default=None, metavar="N[,N...]",
                           help="time eager and tuned TVM with each thread count (default: every core)")
            p.add_argument("--no-untuned", dest="untuned", action="store_false",
                           help="skip the untuned build (seconds per call at full size)")
    p = step("curve", "the tuning curve: latency after the first trials of --work-dir's database", _curve)
    cut = p.add_mutually_exclusive_group(required=True)
    cut.add_argument("--per-kernel", metavar="K[,K...]", help="keep the first K records of each kernel")
    cut.add_argument("--first", metavar="N[,N...]", help="keep the first N records overall")
    p.add_argument("--threads", type=int, help="PyTorch and TVM threads (default: theirs)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs per path (median)")
    p = step("cross", "cross-compile for aarch64 Cortex-A55 (+neon), check ELF and NEON", _cross)
    p.add_argument("--out", type=Path, default=Path("out/tvm"), help="output folder")
    p.add_argument("--archive", action="store_true", help="write object files (.tar) even if a "
                                                          "cross toolchain is installed")
    p = steps.add_parser("reorder", help="the custom TIR loop-interchange pass on a naive matmul")
    p.add_argument("--n", type=int, default=256, help="matrix size")
    p.set_defaults(handler=_reorder)


def _source(args):
    """(ModelSource, torch module or None) for a zoo name or an .onnx path."""
    from minic.api import load
    from minic.backends import ModelSource

    if args.model.endswith(".onnx"):
        path = Path(args.model)
        return ModelSource(path.stem, _onnx_inputs(path, args.dim), onnx_path=path)
    return load(args.model, size=args.size)


def _work_dir(args) -> Path:
    from bridges.tvm.backend import CACHE
    return args.work_dir or CACHE / f"{Path(args.model).stem}-{args.size}"


def _optimized(args, source, **dump):
    from bridges.tvm.backend import import_source
    from bridges.tvm.importer import signature
    from bridges.tvm.passes import format_steps, optimize

    imported = import_source(source, source.example_inputs)
    print(f"imported {source.name}: {signature(imported.mod)}")
    mod, steps = optimize(imported.mod, **dump)
    print("well-formed before and after every pass\n" + format_steps(steps))
    return imported, mod


def _build(args) -> int:
    from bridges.tvm.build import VMRunner, as_target, build
    from bridges.tvm.bench import samples
    from minic.compare import errors
    from minic.timing import fmt_ms
    import statistics

    source = _source(args)
    imported, mod = _optimized(args, source, dump_dir=args.dump_dir, print_after=tuple(args.print_after),
                               out=sys.stdout)
    work_dir = _work_dir(args) if args.tuned else None
    if work_dir is not None and not (work_dir / "database_tuning_record.json").is_file():
        from minic.errors import UserError
        raise UserError(f"no tuning database in {work_dir}; run `python -m minic tvm tune {args.model}` first")
    runner = VMRunner(build(mod, as_target(None), work_dir), imported.input_shapes, imported.input_dtypes)
    output = runner(*source.example_inputs)
    reference = _reference(source)
    err = errors(output, reference).abs
    latency = statistics.median(samples(runner, source.example_inputs, 10))
    print(f"built {'with ' + str(work_dir) if work_dir else 'untuned'}: median {fmt_ms(latency)}, "
          f"max abs error vs {'PyTorch' if source.module is not None else 'ONNX Runtime'}: {err:.2e}")
    if args.dump_dir:
        print(f"IR dumps in {args.dump_dir}/")
    return 0


def _tune(args) -> int:
    from bridges.tvm.build import as_target
    from bridges.tvm.tune import format_reports

    source = _source(args)
    _, mod = _optimized(args, source)
    work_dir = _work_dir(args)
    print(f"tuning into {work_dir} ({_budget_text(args)})")
    start = time.perf_counter()
    reports = _run_tuning(args, mod, as_target(None), work_dir)
    print(format_reports(reports))
    print(f"tuning this run: {time.perf_counter() - start:.0f} s")
    return 0


def _budget_text(args) -> str:
    if args.total_trials is not None:
        return f"{args.total_trials} trials in total, gradient scheduler"
    return f"{_trials(args)} trials per kernel"


def _trials(args) -> int:
    """--trials, or the default when neither budget was given (0 is a valid --trials)."""
    return DEFAULT_TRIALS if args.trials is None else args.trials


def _run_tuning(args, mod, target, work_dir):
    """``tune`` (per-kernel budget) or ``tune_global`` (--total-trials), as asked."""
    from bridges.tvm.tune import tune, tune_global

    options = dict(population=args.population, threads=args.tune_threads, out=sys.stdout)
    if args.total_trials is not None:
        return tune_global(mod, target, work_dir, args.total_trials, **options)
    return tune(mod, target, work_dir, _trials(args), **options)


def _bench(args) -> int:
    from bridges.tvm.bench import benchmark
    from minic.errors import UnsupportedError

    source = _source(args)
    if source.module is None:
        raise UnsupportedError("tvm bench compares with PyTorch eager: give a zoo model name")
    result = benchmark(source.module, source.example_inputs, source.name,
                       trials=_trials(args), total_trials=args.total_trials,
                       work_dir=_work_dir(args), repeat=args.repeat, population=args.population,
                       threads=_thread_counts(args.threads), untuned=args.untuned,
                       tune_threads=args.tune_threads, out=sys.stdout)
    print(f"\n{result.model} ({result.shapes}), {result.kernels} kernels, {result.budget}, "
          f"tuning this run: {result.tune_s:.0f} s, model: {result.model_flops / 1e9:.2f} GFLOP "
          f"(TVM's count)\n")
    print(result.table())
    from bridges.tvm.tune import format_reports
    print("\nwhere the tuned time goes (best measured latency per kernel):\n" + format_reports(result.reports))
    return 0


def _curve(args) -> int:
    from bridges.tvm.curve import curve
    from minic.errors import UnsupportedError

    source = _source(args)
    if source.module is None:
        raise UnsupportedError("tvm curve compares with PyTorch eager: give a zoo model name")
    work_dir = _work_dir(args)
    result = curve(source.module, source.example_inputs, source.name, work_dir,
                   per_kernel=tuple(_numbers(args.per_kernel, "--per-kernel") or ()),
                   first=tuple(_numbers(args.first, "--first") or ()), threads=args.threads,
                   repeat=args.repeat, out=sys.stdout)
    threads = f", {args.threads} thread(s)" if args.threads else ""
    print(f"\n{source.name}: prefixes of {work_dir}{threads}, "
          f"model: {result.model_flops / 1e9:.2f} GFLOP (TVM's count)\n")
    print(result.table())
    return 0


def _thread_counts(text: str | None) -> list[int] | None:
    """``"1,2"`` → ``[1, 2]``."""
    return _numbers(text, "--threads")


def _numbers(text: str | None, option: str) -> list[int] | None:
    """``"1,2"`` → ``[1, 2]`` (each >= 1); None stays None."""
    if text is None:
        return None
    from minic.errors import UserError
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise UserError(f"{option}: expected numbers like 1,2, got {text!r}") from None
    if any(n < 1 for n in numbers):
        raise UserError(f"{option}: numbers must be >= 1, got {text!r}")
    return numbers


def _cross(args) -> int:
    from bridges.tvm.cross import AARCH64_TARGET, cross_compile, find_cross_compiler
    from minic import tools

    source = _source(args)
    _, mod = _optimized(args, source)
    print(f"target: {AARCH64_TARGET}")
    if find_cross_compiler() is None and not args.archive:
        print(tools.missing("aarch64-linux-gnu-gcc", tools.CROSS_PACKAGES["aarch64"], "a shared library")
              + ": writing object files instead")
    report = cross_compile(mod, args.out, Path(args.model).stem, archive_only=args.archive)
    print(report.summary())
    if not report.all_aarch64 or not report.neon:
        print("error: the output is not AArch64 code with NEON instructions")
        return 1
    return 0


def _reorder(args) -> int:
    from bridges.tvm.reorder import demo
    print(demo(args.n).summary())
    return 0


def _reference(source):
    """PyTorch's output for zoo models, ONNX Runtime's for .onnx files."""
    import numpy as np

    if source.module is not None:
        from minic.api import compile as minic_compile
        return minic_compile(source, backend="torch")(*source.example_inputs)
    import onnxruntime as ort
    session = ort.InferenceSession(str(source.onnx_path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outs = session.run(None, dict(zip(names, source.example_inputs)))
    return outs[0] if len(outs) == 1 else tuple(np.asarray(o) for o in outs)


def _onnx_inputs(path: Path, dim: int):
    """Random inputs for an .onnx file's graph inputs (symbolic dims = ``dim``, ints in [0, 2))."""
    import numpy as np
    import onnx
    from onnx import helper

    from minic.errors import UserError
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:
        raise UserError(f"{path}: cannot read ONNX file: {e}") from e
    initializers = {t.name for t in model.graph.initializer}
    rng = np.random.default_rng(0)
    arrays = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        shape = tuple(d.dim_value if d.HasField("dim_value") else dim for d in tensor.shape.dim)
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor.elem_type))
        arrays.append(rng.standard_normal(shape).astype(dtype) if dtype.kind == "f"
                      else rng.integers(0, 2, shape).astype(dtype))
    return tuple(arrays)
