"""Exercise 12.3: the template's schedule (4 rows, 64 lanes, 2 threads) written by hand.
Fill in SCHEDULE, then:
    python docs/exercises/check.py 12.3 THIS_FILE"""
from minic.schedule.caching import cache_accumulator, pack
from minic.schedule.primitives import parallel, reorder, split, unroll, vectorize


def SCHEDULE(naive):
    return naive        # as lowered: apply primitives to it
