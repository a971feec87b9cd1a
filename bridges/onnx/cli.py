"""``python -m minic onnx export|optimize|compare|viz|custom-op MODEL``.

MODEL is a zoo name (``llama-tiny``) or, for optimize and viz, an ``.onnx`` file.
Files go to ``--out`` (default ``out/onnx``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

DEFAULT_OUT = Path("out/onnx")


def register(subparsers) -> None:
    parser = subparsers.add_parser("onnx", help="the ONNX bridge: export, optimize, compare, viz")
    commands = parser.add_subparsers(dest="onnx_command", required=True, metavar="STEP")

    def step(name: str, help_text: str, handler) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help_text)
        p.add_argument("model", metavar="MODEL", help="zoo name (e.g. llama-tiny) or .onnx file")
        p.add_argument("--size", default="full", choices=["full", "small"])
        p.add_argument("--opset", type=int, default=17)
        p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
        p.set_defaults(handler=handler)
        return p

    step("export", "export with dynamic axes and run the full ONNX checker", _export)
    p = step("optimize", "run the homemade passes; compare with onnxoptimizer and ORT basic",
             _optimize)
    p.add_argument("--passes", help="comma-separated pass names (default: all, in order)")
    p = step("compare", "node, accuracy and latency tables (a benchmark)", _compare)
    p.add_argument("--count", type=int, default=100, help="accuracy inputs (half text)")
    p.add_argument("--repeats", type=int, default=20, help="timed rounds (median)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--threads", type=int, help="intra-op threads for torch and ORT alike")
    p.add_argument("--no-quantize", action="store_true", help="skip the INT8 QDQ variant")
    step("viz", "draw the graph before and after the homemade passes (SVG, PNG)", _viz)
    p = commands.add_parser("custom-op", help="a custom-domain op: export, ORT's error, fixes")
    p.add_argument("--size", default="small", choices=["full", "small"])
    p.set_defaults(handler=_custom_op)


def _model(args) -> tuple[object, str]:
    """(ModelProto, file stem) for a zoo name or an .onnx path."""
    from bridges.onnx.export import export_zoo, load
    from bridges.onnx.report import file_stem

    if args.model.endswith(".onnx"):
        return load(args.model), Path(args.model).stem
    exported, _ = export_zoo(args.model, args.size, opset=args.opset)
    return exported.model, file_stem(args.model)


def _export(args) -> int:
    from bridges.onnx.export import save
    from bridges.onnx.optimize import node_counts

    model, stem = _model(args)
    path = save(model, args.out / f"{stem}.onnx")
    print(f"wrote {path} (opset {model.opset_import[0].version}, "
          f"{node_counts(model)[0]} nodes); onnx.checker full check: passed")
    for value in list(model.graph.input) + list(model.graph.output):
        dims = [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        print(f"  {value.name}: {dims}")
    return 0


def _optimize(args) -> int:
    from bridges.onnx.export import save
    from bridges.onnx.optimize import homemade, with_onnxoptimizer, with_ort_basic
    from bridges.onnx.report import histogram_table, node_table

    model, stem = _model(args)
    names = args.passes.split(",") if args.passes else None
    optimized, log = homemade(model, names)
    print(f"homemade passes: fixed point after {log.rounds} round(s)")
    for step in log.changed():
        print(f"  round {step.round} {step.name:32s} {step.nodes_before:5d} -> "
              f"{step.nodes_after:5d} nodes")
    path = save(optimized, args.out / f"{stem}_opt.onnx")
    print(f"wrote {path}\n")
    variants = {"exported": model, "homemade": optimized,
                "onnxoptimizer": with_onnxoptimizer(model), "ort-basic": with_ort_basic(model)}
    print(node_table(variants) + "\n\n" + histogram_table(variants))
    return 0


def _compare(args) -> int:
    from minic.errors import UserError
    from bridges.onnx.report import run_report

    if args.model.endswith(".onnx"):
        raise UserError("compare needs a zoo model (the torch reference), not an .onnx file")
    report = run_report(args.model, args.size, count=args.count, repeats=args.repeats,
                        out_dir=args.out, quantize=not args.no_quantize,
                        latency_shape=(args.batch, args.seq), threads=args.threads)
    for path in report.files:
        print(f"wrote {path}")
    print(report.text())
    return 0


def _viz(args) -> int:
    from bridges.onnx.optimize import homemade
    from bridges.onnx.viz import render

    model, stem = _model(args)
    for label, graph in (("before", model), ("after", homemade(model)[0])):
        for path in render(graph, args.out / f"{stem}_{label}", f"{stem}: {label} optimization"):
            print(f"wrote {path}")
    return 0


def _custom_op(args) -> int:
    import numpy as np

    from bridges.onnx import custom_op as demo

    exported, module = demo.export_with_custom_rmsnorm(args.size)
    customs = [n for n in exported.model.graph.node if n.domain == demo.DOMAIN]
    print(f"exported llama-tiny with {len(customs)} {demo.DOMAIN}::{demo.OP} nodes "
          f"(checker passed: it cannot know the op, so it does not judge it)")
    print(f"1. ONNX Runtime: {demo.ort_error(exported.model)}")
    ids = exported.example_inputs[0]
    import torch
    with torch.no_grad():
        reference = module(torch.from_numpy(ids)).numpy()
    out = demo.run_with_python_kernel(exported.model, {exported.input_names[0]: ids})
    print(f"2. onnx ReferenceEvaluator + Python kernel: max |err| vs torch "
          f"{np.max(np.abs(out - reference)):.2e}")
    from bridges.onnx.compare import ort_session
    session = ort_session(demo.with_function_definition(exported.model))
    out = session.run(None, {exported.input_names[0]: ids})[0]
    print(f"3. ONNX Runtime + FunctionProto definition: max |err| {np.max(np.abs(out - reference)):.2e}")
    static, _ = demo.export_with_custom_rmsnorm(args.size, dynamic=False)
    graph = demo.import_into_minic(static.model)
    from minic.ir.interpret import interpret
    out = interpret(graph, [ids])[0]
    print(f"4. minic importer + converter, interpreted: max |err| {np.max(np.abs(out - reference)):.2e}")
    return 0
