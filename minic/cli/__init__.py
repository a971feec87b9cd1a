"""The command line: ``python -m minic COMMAND ...``.

Each command lives in its own module and adds itself with ``register(subparsers)``;
the bridges add theirs through the ``minic.cli`` entry-point group.  Errors a user
can fix print one line and exit 1; usage errors exit 2 (argparse); anything else
is an internal error, labelled as such, exit 3.
"""
from __future__ import annotations

import argparse
import sys
import traceback
import warnings
from importlib.metadata import entry_points

from minic.errors import MinicError

EXIT_USER_ERROR = 1
EXIT_INTERNAL_ERROR = 3


def build_parser() -> argparse.ArgumentParser:
    from minic.cli import (bench_cmd, compile_cmd, conformance_cmd, debug_cmd, models_cmd, ops_cmd, report_cmd, run, show,
                           tune_cmd, verify_cmd, viz_cmd)
    parser = argparse.ArgumentParser(prog="python -m minic", description="minic: a small ML compiler written to be read")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (run, show, compile_cmd, conformance_cmd, verify_cmd, viz_cmd, report_cmd, models_cmd, ops_cmd, bench_cmd,
                   tune_cmd, debug_cmd):
        module.register(sub)
    for plugin in entry_points(group="minic.cli"):
        try:
            plugin.load()(sub)
        except ModuleNotFoundError as e:        # its production stack is not installed: say so when asked
            from minic.backends import extra_of, missing_stack
            err = missing_stack(e, f"the {plugin.name} bridge's commands", extra_of(plugin.value))
            if err is None:
                raise
            _missing(sub, plugin.name, str(err))
    return parser


def _missing(sub, name: str, why: str) -> None:
    """A command standing for a bridge that cannot load: it fails with ``why``."""
    def handler(args: argparse.Namespace) -> int:
        raise MinicError(why)
    p = sub.add_parser(name, help=f"(unavailable) {why}")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(handler=handler)


def _missing_stack(e: ModuleNotFoundError, command: str):
    from minic.backends import extra_of, missing_stack
    plugin = next((p for p in entry_points(group="minic.cli") if p.name == command), None)
    return missing_stack(e, f"'{command}'", extra_of(plugin.value) if plugin else "bridges")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # torch 2.13 warns about its own pytree internals whenever a bridge exports a model.
    warnings.filterwarnings("ignore", message=".*LeafSpec.*", category=FutureWarning)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        try:
            return args.handler(args) or 0
        except ModuleNotFoundError as e:        # a bridge command's stack, imported when it runs
            err = _missing_stack(e, args.command)
            if err is None:
                raise
            raise err from None
    except MinicError as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the one place that labels internal errors
        if args.debug:
            traceback.print_exc()
        print(f"internal error: {type(e).__name__}: {e}\n"
              "this is a bug in minic; please report it with the command you ran (--debug shows the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL_ERROR
