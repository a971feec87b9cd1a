"""What the runtime needs to call compiled code: the entry point's buffer list.

It is plain data (JSON in the compile cache), so a cached model loads without
lowering or LLVM.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from minic.codegen.module import entry_buffers
from minic.ir.loops import Program, Role, data_error
from minic.ir.types import DType
from minic.runtime.buffer_plan import Temp


@dataclass(frozen=True)
class Slot:
    name: str                              # buffer name in the program
    value: str                             # the graph value it holds
    shape: tuple                           # ints and symbolic dims
    dtype: DType
    role: Role


@dataclass(frozen=True)
class EntryLayout:
    name: str
    slots: tuple[Slot, ...]                # in the order of the entry point's pointer array
    sizes: tuple[str, ...]                 # symbols, in the order of the sizes array
    lifetimes: dict[str, tuple[int, int]]
    checks: dict[int, str] = field(default_factory=dict)     # status code -> what failed (Program.checks)
    derived: tuple[str, ...] = ()                            # derived dims, each >= 1 at a call (Program.derived)

    def role(self, role: Role) -> list[Slot]:
        return [s for s in self.slots if s.role == role]

    def temps(self) -> list[Temp]:
        return [Temp(s.name, s.shape, s.dtype, *self.lifetimes[s.name]) for s in self.role(Role.TEMP)]

    @staticmethod
    def of(program: Program) -> "EntryLayout":
        slots = tuple(Slot(b.name, program.values.get(b.name, b.name), tuple(b.shape), b.dtype, b.role)
                      for b in entry_buffers(program))
        return EntryLayout(program.name, slots, tuple(program.sizes), dict(program.lifetimes), dict(program.checks),
                           tuple(program.derived))

    def to_json(self) -> str:
        slots = [[s.name, s.value, s.shape, s.dtype.value, s.role.value] for s in self.slots]
        # json writes tuples as lists and int keys as strings: from_json turns them back
        return json.dumps({"name": self.name, "sizes": self.sizes, "lifetimes": self.lifetimes,
                           "checks": self.checks, "slots": slots, "derived": self.derived})

    @staticmethod
    def from_json(text: str) -> "EntryLayout":
        d = json.loads(text)
        slots = tuple(Slot(n, v, tuple(shape), DType(dt), Role(r)) for n, v, shape, dt, r in d["slots"])
        return EntryLayout(d["name"], slots, tuple(d["sizes"]), {k: tuple(v) for k, v in d["lifetimes"].items()},
                           {int(k): v for k, v in d.get("checks", {}).items()}, tuple(d.get("derived", ())))

    def data_error(self, code: int, value: int) -> "DataError":
        """The error a status word of ``[code, value]`` reports (code != 0)."""
        return data_error(self.name, self.checks, code, value)
