"""A model's inputs as a user gives them: an ``.npz`` file (arrays by input name,
or ``arr_0, arr_1, ...`` in order), an ``.npy`` file (the one input), or shapes to fill with random values
(``--shape 2,3,32,32`` in order, or ``--shape x=2,3,32,32:float32`` by name).

``bind`` puts either in the model's input order once the model's input names
are known; every mismatch is a one-line ``UserError``.
"""
from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from minic.errors import UserError


class NamedArrays(dict):
    """Arrays by name, remembering where they came from (for error messages)."""

    def __init__(self, arrays: Mapping[str, np.ndarray], origin: str):
        super().__init__(arrays)
        self.origin = origin


def read_arrays(path: Path) -> NamedArrays | tuple[np.ndarray]:
    """The arrays of an ``.npz`` file, by name (``np.savez``'s ``arr_i`` when unnamed), or
    the one array of an ``.npy`` file."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such inputs file")
    try:
        with open(path, "rb") as f:
            loaded = np.load(f, allow_pickle=False)
            if isinstance(loaded, np.ndarray):
                return (np.asarray(loaded, order="C"),)
            with loaded as npz:
                return NamedArrays({k: np.asarray(npz[k], order="C") for k in npz.files}, str(path))
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{path}: not a readable .npz or .npy file ({e})") from None


def parse_shape(text: str) -> tuple[str | None, tuple[int, ...], np.dtype]:
    """``[NAME=]D,D,...[:DTYPE]`` -> (name, shape, dtype); dtype float32 unless named."""
    name, _, rest = text.rpartition("=")
    dims, _, dtype = rest.partition(":")
    try:
        shape = tuple(int(d) for d in dims.split(",") if d.strip()) if dims.strip() else ()
        if any(d < 0 for d in shape):
            raise ValueError
    except ValueError:
        raise UserError(f"--shape '{text}': dims must be non-negative integers separated by commas, "
                        "e.g. 2,3,32,32 or x=2,8:int64") from None
    try:
        dt = np.dtype(dtype or "float32")
    except TypeError:
        raise UserError(f"--shape '{text}': unknown dtype '{dtype}'") from None
    return name or None, shape, dt


def random_inputs(shapes: Sequence[str], seed: int = 0) -> tuple[np.ndarray, ...] | NamedArrays:
    """Random arrays of the given shapes (normal floats, 0/1 integers, random bools);
    by name when every shape names its input, else in order."""
    rng = np.random.default_rng(seed)
    parsed = [parse_shape(s) for s in shapes]
    arrays = []
    for _, shape, dt in parsed:
        if dt.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dt))
        elif dt.kind == "b":
            arrays.append(rng.random(shape) < 0.5)
        else:
            arrays.append(rng.integers(0, 2, shape).astype(dt))
    named = [n for n, _, _ in parsed if n]
    if named and len(named) != len(parsed):
        raise UserError("--shape: name every input (NAME=D,D) or none of them")
    if named:
        return NamedArrays(dict(zip(named, arrays)), "--shape")
    return tuple(arrays)


def calibration_inputs(examples: Sequence[np.ndarray], seed: int = 0,
                       count: int = 8) -> list[tuple[np.ndarray, ...]]:
    """What a quantizer calibrates on: the example inputs, then ``count - 1`` seeded random
    inputs like them -- floats drawn around each example's mean with its spread, integers
    (token ids) among the example's own values, so that no id falls outside what the model
    takes."""
    rng = np.random.default_rng(seed)

    def like(x: np.ndarray) -> np.ndarray:
        if x.dtype.kind == "f":
            spread = float(x.std()) or 1.0
            return (float(x.mean()) + spread * rng.standard_normal(x.shape)).astype(x.dtype)
        return rng.choice(x.reshape(-1), size=x.shape).astype(x.dtype) if x.size else x

    examples = tuple(np.asarray(x) for x in examples)
    return [examples] + [tuple(like(x) for x in examples) for _ in range(count - 1)]


def given(inputs_file: str | Path | None, shapes: Sequence[str], seed: int = 0):
    """The inputs an ``.npz`` file or ``--shape`` specs give, or None (the model's own)."""
    if inputs_file and shapes:
        raise UserError("give --inputs or --shape, not both")
    if inputs_file:
        return read_arrays(Path(inputs_file))
    if shapes:
        return random_inputs(shapes, seed)
    return None


def bind(given: Sequence | Mapping, names: Sequence[str], count: int | None) -> tuple:
    """``given`` in the model's input order: a sequence as it is, a mapping by the
    model's input ``names`` (or by ``arr_0, arr_1, ...``).  ``count``: how many
    inputs the model takes, when known."""
    if not isinstance(given, Mapping):
        given = tuple(given)
        if count is not None and len(given) != count:
            raise UserError(f"the model takes {count} inputs ({', '.join(names) or 'unnamed'}); {len(given)} given")
        return given
    origin = getattr(given, "origin", "the inputs")
    n = count if count is not None else len(names)
    names = tuple(names) if len(names) == n else ()
    keys = list(names) if names and all(k in given for k in names) else [f"arr_{i}" for i in range(n)]
    if any(k not in given for k in keys) or len(given) != n:
        order = ", ".join(f"arr_{i}" for i in range(n))
        wanted = f"{', '.join(names)} (or {order})" if names else order or "(none)"
        raise UserError(f"{origin}: expected {n} arrays named {wanted}; found {', '.join(given) or 'none'}")
    return tuple(given[k] for k in keys)
