"""Exercise 3.1: neg(sub(a, b)) -> sub(b, a).  Fill in the rule, then:
    python docs/exercises/check.py 3.1 THIS_FILE"""
from minic.passes.rewrite import Match, rule


@rule("neg")
def negated_difference(m: Match):
    """neg(sub(a, b)) -> sub(b, a)"""
    return None         # the node's replacement (m.producer, m.rebuilt), or None where the identity does not apply


RULES = [negated_difference]
