"""The compile cache on disk: object code + entry layout, keyed by graph and options.

One file per entry, ``<key>.mc.bin``:

    minic-cache 2                   the magic line
    <SHA-256 of all that follows>   64 hex digits
    {"key": ..., "object_bytes": N, "layout": ...}     one JSON line
    <object bytes><.npz of the constants that graph passes derived (folded batch norms ...)>

The checksum covers every byte that is read after it, the layout line and the
entry's own name included: an entry edited, truncated, flipped or copied under
another key is ignored with a warning and rebuilt, never trusted (the layout
says where the code reads and writes; a wrong one is a crash or a wrong
answer).  Weights of the graph itself are not copied.  Writes go to a temporary
file renamed into place (atomic on POSIX), so a reader never sees half an
entry; the temporary files of writes that were killed are removed once they
are an hour old.
"""
from __future__ import annotations

import functools
import hashlib
import io
import json
import time
import warnings
from pathlib import Path

import numpy as np

from minic.options import CacheOptions, CompileOptions
from minic.errors import UserError
from minic.files import write_atomic
from minic.ir.graph import Graph, attr_items
from minic.runtime.layout import EntryLayout

MAGIC = b"minic-cache 2\n"
DIGEST = 64                           # hex digits of a SHA-256
STALE_SECONDS = 3600                  # a temporary file this old belongs to a write that was killed


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
        from minic.options import tiles_u8s8
        h.update(llvm.get_host_cpu_name().encode() + llvm.get_host_cpu_features().flatten().encode())
        h.update(f"tiles={tiles_u8s8(options.target)}".encode())   # AMX code only where Linux lets it run
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
        return _parse(data, path.name)
    except (ValueError, KeyError, TypeError, OSError) as e:
        warnings.warn(f"minic cache: ignoring corrupt entry {path} ({e}); it is rebuilt")
        return None


def _parse(data: bytes, name: str) -> tuple[EntryLayout, bytes, dict[str, np.ndarray]]:
    """An entry's parts, after its checksum: nothing is read that the checksum did not cover."""
    if not data.startswith(MAGIC):
        raise ValueError("bad magic")
    body = len(MAGIC) + DIGEST + 1
    if data[body - 1:body] != b"\n" or hashlib.sha256(memoryview(data)[body:]).hexdigest().encode() != data[len(MAGIC):body - 1]:
        raise ValueError("checksum mismatch")
    head_end = data.index(b"\n", body)                # the JSON line (json.dumps writes no newline)
    meta = json.loads(data[body:head_end])
    if meta["key"] != name:
        raise ValueError(f"the entry of {meta['key']!r}")
    start = head_end + 1
    obj = data[start:start + meta["object_bytes"]]
    with np.load(io.BytesIO(memoryview(data)[start + meta["object_bytes"]:]), allow_pickle=False) as arrays:
        derived = dict(arrays)
    return EntryLayout.from_json(meta["layout"]), obj, derived


def store(path: Path, layout: EntryLayout, obj: bytes, derived: dict[str, np.ndarray]) -> None:
    """Write an entry atomically; a cache that cannot be written is only a warning."""
    buffer = io.BytesIO()
    np.savez(buffer, **derived)
    meta = json.dumps({"key": path.name, "object_bytes": len(obj), "layout": layout.to_json()})
    body = meta.encode() + b"\n" + obj + buffer.getvalue()
    try:
        write_atomic(path, MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    except UserError as e:                  # write_atomic's: the disk is full, the folder read-only ...
        warnings.warn(f"minic cache: {e}")
    remove_stale(path.parent)


def remove_stale(folder: Path, now: float | None = None) -> list[Path]:
    """Remove the temporary files (``write_atomic``'s ``.NAME.<random>.tmp``) in ``folder`` older
    than STALE_SECONDS: left by writes that were killed.  A younger one may be another
    process's write in progress.  Returns the files removed."""
    now = time.time() if now is None else now
    removed = []
    for tmp in folder.glob(".*.tmp"):
        try:
            if now - tmp.stat().st_mtime > STALE_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:                      # gone already (another process cleaned it), or not ours
            pass
    return removed
