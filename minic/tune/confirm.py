"""Confirming a search: does its best candidate really beat the default schedule?

A search keeps the fastest of many noisy measurements, so its winner looks
faster than it is (the winner's curse), and the default it is compared with
was timed at another moment, under another load.  So the default and the
search's best few candidates are timed again, interleaved
(``timing.interleaved``: in each round one block of calls of each), and the
block medians of one round are paired, since they saw the same load:

    ratio_r = default_r / candidate_r                  (> 1: the candidate is faster)
    gain    = median over rounds of ratio_r  - 1
    noise   = median over rounds of |ratio_r - (1 + gain)|     (MAD of the ratios)
    margin  = max(MIN_GAIN, NOISE_FACTOR * noise)

The candidate with the largest gain replaces the default only if
``gain > margin``, and then only if it does so again in a second pass, freshly
compiled, alone against a fresh default.  Why twice: pairing cancels load that
hits both sides of a round, not a slowdown that sticks to one compiled copy; in
A/A runs under load (the default against copies of itself, load 5 on 2 cores)
one copy ran 1.6x slower for 8 rounds in a row, its pool thread kept on a busy
core, and 8 of 83 comparisons passed a single pass.  How the margin is chosen: with identical code (an A/A
test) the ratios scatter around 1 by about ``noise``, but a MAD from 9 rounds
is itself noisy and the best of 3 candidates is a maximum, so the factor is set
by simulation (Gaussian noise of any size): the best of 3 identical candidates
clears 2 MADs in 5 % of kernels, 3 MADs in 1.7 % (``test_confirm.py`` checks
this rate).  ``MIN_GAIN`` (3 %) is the floor on a quiet machine, where MADs are
tiny: a smaller gain is within the drift between runs (clock, thread
placement) and not worth a record that changes the code.  The same comparison
judges the whole model, tuned against untuned, at the end of ``minic tune``.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

from minic.timing import interleaved

MIN_GAIN = 0.03               # the smallest gain worth a record
NOISE_FACTOR = 3.0            # margin in MADs of the paired ratios
ROUNDS = 9                    # paired rounds (odd: the median is one of them)
CANDIDATES = 3                # the search's fastest points confirmed against the default
PASSES = 2                    # a winner must win again, freshly compiled
BLOCK_S = 0.05                # a block of calls lasts about this long (at most BLOCK calls)
BLOCK = 5
SETTLE_S = 0.005              # pause before a block: the last kernel's pool stops spinning (after ~0.5 ms)


@dataclass(frozen=True)
class Comparison:
    """``other`` against ``base`` from paired block medians (seconds: lower is faster)."""
    gain: float               # median paired speed-up minus 1 (negative: other is slower)
    noise: float              # median absolute deviation of the paired ratios
    margin: float             # max(MIN_GAIN, NOISE_FACTOR * noise)
    base_seconds: float       # median of base's block medians
    other_seconds: float      # median of other's block medians

    @property
    def faster(self) -> bool:
        return self.gain > self.margin

    @property
    def slower(self) -> bool:
        return self.gain < -self.margin


def compare(base: list[float], other: list[float], min_gain: float = MIN_GAIN) -> Comparison:
    """Paired comparison of two equally long lists of block medians (see the module docstring)."""
    if len(base) != len(other) or not base:
        raise ValueError("compare needs one block median of each side per round")
    ratios = [b / o for b, o in zip(base, other)]
    middle = statistics.median(ratios)
    noise = statistics.median(abs(r - middle) for r in ratios)
    return Comparison(middle - 1, noise, max(min_gain, NOISE_FACTOR * noise),
                      statistics.median(base), statistics.median(other))


def block_size(seconds: float) -> int:
    """Calls per block for a kernel of ``seconds`` per call."""
    return max(1, min(BLOCK, int(BLOCK_S / max(seconds, 1e-9))))


def time_together(calls: list[Callable[[], None]], rounds: int, block: int) -> list[list[float]]:
    """Block medians of each call, ``rounds`` interleaved rounds of ``block`` calls."""
    return [b.block_medians() for b in interleaved(calls, rounds * block, block, SETTLE_S)]


def pick(default: list[float], candidates: list[list[float]]) -> tuple[int | None, Comparison | None]:
    """The candidate (index) that beats the default beyond the margin, else None; and the
    comparison of the candidate with the largest gain (None without candidates)."""
    if not candidates:
        return None, None
    comparisons = [compare(default, c) for c in candidates]
    i = max(range(len(comparisons)), key=lambda j: comparisons[j].gain)
    return (i if comparisons[i].faster else None), comparisons[i]
