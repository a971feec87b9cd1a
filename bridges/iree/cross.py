"""Cross-compiling with IREE for an aarch64 Cortex-A55 (+neon), and checking the result.

``iree-compile`` writes a ``.vmfb`` whose kernels are an *embedded ELF* (a small
position-independent shared object that IREE's runtime loads itself, no libc).
``--iree-hal-dump-executable-binaries-to=DIR`` writes those ELFs out too; here
each one is checked to sit byte for byte inside the ``.vmfb``, to be built for
AArch64 (the ELF header's ``e_machine``), and to use NEON (disassembled with the
Debian cross binutils' ``aarch64-linux-gnu-objdump``, or ``llvm-objdump``)::

    fmla  v0.4s, v21.4s, v5.s[0]      <- a vector instruction on 4 f32 lanes
"""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from bridges.iree.backend import mlir_text
from bridges.iree.compiler import CORTEX_A55, Target, compile_vmfb
from minic.errors import UserError

# ELF e_machine values (the ELF gABI) of the CPUs this bridge builds for.
MACHINES = {183: "AArch64", 62: "x86-64"}
# A NEON (Advanced SIMD) operand: a vector register with an arrangement (v0.4s, v3.16b)
# or one lane of one (v5.s[0]).
NEON_OPERAND = re.compile(r"\bv\d+\.(?:\d+[bhsd]|[bhsd]\[)")
OBJDUMPS = ("aarch64-linux-gnu-objdump", "llvm-objdump")


def elf_machine(data: bytes) -> str:
    """The machine an ELF file is built for, by name."""
    if data[:4] != b"\x7fELF":
        raise UserError("not an ELF file (no \\x7fELF magic)")
    little = data[5] == 1                                  # EI_DATA: 1 little-, 2 big-endian
    (machine,) = struct.unpack_from("<H" if little else ">H", data, 18)
    return MACHINES.get(machine, f"e_machine {machine}")


def objdump() -> str:
    for name in OBJDUMPS:
        if shutil.which(name):
            return name
    raise UserError("no aarch64 disassembler: install Debian's binutils-aarch64-linux-gnu "
                    "(comes with gcc-aarch64-linux-gnu) or llvm")


def disassemble(path: Path) -> list[str]:
    """The instruction lines of ``path``'s code."""
    proc = subprocess.run([objdump(), "-d", str(path)], capture_output=True, text=True, check=True)
    return [ln.strip() for ln in proc.stdout.splitlines() if re.match(r"\s+[0-9a-f]+:\s", ln)]


@dataclass
class Executable:
    path: Path
    machine: str
    instructions: int
    neon: list[str] = field(default_factory=list)       # instruction lines with NEON operands
    embedded: bool = False                                # found byte for byte in the .vmfb


@dataclass
class CrossBuild:
    vmfb: Path
    target: Target
    compile_s: float
    executables: list[Executable]

    @property
    def ok(self) -> bool:
        return bool(self.executables) and all(
            e.machine == "AArch64" and e.embedded for e in self.executables) and \
            any(e.neon for e in self.executables)

    def summary(self) -> str:
        lines = [f"{self.vmfb} ({self.vmfb.stat().st_size} bytes, {self.target.name} "
                 f"{self.target.triple} {self.target.features}, iree-compile {self.compile_s:.1f} s)"]
        for e in self.executables:
            lines.append(f"  {e.path.name}: ELF {e.machine}, {'embedded in' if e.embedded else 'NOT in'} "
                         f"the .vmfb, {e.instructions} instructions, {len(e.neon)} with NEON operands")
            fused = [ln for ln in e.neon if "fmla" in ln]          # the multiply-adds, if any
            lines += [f"      {ln}" for ln in (fused or e.neon)[:3]]
        lines.append("ok: AArch64 code with NEON" if self.ok else "FAILED: not AArch64 NEON code")
        return "\n".join(lines)


def cross_build(module, inputs: Sequence[np.ndarray], out_dir: Path, name: str,
                via: str = "stablehlo", target: Target = CORTEX_A55) -> CrossBuild:
    """Build ``module`` for ``target`` into ``out_dir`` (``NAME.vmfb`` and ``executables/``)
    and check what came out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dump = out_dir / "executables"
    if dump.exists():
        shutil.rmtree(dump)
    compiled = compile_vmfb(mlir_text(module, inputs, via), target,
                            extra=(f"--iree-hal-dump-executable-binaries-to={dump}",))
    vmfb = out_dir / f"{name}.vmfb"
    vmfb.write_bytes(compiled.vmfb)
    executables = []
    for so in sorted(dump.glob("*.so")):
        data = so.read_bytes()
        code = disassemble(so)
        executables.append(Executable(so, elf_machine(data), len(code),
                                      [ln for ln in code if NEON_OPERAND.search(ln)], data in compiled.vmfb))
    return CrossBuild(vmfb, target, compiled.seconds, executables)
