from minic.schedule.caching import cache_accumulator, pack
from minic.schedule.primitives import parallel, reorder, split, unroll, vectorize


def SCHEDULE(naive):
    """Columns outermost (a panel of w per outer iteration), 64 of them in the vector, 4 rows in
    the register tile; the panel packed, the panels shared out between threads."""
    k = reorder(naive, "i1", "i0")
    k = split(k, "i1", 64)
    k = reorder(k, "i0", "i1i")
    k = split(k, "i0", 4)
    k = cache_accumulator(k, "i0i", "i1i")
    k = vectorize(unroll(k, "i0i"), "i1i")
    return parallel(pack(k, "i1o", "w"), "i1o")
