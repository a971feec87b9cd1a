"""Run the fenced blocks of a Markdown page, so that the docs cannot rot.

* ```` ```bash ```` — every line is a command (``\\`` continues a line; ``#`` lines
  are comments); its output is not shown.  ```` ```console ```` — lines starting
  with ``$ `` are commands, the lines after one are its WHOLE output.  A command
  must exit 0.  ``python -m minic ARGS`` runs in this process (``minic.cli.main``:
  no interpreter start-up per command); anything else runs in ``bash -o pipefail``.
* ```` ```python ```` — run in order in one interpreter per page (one namespace,
  so a later block uses what an earlier one defined), a separate process from
  the commands: what a page's Python registers is not seen by its commands,
  just as in a reader's shell.  A block that prints must be followed by a
  ```` ```text output ```` block: its WHOLE output.
* Output is compared line by line after masking what changes from run to run
  (times such as ``12.3 ms``/``4 s``/``80 GFLOPS``, ``1.5x`` ratios, measured errors such as
  ``2.98e-07`` (their digits follow the host's BLAS kernels), hex addresses,
  temporary and scratch folders, the width of table rules) and squashing runs of spaces; blank lines do not
  count.  A line ``...`` stands for any number of lines, ``...`` inside a line for
  any text.  Progress lines (``[2/6] verify: ...``) count only in a block that
  shows one.  A line that is a bare boolean (``True``, ``minic True``) fails: show
  the real thing.
* ```` ```python source=minic/passes/reshapes.py:reshape_pair ```` — a quote of the code:
  not run, its body must be the named symbol's source as it is in the file (a function or
  class with its decorators and docstring, ``Class.method``, a module-level assignment such
  as ``PASSES``, or ``__doc__``: the module's docstring, where a design's reasons often live; ``source=PATH`` alone quotes a whole small file), found with ``ast``.  So a
  page shows the code that does the work and cannot drift from it: when the code changes, the
  test fails until ``python tests/docs/docrun.py --sources PAGE`` writes the new text in.
* ```` ```console not-run: REASON ```` (or ``python``/``bash``/``text``/...) is shown,
  not run: an expensive command, a fragment, an excerpt of a long benchmark's
  output; the reason is required.  Every other block is run: a fence of any
  other kind (```` ```text ````, an unnamed one) fails, so no excerpt in a page
  can drift from the command that makes it.

Everything runs in one scratch folder per page, in document order.
``python tests/docs/docrun.py PAGE...`` runs pages and prints what fails;
``--update`` writes each failing block's real output (and each drifted quote's
source) into the page instead (a long output keeps its head and tail around a
``...`` line, a long line its head before `` ...``); ``--sources`` only refreshes
the quotes, running nothing.
"""
from __future__ import annotations

import ast
import contextlib
import io
import textwrap
import json
import re
import select
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 300
ROOT = Path(__file__).resolve().parents[2]       # where a quote's path starts
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass(frozen=True)
class Block:
    lang: str
    info: str            # the rest of the info string ("output" in ```text output)
    text: str
    line: int            # line of the opening fence in the page
    start: int = 0       # where the body starts and ends in the page (characters)
    end: int = 0


def blocks(page: str) -> list[Block]:
    out = []
    for m in FENCE.finditer(page):
        lang, _, info = m.group(1).strip().partition(" ")
        out.append(Block(lang, info.strip(), m.group(2), page.count("\n", 0, m.start()) + 1,
                         m.start(2), m.end(2)))
    return out


def quoted(block: Block) -> str | None:
    """The ``PATH[:SYMBOL]`` a quote block names (``source=...`` in its info string), or None."""
    words = block.info.split()
    found = [w[len("source="):] for w in words if w.startswith("source=")]
    return found[0] if found else None


def _symbol_node(tree: ast.Module, symbol: str) -> ast.AST | None:
    """The definition of ``symbol`` (``name`` or ``Class.name``) in a module's syntax tree."""
    scope: list[ast.stmt] = tree.body
    node = None
    if symbol == "__doc__":                          # the module's docstring
        first = scope[0] if scope else None
        docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str)
        return first if docstring else None
    for part in symbol.split("."):
        node = None
        for item in scope:
            names = []
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names = [item.name]
            elif isinstance(item, ast.Assign):
                names = [t.id for t in item.targets if isinstance(t, ast.Name)]
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                names = [item.target.id]
            if part in names:
                node = item          # the last definition wins, as at import time
        if node is None:
            return None
        scope = node.body if isinstance(node, ast.ClassDef) else []
    return node


def source_of(where: str, root: Path | None = None) -> str:
    """The text a quote of ``PATH[:SYMBOL]`` must show: the symbol's lines as written (its
    decorators and comments inside included, dedented), or the whole file.  A missing file or
    symbol raises LookupError."""
    path, _, symbol = where.partition(":")
    file = (root or ROOT) / path
    if not file.is_file():
        raise LookupError(f"no file {path}")
    text = file.read_text()
    if not symbol:
        return text
    node = _symbol_node(ast.parse(text, path), symbol)
    if node is None:
        raise LookupError(f"{path} defines no '{symbol}'")
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    lines = text.splitlines()[first - 1:node.end_lineno]
    return textwrap.dedent("\n".join(lines)) + "\n"


def console_items(block: Block) -> list[tuple[str, list[str]]]:
    """(command as written, its output lines as written) of a console block."""
    out: list[tuple[str, list[str]]] = []
    continued = False
    for line in block.text.splitlines():
        if continued:
            out[-1] = (out[-1][0] + "\n" + line, out[-1][1])
        elif line.startswith("$ "):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
        continued = (continued or line.startswith("$ ")) and line.endswith("\\") and not out[-1][1]
    return out


def commands(block: Block) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) pairs of a bash or console block."""
    if block.lang == "bash":
        text = block.text.replace("\\\n", " ")
        return [(line.strip(), []) for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(written[2:].replace("\\\n", " ").strip(), shown) for written, shown in console_items(block)]


# What changes from run to run: times, rates, ratios, addresses, folders.
UNIT_KIND = {"ns": "time", "us": "time", "µs": "time", "ms": "time", "s": "time", "min": "time",
             "GFLOPS": "rate", "GFLOP/s": "rate"}
MASKS = [
    (re.compile(r"(?:(?<![\w.])[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?|\.\.\.)\s?(ns|us|µs|ms|s|min|GFLOPS|GFLOP/s|GB/s|x)(?![\w/])"),
     lambda m: "#" + UNIT_KIND.get(m.group(1), m.group(1))),       # 1.99 s and 880 ms are both a time
    (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x#"),
    (re.compile(r"/tmp/[^\s'\"):,]*"), "<tmp>"),
    (re.compile(r"[-─━═]{3,}"), "---"),           # table rules, as wide as the widest cell
    # Small measured errors printed as d.dde-NN (or 0.00e+00): their digits follow the kernels the
    # host's BLAS picks for numpy and torch (OPENBLAS_CORETYPE moves them), like times.  Stated
    # bounds (1e-4), large errors (3.1e+02) and IR constants (0.000000e+00) are compared.
    (re.compile(r"(?<![\w.])(?:\d\.\d{1,3}e-\d\d|0\.0{1,3}e\+00)(?![\w.])"), "#err"),
]
BOOLEAN = re.compile(r"(\S+ )?(True|False)")
PROGRESS = re.compile(r"\[\d+/\d+(?: \S+)?\] ")         # minic/progress.py's lines where stdout is no terminal


def normal(line: str, cwd: Path | None = None) -> str:
    """A line as compared: folders and run-to-run numbers masked, runs of spaces squashed."""
    if cwd is not None:
        line = line.replace(str(cwd), "/tmp/scratch")
    for pattern, repl in MASKS:
        line = pattern.sub(repl, line)
    return re.sub(r"\s+", " ", line).strip()


def mismatch(output: str, shown: list[str], cwd: Path | None = None) -> str | None:
    """Why ``output`` is not what a block shows (``None``: it is), see the module's rules."""
    got = [normal(line, cwd) for line in output.splitlines()]
    got = [line for line in got if line]
    if bare := [line for line in got if BOOLEAN.fullmatch(line)]:
        return f"prints a bare boolean {bare[0]!r}: print the real thing"
    want = [normal(line) for line in shown]
    if not any(PROGRESS.match(line) for line in want):       # shown only where a page is about them
        got = [line for line in got if not PROGRESS.match(line)]
    pattern = "".join("(?:[^\n]*\n)*?" if line == "..." else
                      "[^\n]*".join(map(re.escape, line.split("..."))) + "\n" for line in want if line)
    if re.fullmatch(pattern, "".join(line + "\n" for line in got)):
        return None
    if not any(want):
        return "prints output that the page does not show"
    return "output differs from what the page shows"


def tree_env() -> dict[str, str]:
    """The environment of a page's processes: this tree's code first on the path, so that a page
    runs the code beside it (not another checkout an editable install points to)."""
    import os
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(ROOT) + (os.pathsep + path if path else "")}


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
                          timeout=TIMEOUT_S, env=tree_env())
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
        self.proc = subprocess.Popen([sys.executable, "-W", "ignore", "-c", RUNNER], cwd=cwd, text=True, env=tree_env(),
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


MAX_SHOWN = 60      # longer outputs are written back as head, "...", tail
MAX_WIDTH = 200     # a longer line (weights in hex) is written back cut, ending in " ..."


def cut(line: str) -> str:
    if len(line) <= MAX_WIDTH:
        return line
    head = line[:MAX_WIDTH - 40]
    return head[:head.rfind(" ")] + " ..." if " " in head else head + "..."


def shown_text(output: str, cwd: Path, progress: bool = False) -> list[str]:
    """The lines ``--update`` writes for ``output`` (progress lines only with ``progress``)."""
    lines = [cut(line.rstrip().replace(str(cwd), "/tmp/scratch")) for line in output.strip("\n").splitlines()
             if progress or not PROGRESS.match(line.strip())]
    if len(lines) > MAX_SHOWN:
        lines = lines[:MAX_SHOWN - 12] + ["..."] + lines[-10:]
    return lines


@dataclass
class Edit:
    """Replace page[start:end] with text (``--update``)."""
    start: int
    end: int
    text: str


def run_page(path: Path, cwd: Path, edits: list[Edit] | None = None) -> list[str]:
    """Run every block of the page at ``path``; return the failures (empty: all good).

    With ``edits`` (a list), also collect the edits that make the page show the real output."""
    failures: list[str] = []
    items = blocks(path.read_text())
    session: PythonSession | None = None
    try:
        for i, block in enumerate(items):
            where = f"{path.name}:{block.line}"
            following = items[i + 1] if i + 1 < len(items) else None
            output_block = following if following and following.lang == "text" and following.info == "output" \
                else None
            if (source := quoted(block)) is not None:
                try:
                    want = source_of(source)
                except LookupError as e:
                    failures.append(f"{where}: a quote names what the code no longer has ({e})")
                    continue
                if block.text != want:
                    failures.append(f"{where}: the quote of {source} is not the code as it is now; "
                                    f"refresh it: python tests/docs/docrun.py --sources {path}")
                    if edits is not None:
                        edits.append(Edit(block.start, block.end, want))
            elif block.info.startswith("not-run"):
                if not block.info.partition(":")[2].strip():
                    failures.append(f"{where}: a not-run block says why (```{block.lang} not-run: REASON)")
            elif block.lang == "text" and block.info == "output":
                before = items[i - 1] if i else None        # (after a console block: reported there)
                if not before or not (before.lang in ("bash", "console") or
                                      before.lang == "python" and not before.info):
                    failures.append(f"{where}: a text output block follows the python block it is the output of")
            elif block.lang not in ("python", "bash", "console"):
                failures.append(f"{where}: a ```{block.lang} block is neither run nor marked: show a command's "
                                f"output under it (console), or say why not (```{block.lang or 'text'} not-run: REASON)")
            elif block.lang == "python":
                session = session or PythonSession(cwd)
                ok, output = session.run(block.text, where)
                if not ok:
                    failures.append(f"{where}: python block failed:\n{output[-3000:]}")
                    continue
                shown = output_block.text.splitlines() if output_block else []
                if why := mismatch(output, shown, cwd):
                    failures.append(f"{where}: {why}; it printed:\n{output[-3000:]}")
                    if edits is not None and not why.startswith("prints a bare"):
                        text = "\n".join(shown_text(output, cwd)) + "\n"
                        edits.append(Edit(output_block.start, output_block.end, text) if output_block else
                                     Edit(block.end + 3, block.end + 3, "\n\n```text output\n" + text + "```"))
            elif block.lang in ("bash", "console"):
                if output_block:
                    failures.append(f"{where}: a {block.lang} block's output goes inside it, after its `$` line")
                written = console_items(block) if block.lang == "console" else []
                new: list[str] = []
                changed = False
                for k, (command, shown) in enumerate(commands(block)):
                    code, output = run_command(command, cwd)
                    if code != 0:
                        failures.append(f"{where}: `{command}` exited {code}:\n{output[-3000:]}")
                    elif block.lang == "console" and (why := mismatch(output, shown, cwd)):
                        failures.append(f"{where}: `{command}` {why}; it printed:\n{output[-3000:]}")
                        if not why.startswith("prints a bare"):
                            progress = any(PROGRESS.match(line) for line in shown)
                            shown, changed = shown_text(output, cwd, progress), True
                    if written:
                        new += [written[k][0]] + shown
                if edits is not None and changed:
                    edits.append(Edit(block.start, block.end, "\n".join(new) + "\n"))
    finally:
        if session is not None:
            session.close()
    return failures


def refresh_sources(page: Path) -> int:
    """Write the code as it is now into each drifted quote of ``page``; how many changed."""
    text = page.read_text()
    edits = []
    for block in blocks(text):
        if (source := quoted(block)) is not None:
            want = source_of(source)          # a quote of a symbol that is gone: the error says which
            if block.text != want:
                edits.append(Edit(block.start, block.end, want))
    if edits:
        page.write_text(apply(text, edits))
    return len(edits)


def apply(page: str, edits: list[Edit]) -> str:
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        page = page[:e.start] + e.text + page[e.end:]
    return page


def main(argv: list[str] | None = None) -> int:
    import argparse
    import tempfile
    parser = argparse.ArgumentParser(description="Run the blocks of Markdown pages (see the module's doc).")
    parser.add_argument("pages", nargs="+", type=Path)
    parser.add_argument("--update", action="store_true", help="write the real output into each failing block")
    parser.add_argument("--sources", action="store_true",
                        help="only write the code as it is now into each drifted source= quote (runs nothing)")
    args = parser.parse_args(argv)
    if args.sources:
        for page in args.pages:
            count = refresh_sources(page)
            print(f"{page}: {count} quote(s) refreshed")
        return 0
    bad = 0
    for page in args.pages:
        text = page.read_text()
        with tempfile.TemporaryDirectory() as scratch:
            edits: list[Edit] = []
            failures = run_page(page, Path(scratch), edits if args.update else None)
        for f in failures:
            print(f"{f}\n", file=sys.stderr)
        if args.update and edits:
            if page.read_text() != text:
                print(f"{page} changed while it ran; not updated", file=sys.stderr)
                return 1
            page.write_text(apply(text, edits))
            print(f"{page}: {len(edits)} block(s) updated")
        bad += len(failures)
        print(f"{page}: {len(failures)} failure(s)")
    return 1 if bad and not args.update else 0


if __name__ == "__main__":
    sys.exit(main())
