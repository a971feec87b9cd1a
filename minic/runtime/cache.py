"""The compile cache on disk: object code + entry layout, keyed by graph and options.

One file per entry: a magic line, a JSON line (the layout, the SHA-256 of the
rest), the object bytes, then an ``.npz`` of the constants that graph passes
derived (folded batch norms ...); weights of the graph itself are not copied.  Writes go to a temporary file renamed into place
(atomic on POSIX), so a reader never sees half an entry; an entry that does
not parse or whose checksum fails is ignored with a warning and rebuilt.
"""
from __future__ import annotations

import functools
import hashlib
import io
import json
import warnings
from pathlib import Path

import numpy as np

from minic.options import CacheOptions, CompileOptions
from minic.files import write_atomic
from minic.ir.graph import Graph, attr_items
from minic.runtime.layout import EntryLayout

MAGIC = b"minic-cache 1\n"


@functools.cache
def compiler_fingerprint() -> bytes:
    """A hash of the compiler's own source: any edit to lowering, schedules, codegen
    or the runtime invalidates old entries (no version number to forget to bump)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for folder in ("ir", "lowering", "schedule", "codegen", "runtime", "passes"):
        for path in sorted((root / folder).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return h.digest()


def cache_key(graph: Graph, options: CompileOptions, records_digest: bytes) -> str:
    """SHA-256 over the graph (structure, attributes, types, constant bytes), the options
    and the tuning records (``tune.records.Tuning.digest``: they choose the schedules)."""
    h = hashlib.sha256(compiler_fingerprint())
    for name, value in attr_items(options):        # where the cache lives is no part of what it holds
        if name not in ("cache_dir", "use_cache"):
            h.update(f"{name}={value!r};".encode())
    h.update(records_digest)
    if not options.triple:         # the host's CPU is part of what the code was built for
        import llvmlite.binding as llvm
        h.update(llvm.get_host_cpu_name().encode() + llvm.get_host_cpu_features().flatten().encode())
    names = {v: k for k, v in enumerate(graph.values())}
    for v in graph.values():
        h.update(f"{names[v]}:{v.name}:{v.type};".encode())
    for c in graph.constants:
        h.update(hashlib.sha256(c.data.tobytes()).digest())
    for n in graph.nodes:
        h.update(f"{n.op}{attr_items(n.attrs)!r}{[names[v] for v in n.inputs]}"
                 f"{[names[v] for v in n.outputs]}{n.group};".encode())
    h.update(repr([names[v] for v in graph.outputs]).encode())
    return h.hexdigest()


def entry_path(cache: CacheOptions, key: str) -> Path:
    return cache.folder / f"{key}.mc.bin"


def load(path: Path) -> tuple[EntryLayout, bytes, dict[str, np.ndarray]] | None:
    """The cached layout, object code and derived constants, or None (with a warning if corrupt)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        warnings.warn(f"minic cache: cannot read {path}: {e}")
        return None
    try:
        if not data.startswith(MAGIC):
            raise ValueError("bad magic")
        head_end = data.index(b"\n", len(MAGIC))         # the JSON line (json.dumps writes no newline)
        meta, rest = json.loads(data[len(MAGIC):head_end]), data[head_end + 1:]   # one copy of the payload
        if hashlib.sha256(rest).hexdigest() != meta["sha256"]:
            raise ValueError("checksum mismatch")
        obj, npz = rest[:meta["object_bytes"]], rest[meta["object_bytes"]:]
        with np.load(io.BytesIO(npz), allow_pickle=False) as arrays:
            derived = dict(arrays)
        return EntryLayout.from_json(meta["layout"]), obj, derived
    except (ValueError, KeyError, TypeError, OSError) as e:
        warnings.warn(f"minic cache: ignoring corrupt entry {path} ({e})")
        return None


def store(path: Path, layout: EntryLayout, obj: bytes, derived: dict[str, np.ndarray]) -> None:
    """Write an entry atomically; a cache that cannot be written is only a warning."""
    buffer = io.BytesIO()
    np.savez(buffer, **derived)
    rest = obj + buffer.getvalue()
    meta = json.dumps({"sha256": hashlib.sha256(rest).hexdigest(), "object_bytes": len(obj),
                       "layout": layout.to_json()})
    try:
        write_atomic(path, MAGIC + meta.encode() + b"\n" + rest)
    except OSError as e:
        warnings.warn(f"minic cache: cannot write {path}: {e}")
