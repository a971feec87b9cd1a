"""Deploy step: cross-compile for a 64-bit Arm edge CPU (Cortex-A55) without one.

The seed used ``target="llvm -mcpu=cortex-a55"``; today targets are dicts and
the triple is explicit.  LLVM (inside TVM) emits AArch64 machine code on any
host; only the final link into a shared library needs an AArch64 toolchain:

* with ``aarch64-linux-gnu-gcc`` (Debian: gcc-aarch64-linux-gnu) on PATH:
  ``model.so``, a shared library the TVM runtime on the board loads;
* without it: ``model.tar``, the object files (``lib0.o`` ...) to link on the
  board or in a later build.

Then two checks that need no Arm device: every ELF file is for machine
AArch64 (e_machine = 183), and the generated code uses NEON (Advanced SIMD):
instructions on vector registers such as ``fadd v0.4s, v1.4s, v2.4s``.
"""
from __future__ import annotations

import re
import struct
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from minic import tools
from minic.errors import UserError

AARCH64_TARGET: dict[str, Any] = {"kind": "llvm", "mtriple": "aarch64-linux-gnu",
                                  "mcpu": "cortex-a55", "mattr": ["+neon"]}
CROSS_CC = "aarch64-linux-gnu-gcc"

EM_AARCH64 = 183
_MACHINES = {3: "x86", 40: "ARM (32-bit)", 62: "x86-64", 183: "AArch64", 243: "RISC-V"}

# an instruction whose operand is a NEON vector register with an arrangement: v3.4s, v0.16b, ...
_NEON = re.compile(r"^\s+([a-z][a-z0-9.]*)\s+v\d+\.(?:16b|8b|8h|4h|4s|2s|2d|1d)\b", re.MULTILINE)


@dataclass
class CrossReport:
    """What was written and what the checks found."""

    path: Path
    kind: str                                          # "shared library" or "object archive"
    elf_machines: dict[str, str] = field(default_factory=dict)   # file -> machine name
    neon: Counter = field(default_factory=Counter)     # NEON mnemonic -> count in the assembly

    @property
    def all_aarch64(self) -> bool:
        return bool(self.elf_machines) and all(m == "AArch64" for m in self.elf_machines.values())

    def summary(self) -> str:
        lines = [f"wrote {self.path} ({self.kind})"]
        for name, machine in self.elf_machines.items():
            lines.append(f"  {name}: ELF machine {machine}")
        total = sum(self.neon.values())
        top = ", ".join(f"{m} x{n}" for m, n in self.neon.most_common(6))
        lines.append(f"  NEON instructions: {total}" + (f" ({top})" if top else ""))
        return "\n".join(lines)


def find_cross_compiler() -> str | None:
    """The AArch64 C compiler on PATH, or None."""
    return tools.find(CROSS_CC)


def cross_compile(mod: Any, out_dir: str | Path, name: str = "model", *, target: dict[str, Any] | None = None,
                  archive_only: bool = False) -> CrossReport:
    """Build an optimized module for ``target`` (default Cortex-A55), export it, check it."""
    from bridges.tvm.build import as_target, build

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tvm_target = as_target(target or AARCH64_TARGET)
    executable = build(mod, tvm_target)
    compiler = None if archive_only else find_cross_compiler()
    if compiler is not None:
        from tvm.support import cc
        report = CrossReport(out_dir / f"{name}.so", "shared library")
        executable.export_library(str(report.path), fcompile=cc.cross_compiler(compiler))
        report.elf_machines[report.path.name] = machine_name(report.path.read_bytes())
    else:
        from tvm.support import tar
        report = CrossReport(out_dir / f"{name}.tar", "object archive")
        executable.export_library(str(report.path), fcompile=tar.tar)
        with tarfile.open(report.path) as archive:
            for member in archive.getmembers():
                if member.name.endswith(".o"):
                    data = archive.extractfile(member).read()
                    report.elf_machines[member.name] = machine_name(data)
    report.neon = neon_instructions(assembly(executable))
    return report


def machine_name(elf: bytes) -> str:
    """The machine an ELF file is for, read from its header (e_machine at byte 18)."""
    if elf[:4] != b"\x7fELF":
        raise UserError("not an ELF file")
    little = elf[5] == 1                                  # EI_DATA: 1 little-, 2 big-endian
    (machine,) = struct.unpack("<H" if little else ">H", elf[18:20])
    return _MACHINES.get(machine, f"unknown ({machine})")


def assembly(executable: Any) -> str:
    """The assembly LLVM generated for the kernels (the imported LLVM module)."""
    texts = [m.inspect_source("asm") for m in executable.mod.imports if m.kind == "llvm"]
    return "\n".join(texts)


def neon_instructions(asm: str) -> Counter:
    """Count instructions that operate on NEON vector registers, by mnemonic."""
    return Counter(match.group(1) for match in _NEON.finditer(asm))
