from minic.passes.rewrite import Match, rule


@rule("neg")
def negated_difference(m: Match):
    """neg(sub(a, b)) -> sub(b, a)"""
    inner = m.producer(m.node.inputs[0], "sub")
    return m.rebuilt("sub", inner.inputs[::-1]) if inner is not None else None


RULES = [negated_difference]
