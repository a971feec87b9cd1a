"""Tuning records: one JSON object per line, keyed by kernel signature and target.

    {"signature": "3f1c...", "target": "x86_64-unknown-linux-gnu/znver4", "knobs": {"rows": 4, ...},
     "seconds": 0.00012, "default_seconds": 0.00018, "gflops": 71.2, "trials": 16, "kernel": "k5_matmul",
     "date": "2026-11-30", "kept_default": false, "gain": 0.5, "margin": 0.03}

``seconds`` and ``default_seconds`` were timed in the same interleaved rounds;
``gain`` is the paired speed-up minus 1 and ``margin`` the gain it had to beat
(``confirm.py``).  A kernel whose default won gets a record too, with the
default knobs and ``kept_default``, so that tuning again skips it.

The file only grows by whole rewrites (``write_atomic``, under a lock): readers
never see half a line, and concurrent tuners lose nothing.  Several records may
share a key (tuned twice): confirmed records beat older unconfirmed ones, then
the larger speed-up over the default wins.  Seconds of two runs are not
compared: the load they ran under differs; each run's ratio to its own default
does not depend on it.
``CompileOptions.cache.records`` is where ``minic tune`` writes and compilation reads
(the cache folder's tuning.jsonl unless another file is named), so a tuned model is
fast the next time it compiles.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from minic.options import CacheOptions, Target
from minic.files import locked, write_atomic


@dataclass(frozen=True)
class Record:
    signature: str
    target: str
    knobs: dict
    seconds: float
    default_seconds: float
    gflops: float
    trials: int
    kernel: str = ""
    date: str = ""
    kept_default: bool = False      # no point beat the default beyond the margin: knobs are the default's
    gain: float = 0.0               # the strongest point's paired speed-up over the default, minus 1
    margin: float = 0.0             # the gain a point had to beat (0: not confirmed, an older tuner's record)

    @property
    def confirmed(self) -> bool:
        return self.margin > 0

    @property
    def speedup(self) -> float:
        """The record's knobs against the default, timed in the same run."""
        return self.default_seconds / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Tuning:
    """The records file as one compile sees it, read once: its digest (part of the
    compile cache key: new records, new code) and the record each kernel compiles with."""
    digest: bytes
    best: dict[tuple[str, str], Record]

    def knobs(self, target: str) -> dict[str, dict]:
        """signature -> knobs of the records measured on ``target`` whose point beat the
        default (where the default won, the default schedule is today's default)."""
        return {sig: r.knobs for (sig, t), r in self.best.items() if t == target and not r.kept_default}


def load(cache: CacheOptions) -> Tuning:
    """The records compilation follows (``cache.records``), read once."""
    import hashlib
    path = cache.records
    try:
        data = path.read_bytes()
    except OSError:
        return Tuning(b"", {})
    return Tuning(hashlib.sha256(data).digest(), best(parse(data, path)))


def target_of(options: Target) -> str:
    """What a record was measured on: the triple and the CPU."""
    import llvmlite.binding as llvm
    cpu = options.cpu or (llvm.get_host_cpu_name() if not options.triple else "generic")
    return f"{options.triple or llvm.get_process_triple()}/{cpu}"


def read(path: Path) -> list[Record]:
    """Every record in ``path`` (none if it does not exist); bad lines are skipped with a warning."""
    try:
        return parse(Path(path).read_bytes(), path)
    except FileNotFoundError:
        return []


def parse(data: bytes, path: Path) -> list[Record]:
    """The records of a records file's bytes; a bad line (not UTF-8, not JSON, a field
    missing, unknown or of another type, a knob no template has) is skipped
    with a warning naming it: a corrupt line never stops a compile."""
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(record_of(json.loads(line.decode())))
        except (ValueError, TypeError) as e:              # UnicodeDecodeError is a ValueError
            warnings.warn(f"{path}:{n}: ignoring a bad tuning record ({e})")
    return out


def record_of(d: object) -> Record:
    """A Record from one line's JSON object, each field (and each knob of the contraction
    template's) of its declared type, counts positive."""
    from minic.schedule.templates import Knobs
    if not isinstance(d, dict):
        raise TypeError(f"a record is a JSON object, not {type(d).__name__}")
    record = Record(**d)                                   # a missing or unknown field: TypeError
    _check_types(record, fields(Record))
    if not isinstance(record.knobs, dict):
        raise TypeError("knobs is not an object")
    _check_types(Knobs(**record.knobs), [f for f in fields(Knobs) if f.name in record.knobs])
    if any(isinstance(v, int) and not isinstance(v, bool) and v < 1 for v in record.knobs.values()):
        raise ValueError(f"knobs {record.knobs} hold a count below 1")
    return record


_TYPES = {"str": (str,), "dict": (dict,), "float": (int, float), "int": (int,), "bool": (bool,)}


def _check_types(value: object, declared) -> None:
    """Each of ``declared`` (dataclass fields) of ``value`` has its type (a bool is no number)."""
    for f in declared:
        v = getattr(value, f.name)
        if not isinstance(v, _TYPES[f.type]) or (f.type != "bool" and isinstance(v, bool)):
            raise TypeError(f"{f.name} is {v!r}, not a {f.type}")


def append(path: Path, records: list[Record]) -> None:
    """Add ``records`` to the file (rewritten atomically, under a lock so that two
    tuners appending at once keep each other's records)."""
    with locked(path):
        old = read(path)
        text = "".join(json.dumps(asdict(r), sort_keys=True) + "\n" for r in old + records)
        write_atomic(path, text.encode())


def best(records: list[Record]) -> dict[tuple[str, str], Record]:
    """The record each (signature, target) compiles with: confirmed first, then the
    largest speed-up over the default; on a tie the later one."""
    table: dict[tuple[str, str], Record] = {}
    for r in records:
        key = (r.signature, r.target)
        if key not in table or (r.confirmed, r.speedup) >= (table[key].confirmed, table[key].speedup):
            table[key] = r
    return table
