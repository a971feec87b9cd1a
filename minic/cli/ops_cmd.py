"""``python -m minic ops``: minic's ops; ``--torch``: the Core ATen overloads the
torch frontend converts, covered/total, each missing one, and the families left
out with their reasons; then the torch.nn layer classes it refuses, each with its reason."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("ops", help="list minic's ops; --torch: Core ATen coverage of the torch frontend")
    p.add_argument("--torch", action="store_true", help="Core ATen (torch.Tag.core) overloads: covered/total, missing")
    p.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    if not args.torch:
        from minic.ir import ops
        for name in ops.names():
            print(f"{name:18} {ops.get(name).doc}")
        return 0
    from minic.frontend.core_aten import EXCLUDED, NN_REFUSED, coverage
    c = coverage()
    counted = len(c.covered) + len(c.missing)
    print(f"Core ATen (torch.Tag.core): {len(c.covered)}/{counted} covered "
          f"({c.total} overloads, {c.total - counted} left out by family)")
    print(f"missing ({len(c.missing)}):")
    for name in c.missing:
        print(f"  {name}")
    reasons = {label: reason for label, reason, _ in EXCLUDED}
    for family, names in c.excluded.items():
        print(f"left out: {family} ({len(names)}): {reasons[family]}")
        print("  " + ", ".join(names))
    print(f"torch.nn.modules layer classes refused ({len(NN_REFUSED)}; every other one is converted and "
          f"checked against eager):")
    for name, reason in sorted(NN_REFUSED.items()):
        print(f"  {name:22} {reason}")
    return 0
