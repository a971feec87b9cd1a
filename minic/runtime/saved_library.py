"""One compiled model's saved folder: the library, its weights, its manifest (minic/runtime/saved.py
shows the folder and the public ``save`` / ``load_compiled``).  ``write_compiled`` writes one,
``SavedModel`` runs one, ``read_manifest`` checks one before anything is loaded; a model saved as
parts (minic/runtime/saved_split.py) is a folder of these.

Importing this module imports numpy and minic's IR types, never the compiler:
LLVM is reached only by ``write_compiled`` (for the CPU's name).
"""
from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np

import minic
from minic.errors import UserError
from minic.ir.aligned import ALIGN, aligned_empty
from minic.ir.types import DType, dim_eval
from minic.limits import CHECK_ABOVE, array_bytes, contiguous, ensure_fits
from minic.runtime.buffer_plan import Temp, plan

FORMAT = 1
LIBRARY, WEIGHTS, MANIFEST = "model.so", "weights.bin", "manifest.json"
ENTRY, POOL_STOP, STATUS = "minic_entry", "minic_pool_stop", "minic_status"


def machine() -> str:
    return os.uname().machine


# --- saving (needs the compiler's result, and LLVM for the CPU's name) ---------------

def write_compiled(model, folder: Path) -> None:
    """A CompiledModel's library, weights and manifest, written into the empty ``folder``."""
    layout, code = model.layout, model._code
    if code.target.triple:
        raise UserError(f"minic.save writes host libraries; this model was built for '{code.target.triple}'")
    (folder / "model.o").write_bytes(code.object)
    _link(folder / "model.o", folder / LIBRARY)
    (folder / "model.o").unlink()
    slots = layout.role(_role("const"))
    constants = write_arrays(folder / WEIGHTS, [(s.value, s.dtype, a) for s, a in zip(slots, model._constants)])
    manifest = _manifest(layout, constants, code.target)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))


def _link(obj: Path, library: Path) -> None:
    import subprocess
    from minic import tools
    cc = tools.require("cc", "gcc", "saving a compiled model (linking its shared library)", "gcc", "clang")
    # The JIT's object is not position-independent (its code model is the JIT's): the
    # library carries text relocations, which the dynamic loader applies once at load.
    done = subprocess.run([cc, "-shared", "-o", str(library), str(obj), "-Wl,-z,notext", "-lm", "-lpthread"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise UserError(f"linking {library.name} with {cc} failed: {' '.join(done.stderr.split())[:300]}")


def write_arrays(path: Path, arrays: list[tuple[str, DType, np.ndarray]]) -> list[dict[str, Any]]:
    """``arrays`` (name, dtype, data) written one after another into ``path``, each on an ``ALIGN``-byte
    boundary; their entries (name, dtype, shape, offset) for the manifest."""
    entries, offset = [], 0
    with open(path, "wb") as f:
        for name, dtype, a in arrays:
            pad = -offset % ALIGN
            f.write(b"\0" * pad)
            offset += pad
            f.write(np.ascontiguousarray(a).tobytes())
            entries.append({"name": name, "dtype": dtype.value, "shape": list(a.shape), "offset": offset})
            offset += a.nbytes
    return entries


def read_arrays(path: Path, entries: list[dict[str, Any]]) -> list[np.ndarray]:
    """The arrays that ``write_arrays`` wrote, mapped (not read) from ``path``."""
    weights = np.memmap(path, np.uint8, mode="r") if entries else None
    return [np.ndarray(tuple(c["shape"]), DType(c["dtype"]).numpy, weights, c["offset"]) for c in entries]


def _manifest(layout, constants: list[dict], target) -> dict[str, Any]:
    import llvmlite.binding as llvm
    from minic.options import tiles_bf16, tiles_u8s8
    features = {f for f, on in llvm.get_host_cpu_features().items() if on}
    slots = [[s.name, s.value, list(s.shape), s.dtype.value, s.role.value] for s in layout.slots]
    io = {role + "s": [{"name": s.value, "dtype": s.dtype.value, "shape": list(s.shape)}
                       for s in layout.role(_role(role))] for role in ("input", "output")}
    static = not layout.sizes
    buffer_plan = plan(layout.temps(), {}) if static else None
    return {
        "format": FORMAT, "minic": minic.__version__, "name": layout.name,
        "machine": machine(), "cpu": target.cpu or llvm.get_host_cpu_name(),
        # The features LLVM compiled for that the kernel also reports: what a CPU must have to run it.
        "cpu_features": sorted(features & cpu_flags()) if not target.features else sorted(
            f[1:] for f in target.features.split(",") if f.startswith("+")),
        "threads": target.threads,
        "tiles": tiles_u8s8(target) or tiles_bf16(target),     # AMX tile code: Linux must grant the tiles where it loads
        **io, "sizes": list(layout.sizes), "constants": constants,
        "slots": slots, "lifetimes": {k: list(v) for k, v in layout.lifetimes.items()},
        "checks": {str(k): v for k, v in layout.checks.items()},
        "plan": {"arena_bytes": buffer_plan.arena_bytes, "offsets": buffer_plan.offsets} if static else None,
    }


def _role(name: str):
    from minic.ir.loops import Role
    return Role(name)


# --- loading: ctypes and numpy only --------------------------------------------------

def cpu_flags() -> set[str]:
    """This CPU's feature flags as the kernel reports them (x86 ``flags``, Arm ``Features``),
    spelt as LLVM spells features (``sse4_2`` -> ``sse4.2``, ``avx512_bf16`` -> ``avx512bf16``)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return {f.replace("_", ".") if f.startswith("sse4") else f.replace("avx512_", "avx512")
                    for f in value.split()}
    return set()


def read_manifest(folder: Path) -> dict[str, Any]:
    """``folder``'s manifest, checked: its format, the minic that saved it, the machine and the
    CPU features it was built for (a one-line UserError for each)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        raise UserError(f"{folder}: not a saved minic model (no {MANIFEST})") from None
    except (OSError, ValueError) as e:
        raise UserError(f"{folder / MANIFEST}: unreadable ({e})") from None
    _check(folder, manifest)
    return manifest


def in_order(model: str, names: list[str], arrays: tuple, named: dict) -> tuple:
    """A saved model's inputs given in order, or all by name."""
    if not named:
        return arrays
    if arrays or set(named) != set(names):
        raise UserError(f"{model}: give the inputs in order or by name ({', '.join(names)}), "
                        f"not {len(arrays)} in order and {', '.join(named) or 'none'} by name")
    return tuple(named[n] for n in names)


def _check(folder: Path, m: dict) -> None:
    if m.get("format") != FORMAT:
        raise UserError(f"{folder}: saved in format {m.get('format')}; this minic reads format {FORMAT}")
    if m.get("minic") != minic.__version__:
        raise UserError(f"{folder}: saved by minic {m.get('minic')}; this is minic {minic.__version__}: "
                        "compile and save it again")
    if m.get("machine") != machine():
        raise UserError(f"{folder}: built for {m.get('machine')} ({m.get('cpu')}); this machine is {machine()}")
    from minic.amx import tile_data_granted
    if m.get("tiles") and not tile_data_granted():
        raise UserError(f"{folder}: its matmuls run on AMX tiles, which Linux does not let this "
                        "process use (arch_prctl ARCH_REQ_XCOMP_PERM refused): compile it again here")
    missing = sorted(set(m.get("cpu_features", ())) - cpu_flags())
    if missing:
        raise UserError(f"{folder}: built for a CPU with {', '.join(missing[:8])}"
                        f"{' ...' if len(missing) > 8 else ''} ({m.get('cpu')}), which this CPU lacks: "
                        "compile it again here")


class SavedModel:
    """A saved model: call it like a CompiledModel (numpy in, numpy out; any thread)."""

    def __init__(self, folder: Path, manifest: dict[str, Any] | None = None) -> None:
        manifest = read_manifest(folder) if manifest is None else manifest
        self.folder, self.manifest, self.name = folder, manifest, manifest["name"]
        slots = manifest["slots"]
        by_role = {r: [s for s in slots if s[4] == r] for r in ("input", "output", "const", "temp")}
        self._inputs = [(s[1], tuple(s[2]), DType(s[3]).numpy) for s in by_role["input"]]
        self._outputs = [(tuple(s[2]), DType(s[3]).numpy) for s in by_role["output"]]
        self._temps = [Temp(s[0], tuple(s[2]), DType(s[3]), *manifest["lifetimes"][s[0]]) for s in by_role["temp"]]
        self._sizes = manifest["sizes"]
        self._checks = {int(k): v for k, v in manifest["checks"].items()}
        self._constants = read_arrays(folder / WEIGHTS, manifest["constants"])
        self._constant_pointers = [a.ctypes.data for a in self._constants]
        try:
            self._lib = ctypes.CDLL(str((folder / LIBRARY).resolve()))
        except OSError as e:
            raise UserError(f"{folder / LIBRARY}: cannot be loaded ({e})") from None
        self._entry = self._lib[ENTRY]
        self._entry.restype, self._entry.argtypes = None, [ctypes.c_void_p] * 3
        try:          # a library whose data checks report in a global of its own (older entry points)
            self._global_status = (ctypes.c_int64 * 2).in_dll(self._lib, STATUS)
        except ValueError:
            self._global_status = None
        self._plans: dict[tuple, Any] = {}
        self._plan_lock = threading.Lock()
        if hasattr(self._lib, POOL_STOP):          # join the code's worker threads when the model goes
            stop = self._lib[POOL_STOP]
            stop.restype, stop.argtypes = None, []
            weakref.finalize(self, stop)

    def _bind(self, arrays: list[np.ndarray]) -> dict[str, int]:
        """The symbols' values from the input shapes; every mismatch a UserError naming the input."""
        if len(arrays) != len(self._inputs):
            raise UserError(f"{self.name} takes {len(self._inputs)} inputs, got {len(arrays)}")
        env: dict[str, int] = {}
        for a, (name, shape, dtype) in zip(arrays, self._inputs):
            want = ", ".join(map(str, shape))
            if a.dtype != dtype or a.ndim != len(shape):
                raise UserError(f"{self.name}: input '{name}' must be {np.dtype(dtype)}[{want}], got "
                                f"{a.dtype}{list(a.shape)}")
            for d, n in zip(shape, a.shape):
                if isinstance(d, str) and d.isidentifier():
                    if env.setdefault(d, n) != n:
                        raise UserError(f"{self.name}: input '{name}' has {d}={n}, but an earlier input has "
                                        f"{d}={env[d]}")
        for a, (name, shape, dtype) in zip(arrays, self._inputs):
            if tuple(dim_eval(d, env) for d in shape) != a.shape:
                raise UserError(f"{self.name}: input '{name}' must have shape [{', '.join(map(str, shape))}] "
                                f"(with {env}), got {list(a.shape)}")
        return env

    def _offsets(self, env: dict[str, int]) -> tuple[int, list[int]]:
        key = tuple(sorted(env.items()))
        known = self._plans.get(key)
        if known is None:
            static = self.manifest["plan"]
            if static is not None:
                arena, offsets = static["arena_bytes"], static["offsets"]
            else:
                p = plan(self._temps, env)
                arena, offsets = p.arena_bytes, p.offsets
            ensure_fits(arena, f"the temporaries of {self.name}" + (f" for {env}" if env else ""))
            known = (arena, [offsets[t.name] for t in self._temps])
            with self._plan_lock:
                if len(self._plans) >= 4:
                    self._plans.pop(next(iter(self._plans)))
                self._plans[key] = known
        return known

    @property
    def input_names(self) -> list[str]:
        return [name for name, _, _ in self._inputs]

    def __call__(self, *arrays: np.ndarray, **named: np.ndarray):
        """Inputs in order, or by name (``model(**np.load("example_inputs.npz"))``)."""
        arrays = contiguous(in_order(self.name, self.input_names, arrays, named))
        env = self._bind(arrays)
        shapes = [tuple(dim_eval(d, env) for d in shape) for shape, _ in self._outputs]
        nbytes = sum(array_bytes(sh, np.dtype(t).itemsize) for sh, (_, t) in zip(shapes, self._outputs))
        if nbytes >= CHECK_ABOVE:
            ensure_fits(nbytes, f"the outputs of {self.name}")
        outputs = [np.empty(sh, t) for sh, (_, t) in zip(shapes, self._outputs)]
        arena_bytes, offsets = self._offsets(env)
        arena = aligned_empty((arena_bytes,), np.uint8)     # each call its own: calls may run at once
        base = arena.ctypes.data
        pointers = [a.ctypes.data for a in (*arrays, *outputs)] + self._constant_pointers + [base + o for o in offsets]
        pointer_array = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        sizes = (ctypes.c_int64 * max(1, len(self._sizes)))(*(env[s] for s in self._sizes))
        status = (ctypes.c_int64 * 2)()
        if self._global_status is not None:
            self._global_status[0] = 0
        self._entry(ctypes.addressof(pointer_array), ctypes.addressof(sizes), ctypes.addressof(status))
        word = status if status[0] or self._global_status is None else self._global_status
        if word[0]:
            from minic.ir.loops import data_error
            raise data_error(self.name, self._checks, word[0], word[1])
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def __repr__(self) -> str:
        return f"SavedModel({self.name}, {self.folder})"
