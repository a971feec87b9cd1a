from minic.schedule.caching import rfactor
from minic.schedule.primitives import parallel, split, vectorize


def softmax_rows(kernel):
    """Rows in parallel; the max and the sum each in 16 partial results (a chain of 1024
    dependent updates becomes 64 of vectors, then a tree of 4); the last loop in vectors of 16."""
    k = parallel(kernel, "i0")
    k = rfactor(k, "r0", 16)
    k = rfactor(k, "r1", 16)
    return vectorize(split(k, "i1", 16), "i1i")


SCHEDULES = {"k0_softmax": softmax_rows}
