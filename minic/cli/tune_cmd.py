"""``python -m minic tune MODEL --trials N [--records FILE]``: tune every contraction
kernel of a model, record the knobs that beat the default, and print default vs
tuned GFLOPS per kernel, then the whole model untuned vs tuned.

Records go to ``--records`` or, by default, to the compile cache's
``tuning.jsonl``, which compilation reads: the next compile of the model (any
backend call, ``run``, ``bench``) uses the tuned schedules.  Kernels of equal
shape share one signature and are tuned once; a kernel that already has a
confirmed record from at least as many trials is not tuned again (``--retune``).

Each kernel is timed as it runs in the model (``tune/measure.py``) and a
point replaces the default only when it beats it beyond the noise
(``tune/confirm.py``).  The model-level check at the end uses the same
paired comparison, so a tuned model slower than the untuned one beyond the
noise is reported as such, not hidden.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from minic.cli.model_args import add_model_args
from minic.errors import UserError

MODEL_BLOCK = 3               # model calls per block in the model-level check (short blocks: more pairs)


def register(sub) -> None:
    p = sub.add_parser("tune", help="tune the schedules of a model's matmul/conv kernels (AutoTVM-style)")
    add_model_args(p)
    p.add_argument("--trials", type=int, default=16, help="measurements per kernel (default: %(default)s)")
    p.add_argument("--records", type=Path, help="records file (default: tuning.jsonl in the compile cache)")
    p.add_argument("--strategy", choices=("anneal", "random"), default="anneal", help="search strategy")
    p.add_argument("--retune", action="store_true", help="tune kernels that already have a record")
    p.add_argument("--model-repeat", type=int, default=60,
                   help="timed calls of the whole model, untuned and tuned (0: skip; default: %(default)s)")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from minic import pipeline
    from minic.api import graph_of
    from minic.cli.model_args import load_model
    from minic.ir.graph import Value
    from minic.ir.interpret import bind_symbols
    from minic.ir.types import TensorType
    from minic.runtime import CompileOptions
    from minic.tune import records
    from minic.schedule.templates import find_contraction, signature
    from minic.tune.tuner import as_record
    if args.trials < 1:
        raise UserError("--trials must be at least 1")
    if args.model_repeat < 0:
        raise UserError("--model-repeat must be at least 0")
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    source = load_model(args)
    graph = graph_of(source)
    options = CompileOptions(records=args.records)
    program = pipeline.run(graph, "loops", options)       # what the tuner's templates start from
    sizes = bind_symbols([Value(b.name, TensorType(b.shape, b.dtype)) for b in program.inputs], source.example_inputs)
    # Between two calls of a kernel the model reads all its weights: that is how cold they are.
    cold_bytes = sum(a.nbytes for a in program.constants.values())
    kernels, seen = [], set()
    for k in program.kernels:
        if find_contraction(k) is not None and signature(k) not in seen:
            seen.add(signature(k))
            kernels.append(k)
    if not kernels:
        raise UserError(f"model '{source.name}' has no matmul or conv kernel to tune")
    path, target = options.cache.records, records.target_of(options.target)
    known = records.best(records.read(path))

    def recorded(k):
        r = known.get((signature(k), target))
        return r if r is not None and r.confirmed and r.trials >= args.trials and not args.retune else None
    todo = [k for k in kernels if recorded(k) is None]
    t0 = time.perf_counter()
    results = tune_all(todo, sizes, options, args, cold_bytes)
    if results:
        records.append(path, [as_record(r, options) for r in results])
    console.print(kernel_table(source.name, results, [(k, recorded(k)) for k in kernels if recorded(k)], sizes,
                               time.perf_counter() - t0))
    kept = [r.kept_default for r in results] + [rec.kept_default for _, rec in
                                                 ((k, recorded(k)) for k in kernels) if rec is not None]
    console.print(f"{sum(kept)} of {len(kept)} kernels kept the default schedule; records: {path}")
    if args.model_repeat:
        return model_check(console, source, graph, path, args.model_repeat)
    return 0


def tune_all(kernels, sizes, options, args, cold_bytes: int) -> list:
    """Tune each kernel in turn, with a progress line per trial."""
    from minic.progress import progress_bar
    from minic.tune.tuner import tune_kernel
    results = []
    if not kernels:
        return results
    with progress_bar(f"tune {len(kernels)} kernels", len(kernels) * args.trials) as advance:
        for k in kernels:
            done = []

            def step(trial, k=k, done=done):
                done.append(trial)
                advance(f"{k.name} trial {len(done)}")
            results.append(tune_kernel(k, sizes, options, args.trials, args.strategy, args.seed,
                                       cold_bytes=cold_bytes, on_trial=step))
            for _ in range(args.trials - len(done)):      # the space was smaller than the budget
                advance(f"{k.name} done")
    return results


def kernel_table(model: str, results: list, recorded: list, sizes: dict[str, int], seconds: float):
    """One row per kernel: default and tuned GFLOPS (timed together), their ratio, the
    verdict (the strongest point's paired gain and the margin it had to beat), the knobs kept."""
    from rich.table import Table
    from minic.tune.measure import flops
    table = Table("kernel", "trials", "search best GFLOPS", "default GFLOPS", "tuned GFLOPS", "speed-up", "verdict",
                  "knobs (rows x lanes)",
                  title=f"{model}: {len(results)} kernels tuned in {seconds:.1f} s, load {load_text()}",
                  caption="default, tuned: medians of the same interleaved rounds; search best: the fastest "
                          "single trial (optimistic: the best of many noisy measurements)")
    for r in results:
        c = r.comparison
        search = min(t.seconds for t in r.trials)
        verdict = "default (no other point)" if c is None else _verdict(r.kept_default, c.gain, c.margin)
        table.add_row(r.kernel, str(len(r.trials)), f"{r.flops / search / 1e9:.1f}", f"{r.gflops(r.default):.1f}",
                      f"{r.gflops(r.best):.1f}", f"{r.default.seconds / r.best.seconds:.2f}x", verdict,
                      _knobs(r.best.knobs.to_json()))
    for k, rec in recorded:
        fl = flops(k, sizes)
        verdict = _verdict(rec.kept_default, rec.gain, rec.margin)
        table.add_row(k.name, f"{rec.trials} (record)", "", f"{fl / rec.default_seconds / 1e9:.1f}",
                      f"{fl / rec.seconds / 1e9:.1f}", f"{rec.speedup:.2f}x", verdict, _knobs(rec.knobs))
    return table


def _verdict(kept_default: bool, gain: float, margin: float) -> str:
    """Kept the default or tuned; the strongest point's gain against the margin it had to beat."""
    return f"default: {gain:+.1%} <= {margin:.1%}" if kept_default else f"tuned: {gain:+.1%} > {margin:.1%}"


def _knobs(k: dict) -> str:
    """rows x lanes, packed or not, parallel loop: ``6x32 pack outer``."""
    return f"{k['rows']}x{k['lanes']} {'pack' if k['pack'] else 'no-pack'} {k['parallel']}"


def model_check(console, source, graph, path: Path, repeat: int) -> int:
    """The whole model without records against the model with them: interleaved blocks
    of calls, compared pairwise as kernels are (``confirm.compare``)."""
    from rich.table import Table
    from minic.compare import errors
    from minic.runtime import CompileOptions, compile_graph
    from minic.tune.confirm import SETTLE_S, compare
    from minic.timing import fmt_ms, interleaved
    with tempfile.TemporaryDirectory() as tmp:          # no records file: default schedules only
        untuned = compile_graph(graph, CompileOptions(records=Path(tmp) / "none.jsonl", use_cache=False))
    tuned = compile_graph(graph, CompileOptions(records=path))
    inputs = source.example_inputs
    err = errors(tuned(*inputs), untuned(*inputs))
    for model in (untuned, tuned):                      # first-call costs, thread pools
        for _ in range(3):
            model(*inputs)
    blocks = interleaved([lambda: untuned(*inputs), lambda: tuned(*inputs)], repeat, MODEL_BLOCK, SETTLE_S)
    c = compare(blocks[0].block_medians(), blocks[1].block_medians())
    verdict = ("[bold red]tuned is SLOWER than untuned beyond the noise[/]" if c.slower else
               "[green]tuned is faster[/]" if c.faster else "same within the noise")
    table = Table("model", "untuned", "tuned", "speed-up", "margin", "verdict", "max |tuned - untuned|",
                  title=f"whole model: {len(blocks[0].blocks)} interleaved rounds of up to {MODEL_BLOCK} calls each, "
                        f"load {load_text()}",
                  caption="untuned, tuned: medians of the block medians; speed-up: median of the paired "
                          "untuned/tuned ratios of the rounds")
    table.add_row(source.name, fmt_ms(c.base_seconds), fmt_ms(c.other_seconds), f"{1 + c.gain:.3f}x",
                  f"±{c.margin:.1%}", verdict, f"{err.abs:.1e}")
    console.print(table)
    if c.slower:
        console.print(f"[bold red]warning: with these records {source.name} is {1 / (1 + c.gain) - 1:.1%} slower than "
                      f"untuned, beyond the ±{c.margin:.1%} noise; tune again on a quieter machine (--retune) or "
                      f"remove {path}[/]")
    if not err.within(1e-4):
        console.print("[bold red]the tuned model's outputs differ from the untuned model's beyond 1e-4: "
                      "this is a bug in minic[/]")
        return 1
    return 0


def load_text() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
