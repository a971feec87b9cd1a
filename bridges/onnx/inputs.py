"""Inputs for the accuracy check: synthetic ones, and real English text as bytes.

WikiText-2 cannot be downloaded here, so a few KB of public-domain English ship
in ``data/public_domain.txt``.  Tokenisation is at byte level: every byte 0..255
is a token id, which fits llama-tiny's vocabulary at both sizes (1024 and 256).

The (batch, seq) pairs vary from input to input, to prove the dynamic axes.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

TEXT_PATH = Path(__file__).parent / "data" / "public_domain.txt"


def load_text(path: Path = TEXT_PATH) -> str:
    """The shipped text without its first line (which names the source)."""
    return path.read_text(encoding="utf-8").split("\n", 1)[1]


def byte_tokens(text: str) -> np.ndarray:
    """UTF-8 bytes as int64 token ids in 0..255."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)


@dataclass(frozen=True)
class InputSpec:
    """What one model input looks like: its example array and named dynamic axes."""

    example: np.ndarray
    dynamic_axes: dict[int, str]


def shape_pairs(max_seq: int) -> list[tuple[int, int]]:
    """Several (batch, seq) pairs, none equal to another, within ``max_seq``."""
    pairs = [(1, 8), (2, 16), (3, 5), (4, 32), (1, 64), (2, 1), (5, 12), (1, 128)]
    return [(b, t) for b, t in pairs if t <= max_seq]


def token_inputs(count: int, vocab: int, max_seq: int, seed: int = 0
                 ) -> list[tuple[str, np.ndarray]]:
    """``count`` token-id batches: half synthetic (uniform ids), half windows of the text.

    Each item is ``(kind, ids[B, T])`` with kind ``"synthetic"`` or ``"text"``; the
    (B, T) pair cycles through ``shape_pairs``.
    """
    rng = np.random.default_rng(seed)
    tokens = byte_tokens(load_text())
    pairs = shape_pairs(max_seq)
    batches: list[tuple[str, np.ndarray]] = []
    for i in range(count):
        batch, seq = pairs[i % len(pairs)]
        if i % 2 == 0:
            batches.append(("synthetic", rng.integers(0, vocab, size=(batch, seq))))
        else:
            starts = rng.integers(0, len(tokens) - seq, size=batch)
            batches.append(("text", np.stack([tokens[s:s + seq] for s in starts])))
    return batches


def tensor_inputs(count: int, spec: InputSpec, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """``count`` synthetic float batches shaped like ``spec.example``, batch size varied."""
    rng = np.random.default_rng(seed)
    batches = []
    for i in range(count):
        shape = list(spec.example.shape)
        if 0 in spec.dynamic_axes:
            shape[0] = 1 + i % 4
        batches.append(("synthetic", rng.standard_normal(shape).astype(spec.example.dtype)))
    return batches


def accuracy_inputs(spec: InputSpec, count: int = 100, *, vocab: int | None = None,
                    max_seq: int | None = None, seed: int = 0
                    ) -> list[tuple[str, np.ndarray]]:
    """The ``count`` inputs of the accuracy check for a one-input model."""
    if np.issubdtype(spec.example.dtype, np.integer):
        if vocab is None or max_seq is None:
            raise ValueError("token inputs need the vocabulary size and the longest sequence")
        return token_inputs(count, vocab, max_seq, seed)
    return tensor_inputs(count, spec, seed)
