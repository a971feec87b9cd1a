"""Object code for another machine: the same Program, a different target triple.

Nothing in lowering or emission depends on the target; only the target
machine does (``target.py`` sets up every LLVM target when the triple is not
the host's).  The pipeline's object stage is then a relocatable ELF object holding
``minic_entry`` and its kernels, to be linked with a harness (``minic.aarch64``);
this module reads the ELF header back, so that the object stage can check that
the object really is for the machine it asked for.
"""
from __future__ import annotations

import struct

from minic.errors import UserError

# ELF e_machine numbers of the architectures a triple may start with.
ELF_MACHINES = {"aarch64": 183, "arm": 40, "x86_64": 62, "riscv64": 243, "i686": 3}
def elf_machine(obj: bytes) -> int:
    """The ``e_machine`` field of an ELF file (offset 18, in the file's own byte order)."""
    if len(obj) < 20 or obj[:4] != b"\x7fELF":
        raise UserError("not an ELF file")
    order = "<" if obj[5] == 1 else ">"            # EI_DATA: 1 little-endian, 2 big-endian
    return struct.unpack_from(f"{order}H", obj, 18)[0]


def check_machine(obj: bytes, triple: str) -> None:
    """A UserError unless ``obj`` carries the ELF machine number of ``triple``'s architecture."""
    arch = triple.split("-")[0]
    want = ELF_MACHINES.get(arch)
    if want is not None and elf_machine(obj) != want:
        raise UserError(f"LLVM emitted an object for ELF machine {elf_machine(obj)}, not {arch} ({want})")
