"""``python -m minic qnn compile|placement|accuracy MODEL``: the Qualcomm leg.

MODEL is a zoo name (``llama-tiny``) or an ``.onnx`` file.  Everything runs on
the x86-64 emulation of the Hexagon tensor processor (HTP) that onnxruntime-qnn
ships; timings printed are emulation timings, never device figures.
"""
from __future__ import annotations

import argparse
from pathlib import Path

EMULATION = "HTP emulated on x86-64 (libQnnHtp.so): timings are emulation figures, not a device's"


def register(subparsers) -> None:
    parser = subparsers.add_parser("qnn", help="the QNN bridge: HTP context binary, placement, accuracy")
    commands = parser.add_subparsers(dest="qnn_command", required=True, metavar="STEP")

    def step(name: str, help_text: str, handler, many: bool = False) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help_text)
        if many:
            p.add_argument("models", nargs="*", metavar="MODEL", help="zoo names or .onnx files (default: the whole zoo)")
        else:
            p.add_argument("model", metavar="MODEL", help="zoo name (e.g. llama-tiny) or .onnx file")
        p.add_argument("--size", default="small", choices=["full", "small"])
        p.add_argument("--io-quant", default="htp", choices=["htp", "cpu"],
                       help="where graph-input Q / graph-output DQ run (QNN's own default: cpu)")
        p.set_defaults(handler=handler)
        return p

    def quant_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--mode", default="fp16", choices=["fp16", "int8", "int16"])
        p.add_argument("--activation-type", choices=["uint8", "int8", "uint16", "int16"])
        p.add_argument("--weight-type", choices=["uint8", "int8", "uint16", "int16"])
        p.add_argument("--calibration", type=int, default=8, help="random calibration inputs beside the examples")
        p.add_argument("--no-rewrites", action="store_true", help="leave out the bridge's QNN rewrites")

    p = step("compile", "compile to a context binary (EPContext model + .bin), reload it and run", _compile)
    quant_options(p)
    p.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    p = step("placement", "where every node runs (HTP or CPU) and why; what blocks full offload", _placement)
    quant_options(p)
    p.add_argument("--summary", action="store_true", help="leave out the per-node list")
    p = step("coverage", "the placement summary of the zoo: nodes on HTP / CPU, full offload or not",
             _coverage, many=True)
    p.add_argument("--modes", default="fp16,int8", help="comma-separated: fp16, int8, int16")
    p.add_argument("--calibration", type=int, default=8, help="random calibration inputs beside the examples")
    p = step("accuracy", "the zoo against PyTorch and ORT CPU, fp16 and QDQ (a benchmark at --size full)",
             _accuracy, many=True)
    p.add_argument("--modes", default="fp16,int8", help="comma-separated: fp16, int8, int16")
    p.add_argument("--count", type=int, default=4, help="inputs per model (the example + random ones)")
    p.add_argument("--repeats", type=int, default=3, help="timed emulated runs (median)")


def _config(args, rewrites: bool | None = None):
    from bridges.qnn.prepare import QnnConfig

    return QnnConfig(mode=args.mode, activation_type=args.activation_type, weight_type=args.weight_type,
                     io_quant=args.io_quant, calibration=args.calibration,
                     rewrites=not args.no_rewrites if rewrites is None else rewrites)


def _prepared(args, rewrites: bool | None = None):
    from bridges.onnx.backend import model_input_names, to_onnx
    from bridges.qnn.prepare import prepare
    from bridges.qnn.sources import source_of

    source = source_of(args.model, args.size)
    model = to_onnx(source)
    names = tuple(model_input_names(source, model))
    examples = tuple(source.example_inputs)
    prepared = prepare(model, names, examples, _config(args, rewrites), calibrate_on=examples)
    used = {i.name for i in prepared.model.graph.input}
    return source, prepared, {n: x for n, x in zip(names, examples) if n in used}


def _compile(args) -> int:
    from bridges.onnx.report import file_stem
    from bridges.qnn.context import compile_to

    source, prepared, feed = _prepared(args)
    stem = Path(args.model).stem if args.model.endswith(".onnx") else file_stem(args.model)
    binary = compile_to(prepared.model, feed, args.out, stem, io_quant=args.io_quant)
    print(f"{source.name} ({_config(args).label()}), {EMULATION}")
    if prepared.rewrites:
        print("rewrites: " + ", ".join(f"{k} x{v}" for k, v in prepared.rewrites.items()))
    print(binary.text())
    return 0


def _both(args):
    """(source, graph as exported, graph with the rewrites or None when they change nothing).
    The rewritten graph is made first: when no rule fires it *is* the plain one, and a QDQ
    model is quantized once instead of twice."""
    source, rewritten, _ = _prepared(args, rewrites=True)
    if not rewritten.rewrites:
        return source, rewritten, None
    return source, _prepared(args, rewrites=False)[1], rewritten


def _placement(args) -> int:
    from bridges.qnn.placement import report

    label = _config(args).label()
    if args.no_rewrites:
        source, plain, _ = _prepared(args, rewrites=False)
        rewritten = None
    else:
        source, plain, rewritten = _both(args)
    print(report(plain.model, f"{source.name}, {label}, as exported",
                 io_quant=args.io_quant).text(per_node=not args.summary))
    if args.no_rewrites:
        return 0
    if rewritten is not None:
        after = report(rewritten.model, f"{source.name}, {label}, with the bridge's rewrites",
                       rewritten.rewrites, io_quant=args.io_quant)
        print("\n" + after.text(per_node=not args.summary))
    else:
        print("\nthe bridge's rewrites change nothing in this graph")
    return 0


def _coverage(args) -> int:
    import minic.models as zoo
    from bridges.qnn.placement import coverage_row, markdown

    rows = []
    for name in args.models or zoo.names():
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            args.model, args.mode, args.activation_type, args.weight_type = name, mode, None, None
            args.no_rewrites = False
            _, plain, rewritten = _both(args)
            label = _config(args).label()
            for prepared in (plain, rewritten):
                if prepared is not None:
                    rows.append(coverage_row(name, label, prepared, io_quant=args.io_quant))
            print(f"  {name} {mode}: done", flush=True)
    print(f"\n{EMULATION}\n")
    print(markdown(rows))
    return 0


def _accuracy(args) -> int:
    import minic.models as zoo
    from bridges.qnn.accuracy import markdown, measure
    from bridges.qnn.prepare import QnnConfig

    names = args.models or zoo.names()
    rows = []
    for name in names:
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            rows.append(measure(name, args.size, QnnConfig(mode=mode, io_quant=args.io_quant),
                                count=args.count, repeats=args.repeats))
            print(f"  {name} {mode}: done", flush=True)
    print(f"\n{EMULATION}\n")
    print(markdown(rows))
    return 0 if all(r.ok for r in rows) else 1
