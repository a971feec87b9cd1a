"""``python -m minic conformance``: the ONNX backend node suite, every case, on one path.

Prints pass / refused (grouped by reason) / wrong / crash over all cases, each
run in a worker process so that a native crash is counted, not fatal.  Exit 0
when nothing is wrong or crashed."""
from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

from minic.errors import UserError


def register(sub) -> None:
    p = sub.add_parser("conformance", help="run the ONNX backend node suite (every case) on one minic path")
    p.add_argument("--path", choices=("minic", "interp"), default="minic", help="compiler or interpreter (default: minic)")
    p.add_argument("--json", type=Path, metavar="FILE", help="write every case's outcome as JSON to FILE ('-' = stdout)")
    p.add_argument("-k", metavar="REGEX", help="only the cases whose name matches REGEX")
    p.add_argument("--workers", type=int, help="worker processes (default: the CPUs this process may use)")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per case before it counts as a crash")
    p.add_argument("--show", choices=("refused", "wrong", "crash", "all"), action="append", default=[],
                   help="also list the cases with this outcome")
    p.set_defaults(handler=handle)


def handle(args) -> int:
    from minic.conformance import load_cases, run_suite
    cases = load_cases()
    if args.k:
        try:
            pattern = re.compile(args.k)
        except re.error as e:
            raise UserError(f"-k: bad regular expression '{args.k}': {e}") from None
        cases = [c for c in cases if pattern.search(c.name)]
        if not cases:
            raise UserError(f"-k: no case matches '{args.k}'")
    start = time.perf_counter()
    results = run_suite(cases, args.path, workers=args.workers, timeout=args.timeout)
    seconds = time.perf_counter() - start
    counts = Counter(r.outcome for r in results)
    reasons = Counter(r.reason for r in results if r.outcome == "refused")
    out = sys.stderr if args.json and str(args.json) == "-" else sys.stdout
    print(f"ONNX node suite on '{args.path}': {len(results)} cases in {seconds:.0f} s", file=out)
    for outcome in ("pass", "refused", "wrong", "crash"):
        print(f"  {outcome:8} {counts.get(outcome, 0):5}", file=out)
        if outcome == "refused":
            for reason, n in reasons.most_common():
                print(f"    {n:5}  {reason}", file=out)
    shown = set(args.show) if "all" not in args.show else {"refused", "wrong", "crash"}
    for r in results:
        if r.outcome in shown | ({"wrong", "crash"} if not args.json else set()):
            print(f"{r.outcome}: {r.name}: {r.detail}", file=out)
    if args.json:
        doc = {"path": args.path, "seconds": round(seconds, 1), "counts": dict(counts), "refused": dict(reasons),
               "cases": [{"name": r.name, "outcome": r.outcome, "reason": r.reason, "detail": r.detail,
                          "seconds": round(r.seconds, 3)} for r in results]}
        text = json.dumps(doc, indent=1)
        if str(args.json) == "-":
            print(text)
        else:
            args.json.write_text(text + "\n")
    return 0 if counts.get("wrong", 0) + counts.get("crash", 0) == 0 else 1
