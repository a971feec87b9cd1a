"""``python -m minic verify``: every model × every path, each cell ok / mismatch /
unsupported / crash.  Exit 0 only when nothing mismatches or crashes.

``verify --random N [--seed S]`` runs N random graphs through every path instead
(``minic.verify.fuzz``); failing graphs are minimized and saved as ``.mc``
regressions (``--save``), which tests/verify then runs on every test run."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from minic import backends
from minic.api import load
from minic.cli.model_args import add_model_args, given_inputs
from minic.verify.matrix import Cell, check
from minic.verify.precision import STRESS
from minic.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("verify", help="cross-check models on every backend against PyTorch")
    p.add_argument("models", nargs="*", help="zoo names, .onnx or .mc files, file.py:Name (default: the whole zoo); "
                                             "with --corpus: corpus names (default: the whole corpus)")
    p.add_argument("--backends", help="comma-separated backends (default: all but the reference)")
    add_model_args(p, size="small", model=False)
    p.add_argument("--random", type=int, metavar="N",
                   help="instead of models: N random graphs through every path (failures are minimized and saved)")
    p.add_argument("--save", type=Path, default=Path("tests/verify/regressions"),
                   help="where --random saves minimized failing graphs as .mc (default: %(default)s)")
    p.add_argument("--corpus", choices=("transformers",),
                   help="instead of the zoo: the transformers corpus (minic/models/corpus.py), token models "
                        "at two sequence lengths")
    p.add_argument("--json", type=Path, help="write the cells as JSON to this file")
    p.add_argument("--markdown", action="store_true", help="print the matrix as a Markdown table")
    p.add_argument("--precision", metavar="P,P",
                   help="instead of the matrix: each precision's error against the f32 reference "
                        "(f32, f16, f16-acc, bf16; backends minic and interp; models may also be the stress "
                        "graphs " + ", ".join(STRESS) + "; see docs/f16.md)")
    p.set_defaults(handler=handle)


def verify_models(names: list[str], backend_names: list[str] | None, size: str, seed: int,
                  progress=None, given=None) -> list[Cell]:
    """The matrix, cell by cell (``progress(cell)`` is called after each); ``given``:
    the models' inputs when the user gave them (``--inputs``/``--shape``), else each model's own."""
    cells = []
    for name in names:
        source = load(name, given, size=size, seed=seed)
        inputs = source.example_inputs
        ref_name, reference = backends.reference(source)
        for backend in backend_names or [b for b in backends.names() if b != ref_name]:
            cell = check(source, backend, inputs, reference)
            cell.runner = None                      # don't keep compiled models alive
            cells.append(cell)
            if progress:
                progress(cell)
    return cells


def cell_text(cell: Cell) -> str:
    if cell.status == "ok":
        return f"ok {cell.errors.abs:.1e}"
    return cell.status


def markdown(cells: list[Cell]) -> str:
    models = list(dict.fromkeys(c.model for c in cells))
    names = list(dict.fromkeys(c.backend for c in cells))
    table = {(c.model, c.backend): cell_text(c) for c in cells}
    lines = ["| model | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    lines += [f"| {m} | " + " | ".join(table.get((m, b), "") for b in names) + " |" for m in models]
    return "\n".join(lines)


def _loads(name: str) -> bool:
    """Whether a backend's module imports; one that does not is named and left out."""
    try:
        backends.get(name)
        return True
    except ImportError as e:
        print(f"verify --random: leaving out backend '{name}': {e}", file=sys.stderr)
        return False


def fuzz_backends() -> list[str]:
    """The default paths of ``verify --random``: every backend that loads but the reference.
    Random graphs are judged at f32; a backend that is lower-precision by design (it
    states its own bound, as qnn's fp16 HTP does) is fuzzed only when named."""
    return [b for b in backends.names() if b != "torch" and _loads(b)
            and getattr(backends.get(b), "tolerance", None) is None]


def handle_random(args: argparse.Namespace, chosen: list[str] | None) -> int:
    """``verify --random N``: random-graph differential testing (minic.verify.fuzz)."""
    from minic.verify.fuzz import fuzz
    from minic.progress import progress_bar
    if args.models:
        raise UserError("verify: give either model names or --random N, not both")
    if args.random < 1:
        raise UserError(f"verify: --random needs a positive number of graphs, got {args.random}")
    names = chosen or fuzz_backends()
    with progress_bar("random graphs", args.random * len(names)) as advance:
        report = fuzz(args.random, args.seed, names, save_dir=args.save, progress=advance)
    print(report.table())
    if args.json:
        args.json.write_text(json.dumps({b: dict(s.statuses) for b, s in report.stats.items()}, indent=1))
    return 1 if report.failures else 0


def handle_precision(args: argparse.Namespace, chosen: list[str] | None) -> int:
    """``verify --precision f32,f16,f16-acc``: the error of each precision, per model."""
    from minic import models
    from minic.verify.precision import markdown as precision_markdown, precision_table
    from minic.progress import progress_bar
    names = args.models or models.names() + list(STRESS)
    precisions = [p.strip() for p in args.precision.split(",") if p.strip()]
    chosen = chosen or ["minic"]
    for b in chosen:
        if b not in ("minic", "interp"):
            raise UserError(f"verify --precision: backend '{b}' has no precision option (use minic or interp)")
    with progress_bar("precision", len(names) * len(precisions) * len(chosen)) as advance:
        cells = precision_table(names, precisions, chosen, args.size, args.seed,
                                progress=lambda c: advance(f"{c.model}/{c.backend}/{c.precision}"))
    print(precision_markdown(cells))
    for c in cells:
        if c.detail:
            print(f"{c.model} / {c.backend} / {c.precision}: {c.status}: {c.detail}")
    if args.json:
        args.json.write_text(json.dumps([c.as_dict() for c in cells], indent=1))
    # f16 is expected to drift where docs/f16.md says; only a path that fails to run is an error.
    return 1 if any(c.status in ("unsupported", "crash") for c in cells) else 0


def handle(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from minic import models
    from minic.progress import progress_bar
    console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
    names = args.models or models.names()
    chosen = [b.strip() for b in args.backends.split(",")] if args.backends else None
    for b in chosen or []:
        backends.get(b)                              # unknown names fail before any work
    if args.random is not None:
        return handle_random(args, chosen)
    if args.precision:
        return handle_precision(args, chosen)
    if args.corpus:
        from minic.models import corpus
        from minic.verify.corpus_matrix import verify_corpus
        names = args.models or corpus.names()
        for name in names:
            corpus.info(name)                        # unknown names fail before any work
        chosen = chosen or [b for b in backends.names() if b != "torch"]
    total = len(names) * (len(chosen) if chosen else len(backends.names()) - 1)
    with progress_bar("verify", total) as advance:
        if args.corpus:
            cells = verify_corpus(chosen, args.seed, progress=lambda c: advance(f"{c.model}/{c.backend}"),
                                  names=names)
        else:
            cells = verify_models(names, chosen, args.size, args.seed,
                                  progress=lambda c: advance(f"{c.model}/{c.backend}"), given=given_inputs(args))
    if args.markdown:
        print(markdown(cells))
    else:
        table = Table("model", *dict.fromkeys(c.backend for c in cells))
        for m in dict.fromkeys(c.model for c in cells):
            table.add_row(m, *(cell_text(c) for c in cells if c.model == m))
        console.print(table)
    for c in cells:
        if c.status != "ok":
            console.print(f"{c.model} / {c.backend}: {c.status}: {c.detail}")
    if args.json:
        args.json.write_text(json.dumps([c.as_dict() for c in cells], indent=1))
    return 1 if any(c.status in ("mismatch", "crash") for c in cells) else 0
