"""Running the command line in-process, as a user would see it (shared by the CLI tests)."""
from __future__ import annotations

from minic.cli import main


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python -m minic ARGV``."""
    try:
        code = main(list(argv))
    except SystemExit as e:            # argparse's usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err
