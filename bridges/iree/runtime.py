"""Running a ``.vmfb`` on IREE's runtime (``iree.runtime``, local-task driver: CPU
kernels on IREE's own task system).  The runtime loads beside the MLIR bindings."""
from __future__ import annotations

import warnings

import numpy as np

from bridges.iree.importers import FUNC_NAME

DRIVER = "local-task"
_driver_threads: list[int | None] = []      # the count this process's driver was made with, once made


def use_threads(n: int | None) -> None:
    """IREE's task system on ``n`` worker threads (None: whatever it runs on; IREE's default is
    one per core).  IREE reads the flag when it makes the local-task driver, once per process;
    a later, different count cannot apply, and says so."""
    if _driver_threads:
        if n is not None and _driver_threads[0] != n:
            warnings.warn(f"IREE's runtime in this process already runs on "
                          f"{_driver_threads[0] or 'its default'} threads; threads={n} does not apply",
                          stacklevel=3)
        return
    if n is not None:
        import iree.runtime as rt
        rt.flags.parse_flags(f"--task_topology_max_group_count={n}")
    _driver_threads.append(n)


class IreeModule:
    """A loaded ``.vmfb``: ``module(*arrays) -> array`` (or a tuple of arrays)."""

    def __init__(self, vmfb: bytes, func: str = FUNC_NAME, driver: str = DRIVER, threads: int | None = None):
        import iree.runtime as rt

        use_threads(threads)
        self.bound = rt.load_vm_flatbuffer(vmfb, driver=driver)
        self.fn = getattr(self.bound, func)

    def __call__(self, *arrays: np.ndarray):
        out = self.fn(*(np.asarray(a, order="C") for a in arrays))          # (ascontiguousarray: 0-d -> 1-d)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        # to_host() may alias the runtime's buffer: copy, so results outlive the next call.
        host = tuple(np.array(o.to_host()) for o in outs)
        return host[0] if len(host) == 1 else host
