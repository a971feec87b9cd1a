"""The paired comparison that decides whether a tuned point beats the default
(synthetic block medians: no clock is read here)."""
import random

import pytest

from minic.tune.confirm import MIN_GAIN, NOISE_FACTOR, ROUNDS, block_size, compare, pick


def test_identical_timings_are_neither_faster_nor_slower():
    c = compare([1.0] * 5, [1.0] * 5)
    assert c.gain == 0 and c.noise == 0 and c.margin == MIN_GAIN and not c.faster and not c.slower


def test_gain_noise_and_margin():
    base = [1.0, 1.2, 1.0, 1.1, 1.0]
    other = [b / r for b, r in zip(base, [1.10, 1.12, 1.08, 1.30, 1.10])]   # paired ratios
    c = compare(base, other)
    assert c.gain == pytest.approx(0.10) and c.noise == pytest.approx(0.02)
    assert c.margin == pytest.approx(max(MIN_GAIN, NOISE_FACTOR * 0.02)) and c.faster
    assert compare(other, base).slower                       # the same pair the other way round
    # A load spike that slows both sides in one round does not move the paired ratio.
    assert compare([1.0, 5.0, 1.0], [0.8, 4.0, 0.8]).gain == pytest.approx(0.25)
    with pytest.raises(ValueError):
        compare([1.0], [1.0, 1.0])


def test_identical_code_rarely_beats_the_margin():
    """A/A: three candidates equal to the default, Gaussian noise; the best of them must
    clear the margin (without the MIN_GAIN floor) in few kernels (~1.7 % simulated)."""
    rng = random.Random(0)
    wins = 0
    for _ in range(2000):
        draw = lambda: [1 + 0.05 * rng.gauss(0, 1) for _ in range(ROUNDS)]   # noqa: E731
        default = draw()
        comparisons = [compare(default, draw(), min_gain=0.0) for _ in range(3)]
        wins += max(comparisons, key=lambda c: c.gain).faster
    assert wins / 2000 < 0.03


def test_pick_takes_the_largest_gain_beyond_the_margin():
    default = [1.0] * ROUNDS
    assert pick(default, []) == (None, None)
    i, c = pick(default, [[0.99] * ROUNDS, [0.8] * ROUNDS, [0.9] * ROUNDS])
    assert i == 1 and c.gain == pytest.approx(0.25)
    i, c = pick(default, [[0.99] * ROUNDS, [1.2] * ROUNDS])
    assert i is None and c.gain == pytest.approx(1 / 0.99 - 1)


def test_block_size():
    assert block_size(1e-5) == 5 and block_size(0.02) == 2 and block_size(3.0) == 1
