"""Run the fenced blocks of a Markdown page, so that the docs cannot rot.

* ```` ```bash ```` — every line is a command (``\\`` continues a line; ``#`` lines
  are comments).  ```` ```console ```` — lines starting with ``$ `` are commands,
  the lines after one are output it must print (each line must appear; ``...``
  stands for anything).  A command must exit 0.  ``python -m minic ARGS`` runs
  in this process (``minic.cli.main``: no interpreter start-up per command);
  anything else runs in ``bash -o pipefail``.
* ```` ```python ```` — run in order in one interpreter per page (one namespace,
  so a later block uses what an earlier one defined), a separate process from
  the commands: what a page's Python registers is not seen by its commands,
  just as in a reader's shell.
* ```` ```text output ```` right after a python or console block — lines that
  block's output must contain.
* anything else (IR excerpts, ```` ```text ````) is illustration and not run.

Everything runs in one scratch folder per page, in document order.
"""
from __future__ import annotations

import contextlib
import io
import json
import re
import select
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 300
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    lang: str
    info: str            # the rest of the info string ("output" in ```text output)
    text: str
    line: int            # line of the opening fence in the page


def blocks(page: str) -> list[Block]:
    out = []
    for m in FENCE.finditer(page):
        lang, _, info = m.group(1).strip().partition(" ")
        out.append(Block(lang, info.strip(), m.group(2), page.count("\n", 0, m.start()) + 1))
    return out


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) pairs of a bash or console block."""
    out: list[tuple[str, list[str]]] = []
    if block.lang == "bash":
        text = block.text.replace("\\\n", " ")
        return [(line.strip(), []) for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    for line in block.text.replace("\\\n", " ").splitlines():
        if line.startswith("$ "):
            out.append((line[2:].strip(), []))
        elif out and line.strip() and line.strip() != "...":
            out[-1][1].append(line.strip())
    return out


def missing_lines(output: str, expected: list[str]) -> list[str]:
    """Expected lines that do not occur in ``output`` (runs of spaces count as one)."""
    squash = lambda s: re.sub(r"\s+", " ", s).strip()
    text = squash(output)
    return [e for e in expected if squash(e) not in text]


def run_command(command: str, cwd: Path) -> tuple[int, str]:
    """Exit status and output (stdout + stderr) of one documented command."""
    words = shlex.split(command)
    simple = not re.search(r"[|&;<>()$`]", command)
    if simple and words[:3] == ["python", "-m", "minic"]:
        from minic.cli import main
        out = io.StringIO()
        with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                code = main(words[3:])
            except SystemExit as e:          # argparse's usage errors
                code = e.code if isinstance(e.code, int) else 1
        return code, out.getvalue()
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    return done.returncode, done.stdout + done.stderr


# The interpreter that runs a page's python blocks: one JSON request per line on
# stdin ({"code", "name"}), one JSON reply per line on stdout ({"ok", "output"}).
RUNNER = r"""
import contextlib, io, json, sys, traceback
reply = sys.stdout
namespace = {"__name__": "__main__"}
for request in sys.stdin:
    request = json.loads(request)
    out = io.StringIO()
    ok = True
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            exec(compile(request["code"], request["name"], "exec"), namespace)
        except BaseException:
            ok = False
            traceback.print_exc()
    reply.write(json.dumps({"ok": ok, "output": out.getvalue()}) + "\n")
    reply.flush()
"""


class PythonSession:
    """One interpreter for the python blocks of one page."""

    def __init__(self, cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-W", "ignore", "-c", RUNNER], cwd=cwd, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def run(self, code: str, name: str) -> tuple[bool, str]:
        self.proc.stdin.write(json.dumps({"code": code, "name": name}) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], TIMEOUT_S)
        if not ready:
            self.close()
            return False, f"no reply in {TIMEOUT_S} s"
        line = self.proc.stdout.readline()
        if not line:
            return False, "the interpreter died"
        reply = json.loads(line)
        return reply["ok"], reply["output"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def run_page(path: Path, cwd: Path) -> list[str]:
    """Run every block of the page at ``path``; return the failures (empty: all good)."""
    failures: list[str] = []
    items = blocks(path.read_text())
    session: PythonSession | None = None
    try:
        for i, block in enumerate(items):
            where = f"{path.name}:{block.line}"
            following = items[i + 1] if i + 1 < len(items) else None
            expected = following.text.splitlines() if following and following.lang == "text" \
                and following.info == "output" else []
            expected = [e.strip() for e in expected if e.strip() and e.strip() != "..."]
            if block.lang == "python":
                session = session or PythonSession(cwd)
                ok, output = session.run(block.text, where)
                if not ok:
                    failures.append(f"{where}: python block failed:\n{output[-3000:]}")
                elif missing := missing_lines(output, expected):
                    failures.append(f"{where}: output lacks {missing}; it printed:\n{output[-3000:]}")
            elif block.lang in ("bash", "console"):
                runs = commands(block)
                for k, (command, shown) in enumerate(runs):
                    want = shown + (expected if k == len(runs) - 1 else [])
                    code, output = run_command(command, cwd)
                    if code != 0:
                        failures.append(f"{where}: `{command}` exited {code}:\n{output[-3000:]}")
                    elif missing := missing_lines(output, want):
                        failures.append(f"{where}: `{command}` output lacks {missing}; it printed:\n{output[-3000:]}")
    finally:
        if session is not None:
            session.close()
    return failures
