"""A compile cache entry is checked whole before use: a bit flip or a one-digit edit
anywhere in it (magic, checksum, layout line, object code, derived constants) is
ignored with a warning and rebuilt, never trusted; the temporary files of killed
writes are removed once stale."""
from __future__ import annotations

import os
import time
import warnings

import numpy as np
import pytest

from minic.ir.interpret import interpret
from minic.runtime import CompileOptions, cache, compile_graph

from tests.runtime.test_runtime import mlp_graph

EDITS_PER_PART = 24                    # per part and kind of edit, at seeded positions


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    """The bytes of one entry (the MLP's: its derived constants are the pre-packed weights) and its path."""
    folder = tmp_path_factory.mktemp("cache")
    compile_graph(mlp_graph(), CompileOptions(cache_dir=folder))
    (path,) = folder.glob("*.mc.bin")
    return path, path.read_bytes()


def parts(data: bytes) -> dict[str, tuple[int, int]]:
    """Where each part of an entry lies: the magic line, the lines up to and with the JSON
    line (checksum and layout), the object code (an ELF file), the .npz (a zip file)."""
    magic = data.index(b"\n") + 1
    json_end = data.index(b"\n", data.index(b"\n{", magic - 1) + 1) + 1
    npz = data.index(b"PK\x03\x04", json_end)             # the zip's first local header
    assert data[json_end:json_end + 4] == b"\x7fELF"
    return {"magic": (0, magic), "header": (magic, json_end), "object": (json_end, npz), "npz": (npz, len(data))}


def edits(data: bytes, seed: int):
    """(part, description, edited bytes): bit flips and one-digit edits at seeded positions of every part."""
    rng = np.random.default_rng(seed)
    for part, (lo, hi) in parts(data).items():
        for k in rng.integers(lo, hi, EDITS_PER_PART):
            edited = bytearray(data)
            edited[k] ^= 1 << int(rng.integers(8))
            yield part, f"bit flip at {k}", bytes(edited)
        digits = [k for k in range(lo, hi) if data[k:k + 1].isdigit()]
        for k in rng.choice(digits, min(EDITS_PER_PART, len(digits)), replace=False) if digits else ():
            edited = bytearray(data)
            edited[k] = ord("0") + (data[k] - ord("0") + int(rng.integers(1, 10))) % 10
            yield part, f"digit edit at {k}", bytes(edited)


def test_every_edit_of_every_part_is_detected(entry, tmp_path):
    path, data = entry
    assert cache.load(path) is not None                    # the entry as written is good
    target = tmp_path / path.name
    seen, accepted = set(), []
    for part, what, edited in edits(data, seed=37):
        seen.add(part)
        target.write_bytes(edited)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hit = cache.load(target)
        if hit is not None or not any("corrupt" in str(w.message) for w in caught):
            accepted.append(f"{part}: {what}")
    assert seen == {"magic", "header", "object", "npz"}
    assert accepted == []


def test_truncated_entries_are_detected(entry, tmp_path):
    path, data = entry
    target = tmp_path / path.name
    for end in (0, 5, len(cache.MAGIC) + 10, len(data) // 2, len(data) - 1):
        target.write_bytes(data[:end])
        with pytest.warns(UserWarning, match="corrupt"):
            assert cache.load(target) is None


def test_an_entry_under_another_key_is_not_trusted(entry, tmp_path):
    path, data = entry
    other = tmp_path / ("0" * 64 + ".mc.bin")
    other.write_bytes(data)
    with pytest.warns(UserWarning, match="corrupt"):
        assert cache.load(other) is None


def test_a_corrupt_layout_line_is_rebuilt(tmp_path):
    """An edited layout line (a shape in it) is ignored, the model compiled again and the
    entry rewritten good: the answer is right and the next compile loads it."""
    options = CompileOptions(cache_dir=tmp_path)
    compile_graph(mlp_graph(), options)
    (path,) = tmp_path.glob("*.mc.bin")
    data = path.read_bytes()
    layout = data.index(b'[\\"x\\", \\"x\\", [\\"B\\", 16]')  # the input's slot in the layout line
    path.write_bytes(data[:layout] + data[layout:].replace(b"16]", b"17]", 1))
    with pytest.warns(UserWarning, match="corrupt"):
        model = compile_graph(mlp_graph(), options)
    x = np.random.default_rng(0).standard_normal((3, 16), np.float32)
    np.testing.assert_allclose(model(x), interpret(mlp_graph(), [x])[0], rtol=1e-4, atol=1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache.load(path) is not None


def test_stale_temporary_files_are_removed(tmp_path):
    stale, fresh = tmp_path / ".abc.mc.bin.x1.tmp", tmp_path / ".abc.mc.bin.x2.tmp"
    for f in (stale, fresh):
        f.write_bytes(b"half an entry")
    hours_ago = time.time() - 2 * cache.STALE_SECONDS
    os.utime(stale, (hours_ago, hours_ago))
    compile_graph(mlp_graph(), CompileOptions(cache_dir=tmp_path))      # a store cleans the folder
    assert not stale.exists() and fresh.exists()              # a young one may be a write in progress
    assert len(list(tmp_path.glob("*.mc.bin"))) == 1
