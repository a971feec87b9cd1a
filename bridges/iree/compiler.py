"""IREE's compile step, always in its own process: the ``iree-compile`` tool.

``compile_vmfb(text, target)`` writes the MLIR text (StableHLO, linalg on tensors,
TOSA or torch dialect: the tool detects which) to a file, runs::

    iree-compile model.mlir --iree-hal-target-device=local \\
        --iree-hal-local-target-device-backends=llvm-cpu \\
        --iree-llvmcpu-target-cpu=host -o model.vmfb

and returns the ``.vmfb`` (a VM bytecode module with the compiled kernels embedded
as ELF shared objects).  A cross build adds ``--iree-llvmcpu-target-triple``.  The
tool is the binary the ``iree-base-compiler`` wheel ships; locating it reads the
package's folder without importing it (see ``bridges/iree/__init__.py`` for why).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from minic.errors import UnsupportedError, UserError

INSTALL_HINT = "pip install iree-base-compiler==3.13.0"


@dataclass(frozen=True)
class Target:
    """A CPU to compile for: LLVM triple (None: this machine), CPU name and features."""

    name: str
    triple: str | None
    cpu: str
    features: str = ""

    def flags(self) -> list[str]:
        out = ["--iree-hal-target-device=local", "--iree-hal-local-target-device-backends=llvm-cpu",
               f"--iree-llvmcpu-target-cpu={self.cpu}"]
        if self.triple:
            out.append(f"--iree-llvmcpu-target-triple={self.triple}")
        if self.features:
            out.append(f"--iree-llvmcpu-target-cpu-features={self.features}")
        return out


HOST = Target("host", None, "host")
CORTEX_A55 = Target("cortex-a55", "aarch64-linux-gnu", "cortex-a55", "+neon")
TARGETS = {t.name: t for t in (HOST, CORTEX_A55)}


class IreeCompileError(UnsupportedError):
    """``iree-compile`` rejected the module; the message is the tool's own first error."""


@dataclass(frozen=True)
class Compiled:
    vmfb: bytes
    seconds: float                  # wall time of the iree-compile process


def tool() -> str:
    """Path of the ``iree-compile`` binary of the installed ``iree-base-compiler``."""
    spec = find_spec("iree.compiler")           # imports the namespace package ``iree`` only
    if spec is not None and spec.submodule_search_locations:
        exe = Path(list(spec.submodule_search_locations)[0]) / "_mlir_libs" / "iree-compile"
        if exe.is_file():
            return str(exe)
    found = shutil.which("iree-compile")
    if found is None:
        raise UserError(f"iree-compile not found: the IREE bridge needs it ({INSTALL_HINT})")
    return found


def first_error(stderr: str) -> str:
    """The tool's first ``error:`` line (without the file:line:col prefix), else its first line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if "error:" in ln:
            return ln[ln.index("error:"):]
    return lines[0] if lines else "(no message)"


def compile_vmfb(text: str, target: Target = HOST, extra: tuple[str, ...] = (),
                 workdir: Path | None = None) -> Compiled:
    """``text`` (an MLIR module) compiled by ``iree-compile`` for ``target``."""
    with tempfile.TemporaryDirectory(prefix="minic-iree-") as tmp:
        folder = Path(workdir or tmp)
        src, out = folder / "model.mlir", folder / "model.vmfb"
        src.write_text(text)
        t0 = time.perf_counter()
        proc = subprocess.run([tool(), str(src), *target.flags(), *extra, "-o", str(out)],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            raise IreeCompileError(f"iree-compile ({target.name}): {first_error(proc.stderr)}")
        return Compiled(out.read_bytes(), seconds)
