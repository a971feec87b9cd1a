"""Progress for long work: a rich bar in a terminal, plain lines elsewhere (CI, pipes)."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator


@contextmanager
def progress_bar(what: str, total: int, stream=None) -> Iterator[Callable[[str], None]]:
    """Yield ``advance(label)``, to be called once per finished step."""
    stream = stream or sys.stderr
    if stream.isatty():
        from rich.progress import Progress
        with Progress(transient=True) as bar:
            task = bar.add_task(what, total=total)
            yield lambda label: bar.update(task, advance=1, description=f"{what}: {label}")
        return
    done = 0

    def advance(label: str) -> None:
        nonlocal done
        done += 1
        print(f"[{done}/{total}] {what}: {label}", file=stream, flush=True)
    yield advance
