"""Intel AMX's tile data: asked of Linux once per process, before any tile instruction runs.

AMX (Advanced Matrix Extensions, Sapphire Rapids and later) adds eight *tile* registers
of up to 16 rows of 64 bytes each (8 KiB in all) and instructions that multiply whole
tiles: ``tdpbusd`` adds to each i32 of a 16 x 16 tile the dot product of a row of u8
bytes and a column of i8 bytes, 16 x 16 x 64 multiply-adds in one instruction (vpdpbusd
does 16 x 4).  minic/schedule/tiles.py builds the int8 matmul on them.

That much register state would make every context switch save 8 KiB more, so Linux keeps
it switched off (XFD, "extended feature disable") until a process asks: without asking,
the first tile instruction traps and the process dies of SIGILL.  The request is one
``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`` system call, which covers every
thread of the process.  minic makes it before it decides to emit tile code for this
machine, and again (a no-op) before it loads such code; where it fails (an older kernel,
a VM that refuses, another architecture) the int8 matmul runs on AVX512-VNNI instead.
"""
from __future__ import annotations

import ctypes
import functools
import platform
import sys

ARCH_PRCTL = 158                  # the system call's number on x86-64 Linux
ARCH_GET_XCOMP_PERM = 0x1022      # the features this process may use, as a bit mask
ARCH_REQ_XCOMP_PERM = 0x1023      # ask for one more
XFEATURE_XTILEDATA = 18           # the tiles' data (XTILECFG, 17, needs no asking)


@functools.cache
def tile_data_granted() -> bool:
    """Whether this process may run tile instructions: asked of Linux on the first call (the
    answer does not change for the life of the process).  False off x86-64 Linux."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        if libc.syscall(ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0:
            return False
        mask = ctypes.c_uint64(0)
        if libc.syscall(ARCH_PRCTL, ARCH_GET_XCOMP_PERM, ctypes.byref(mask)) != 0:
            return False
        return bool(mask.value >> XFEATURE_XTILEDATA & 1)
    except (OSError, AttributeError):          # no libc to call: no tiles
        return False
