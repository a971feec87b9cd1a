"""numpy arrays <-> torch tensors, apart from the rest of the torch frontend.

Running a torch model on numpy arrays (the zoo's example inputs, the ``torch``
reference backend) needs only these two functions; importing them does not import
``torch.export``'s dependencies (sympy) the way ``minic.frontend.torch`` does.
"""
from __future__ import annotations

import numpy as np
import torch

from minic.ir.types import DType


def numpy_of(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a numpy array (bf16 as ``ml_dtypes.bfloat16``: numpy has none)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(DType.bf16.numpy)
    return t.numpy()


def tensor_of(a: np.ndarray) -> torch.Tensor:
    """The tensor of a numpy array (the inverse of ``numpy_of``); shares memory."""
    a = np.asarray(a, order="C")
    if a.dtype.name == "bfloat16":           # ml_dtypes' (imported only where bf16 is used)
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)
