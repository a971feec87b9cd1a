"""Exercise 3.2: x / c -> x * (1 / c), only where that is exact.  Fill in the rule, then:
    python docs/exercises/check.py 3.2 THIS_FILE"""
import numpy as np

from minic.passes.rewrite import Match, rule


@rule("div")
def divide_by_power_of_two(m: Match):
    """x / c -> x * (1 / c)  (c a constant of powers of two, so that 1 / c is exact and finite)"""
    x, c = m.node.inputs
    return None         # check the precondition; then a mul by a new constant (m.constant), and m.retire(c)


RULES = [divide_by_power_of_two]
