import numpy as np

from minic.passes.rewrite import Match, rule


@rule("div")
def divide_by_power_of_two(m: Match):
    """x / c -> x * (1 / c)  (c a constant of powers of two, so that 1 / c is exact and finite)"""
    x, c = m.node.inputs
    if not (c.is_constant and c.type.dtype.is_float):
        return None                                     # a / y, or an integer division (7 / 2 is 3, 7 * 0 is 0)
    with np.errstate(all="ignore"):
        inverse = (1 / c.data).astype(c.data.dtype)
    mantissa, _ = np.frexp(c.data)
    if not (np.all(np.abs(mantissa) == 0.5) and np.all(np.isfinite(inverse))):
        return None                                     # 1/3 is rounded: x * (1/3) is not x / 3 in the last bit
    m.retire(c)                                         # dropped at the end, unless something else reads it
    return m.rebuilt("mul", [x, m.constant(f"{c.name}_inverse", inverse)])


RULES = [divide_by_power_of_two]
