"""Schedules: how the loops of a kernel run (not what they compute).

Read in this order: ``nest.py`` (naming and finding loops, the independence
check), ``primitives.py`` (split, reorder, tile, fuse, unroll, vectorize,
parallel), ``caching.py`` (cache_accumulator, pack, rfactor: the ones with a
local buffer; cache_in_output, which keeps a value in the output row instead),
``templates.py`` (the contraction micro-kernel and its knobs),
``default.py`` (what every kernel gets untuned), ``prepack.py`` (weights packed
at compile time), ``records.py`` (the tuning records the schedules follow; the
tuner that writes them is ``minic/tune/``).
"""
from minic.schedule.default import default_schedule

__all__ = ["default_schedule"]
