from minic.schedule.caching import cache_accumulator
from minic.schedule.primitives import split, vectorize


def vector_row(kernel):
    """16 columns of the output at a time: split, a row of 16 accumulators out of the reduction, vectorized.
    The order matters: the accumulator is cached after the split, so that its row has 16 elements, not the 32 of i1.
    (The rows, the batch B, are symbolic: a register tile over them needs the template's clamped tail.)"""
    k = split(kernel, "i1", 16)
    k = cache_accumulator(k, "i1i")
    return vectorize(k, "i1i")


SCHEDULES = {"k0_gemm_relu": vector_row}
