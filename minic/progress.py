"""Progress for long work: a rich bar in a terminal, plain lines elsewhere (CI, pipes);
both say how long the work has run."""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from typing import Callable, Iterator


def elapsed(seconds: float) -> str:
    """``12.3s``, ``4m05s``, ``1h02m``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


@contextmanager
def progress_bar(what: str, total: int, stream=None) -> Iterator[Callable[[str], None]]:
    """Yield ``advance(label)``, to be called once per finished step."""
    stream = stream or sys.stderr
    if stream.isatty():
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda label: bar.update(task, advance=1, description=f"{what}: {label}")
        return
    done, start = 0, time.monotonic()

    def advance(label: str) -> None:
        nonlocal done
        done += 1
        print(f"[{done}/{total} {elapsed(time.monotonic() - start)}] {what}: {label}", file=stream, flush=True)
    yield advance
