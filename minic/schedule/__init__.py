"""Schedules: how the loops of a kernel run (not what they compute).

Read in this order: ``nest.py`` (naming and finding loops, the independence
check), ``primitives.py`` (split, reorder, tile, fuse, unroll, vectorize,
parallel), ``caching.py`` (cache_accumulator, pack, rfactor: the ones with a
local buffer; cache_in_output, which keeps a value in the output row instead),
``templates.py`` (the contraction micro-kernel and its knobs),
``default.py`` (what every kernel gets untuned), ``prepack.py`` (weights packed
at compile time).  The transforms are pure: tuning (measuring, searching,
confirming, and the records file it writes) is ``minic/tune/``; a compile reads
the records once and hands ``default_schedule`` the knobs of its target.
"""
from minic.schedule.default import default_schedule

__all__ = ["default_schedule"]
