"""Running a ``.vmfb`` on IREE's runtime (``iree.runtime``, local-task driver: CPU
kernels on IREE's own task system).  The runtime loads beside the MLIR bindings."""
from __future__ import annotations

import numpy as np

from bridges.iree.importers import FUNC_NAME

DRIVER = "local-task"


class IreeModule:
    """A loaded ``.vmfb``: ``module(*arrays) -> array`` (or a tuple of arrays)."""

    def __init__(self, vmfb: bytes, func: str = FUNC_NAME, driver: str = DRIVER):
        import iree.runtime as rt

        self.bound = rt.load_vm_flatbuffer(vmfb, driver=driver)
        self.fn = getattr(self.bound, func)

    def __call__(self, *arrays: np.ndarray):
        out = self.fn(*(np.ascontiguousarray(a) for a in arrays))
        outs = out if isinstance(out, (tuple, list)) else (out,)
        # to_host() may alias the runtime's buffer: copy, so results outlive the next call.
        host = tuple(np.array(o.to_host()) for o in outs)
        return host[0] if len(host) == 1 else host
