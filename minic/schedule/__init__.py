"""Schedules: how the loops of a kernel run (not what they compute).

For now there is one default schedule; the primitives (split, reorder, tile,
unroll, vectorize, pack) and the tuner come with the Performance issue and
rewrite the same For trees.
"""
from minic.schedule.default import default_schedule

__all__ = ["default_schedule"]
