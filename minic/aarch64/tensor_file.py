"""The tensor file: how inputs reach the cross-compiled executable and outputs come back.

The format is deliberately trivial, so the C harness can parse it in a few
lines and check every number before any model code runs.  All integers are
little-endian; tensor data is C order, little-endian, with no padding:

    8 bytes   magic "MINICT01"
    u32       n_sizes,   then n_sizes x i64      symbol values (B, T, ...) in the model's order
    u32       n_tensors, then per tensor:
                  u32 dtype code (DTYPE_CODES), u32 rank, rank x i64 dims
    u32       n_temps,   then u64 arena_bytes, n_temps x u64 offsets
                                                 the buffer plan (inputs only; 0 in outputs)
    the tensors' data, one after the other

The buffer plan travels with the inputs because temporaries' sizes depend on
B and T: Python plans the arena for the shapes at hand (``minic.runtime.buffer_plan``,
the same planner the host runtime uses), and the harness checks the plan
(bounds, alignment, no overlap between buffers alive at once) before using it.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from minic.errors import UserError
from minic.ir.graph import Value
from minic.ir.interpret import bind_symbols
from minic.ir.loops import Role
from minic.ir.types import DType, TensorType
from minic.runtime.layout import EntryLayout
from minic.runtime.buffer_plan import plan

MAGIC = b"MINICT01"
DTYPE_CODES = {DType.f32: 0, DType.f16: 1, DType.i64: 2, DType.i32: 3, DType.bool: 4, DType.f64: 5,
               DType.bf16: 6, DType.i16: 7, DType.i8: 8, DType.u8: 9, DType.u16: 10,
               DType.u32: 11, DType.u64: 12}
DTYPES = {code: dtype for dtype, code in DTYPE_CODES.items()}


@dataclass
class TensorFile:
    """The decoded contents of one tensor file."""
    sizes: list[int]
    arrays: list[np.ndarray]
    arena_bytes: int = 0
    offsets: list[int] = field(default_factory=list)


def encode(f: TensorFile) -> bytes:
    """The bytes of ``f`` in the format above."""
    parts = [MAGIC, struct.pack("<I", len(f.sizes)), struct.pack(f"<{len(f.sizes)}q", *f.sizes),
             struct.pack("<I", len(f.arrays))]
    for a in f.arrays:
        parts.append(struct.pack("<II", DTYPE_CODES[DType.of(a.dtype)], a.ndim))
        parts.append(struct.pack(f"<{a.ndim}q", *a.shape))
    parts.append(struct.pack("<IQ", len(f.offsets), f.arena_bytes))
    parts.append(struct.pack(f"<{len(f.offsets)}Q", *f.offsets))
    parts += [np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes() for a in f.arrays]
    return b"".join(parts)


def decode(data: bytes, what: str = "tensor file") -> TensorFile:
    """Parse a tensor file; a malformed one is a UserError naming ``what``."""
    pos = 0

    def take(fmt: str):
        nonlocal pos
        n = struct.calcsize(fmt)
        if pos + n > len(data):
            raise UserError(f"{what}: truncated at byte {pos} (needs {n} more)")
        values = struct.unpack_from(fmt, data, pos)
        pos += n
        return values

    if take("<8s")[0] != MAGIC:
        raise UserError(f"{what}: not a minic tensor file (bad magic)")
    (n_sizes,) = take("<I")
    sizes = list(take(f"<{n_sizes}q"))
    (n_tensors,) = take("<I")
    specs = []
    for _ in range(n_tensors):
        code, rank = take("<II")
        if code not in DTYPES:
            raise UserError(f"{what}: unknown dtype code {code}")
        specs.append((DTYPES[code], take(f"<{rank}q")))
    n_temps, arena = take("<IQ")
    offsets = list(take(f"<{n_temps}Q"))
    arrays = []
    for dtype, shape in specs:
        count = 1
        for d in shape:
            count *= d                       # Python ints: no overflow on a hostile header
        nbytes = count * dtype.numpy.itemsize
        if min(shape, default=0) < 0 or pos + nbytes > len(data):
            raise UserError(f"{what}: tensor of shape {list(shape)} runs past the end of the file")
        arrays.append(np.frombuffer(data, dtype.numpy.newbyteorder("<"), count, pos).reshape(shape).copy())
        pos += nbytes
    if pos != len(data):
        raise UserError(f"{what}: {len(data) - pos} unexpected bytes after the last tensor")
    return TensorFile(sizes, arrays, arena, offsets)


def inputs_for(layout: EntryLayout, arrays: Sequence[np.ndarray]) -> TensorFile:
    """The input file for ``arrays``: symbols bound from their shapes, the arena planned for them.

    The arrays are checked here exactly as the host runtime checks them, so a
    user sees the same one-line error; the harness checks again (it may be
    given a file written by anything)."""
    slots = layout.role(Role.INPUT)
    arrays = [np.asarray(a, order="C") for a in arrays]
    try:
        env = bind_symbols([Value(s.name, TensorType(s.shape, s.dtype)) for s in slots], arrays)
    except UserError as e:                   # name the inputs as the user knows them
        message = str(e)
        for s in slots:
            message = message.replace(f"'{s.name}'", f"'{s.value}'")
        raise UserError(message) from None
    temps = layout.temps()
    buffer_plan = plan(temps, env)
    return TensorFile([env[s] for s in layout.sizes], arrays, buffer_plan.arena_bytes,
                      [buffer_plan.offsets[t.name] for t in temps])


def write(path: Path, f: TensorFile) -> Path:
    from minic.files import write_atomic
    return write_atomic(path, encode(f))


def read(path: Path) -> TensorFile:
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})") from None
    return decode(data, str(path))
