"""PyTorch's Core ATen opset, enumerated from ``torch.ops.aten`` (never a hand list),
and which of it the torch frontend converts.

Core ATen is the set of overloads whose ``tags`` hold ``torch.Tag.core``: what
``run_decompositions()`` brings every model down to (193 overloads over 164
names in torch 2.13, counted from every registered schema).  A family is left out only for a stated reason:
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch

# Families outside inference graphs, each with its reason (the order decides the label).
EXCLUDED = (
    ("random", "random ops (tagged nondeterministic_seeded): an inference graph draws no numbers",
     lambda op: torch.Tag.nondeterministic_seeded in op.tags),
    ("out variant", "out= variants write into a given tensor; the functional overload is the op",
     lambda op: op._overloadname == "out" or op._overloadname.endswith("_out")),
    ("in-place", "in-place variants: torch.export functionalizes them away",
     lambda op: op._schema.name.split("::")[-1].endswith("_") and not op._schema.name.split("::")[-1].startswith("_")),
    ("training-only", "training only: gradients (backward ops) and batch statistics of training-mode norms",
     lambda op: "backward" in op._schema.name or op in _TRAINING),
    ("sparse/quantized", "sparse and quantized tensors: minic's tensors are dense and unquantized",
     lambda op: any(w in op._schema.name for w in ("sparse", "quantize", "_mkldnn"))),
)
_TRAINING = {torch.ops.aten._native_batch_norm_legit.default}

# Overloads that return sizes or layout facts, not tensors: the frontend reads them from the
# traced metadata as symbolic dims (a contiguity test is a guard torch has already decided).
SHAPE_OPS = {torch.ops.aten.sym_size.int, torch.ops.aten.sym_numel.default, torch.ops.aten.sym_stride.int,
             torch.ops.aten.sym_storage_offset.default, torch.ops.aten.sym_is_contiguous.default}


@cache
def core_overloads() -> tuple[torch._ops.OpOverload, ...]:
    """Every overload of ``torch.ops.aten`` tagged ``torch.Tag.core``, sorted by name."""
    # Every registered schema, not dir(torch.ops.aten): that lists only the packets loaded
    # so far (189 overloads in a fresh torch 2.13 process, 193 once all are).
    found = []
    for name in sorted({s.name.split("::")[1] for s in torch._C._jit_get_all_schemas() if s.name.startswith("aten::")}):
        try:
            packet = getattr(torch.ops.aten, name)
        except (AttributeError, RuntimeError):
            continue
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if torch.Tag.core in op.tags:
                found.append(op)
    return tuple(sorted(found, key=str))


def exclusion(op: torch._ops.OpOverload) -> str | None:
    """The family an overload is left out for, or None."""
    return next((label for label, _, test in EXCLUDED if test(op)), None)


@dataclass(frozen=True)
class Coverage:
    covered: list[str]
    missing: list[str]
    excluded: dict[str, list[str]]              # family -> overloads

    @property
    def total(self) -> int:
        return len(self.covered) + len(self.missing) + sum(map(len, self.excluded.values()))


def coverage() -> Coverage:
    """Which Core ATen overloads the frontend converts (a handler, or a size read as a dim)."""
    from minic.frontend.torch import HANDLERS
    covered, missing, excluded = [], [], {}
    for op in core_overloads():
        if op in HANDLERS or op in SHAPE_OPS:
            covered.append(str(op))
        elif (family := exclusion(op)) is not None:
            excluded.setdefault(family, []).append(str(op))
        else:
            missing.append(str(op))
    return Coverage(covered, missing, excluded)


# Layer classes of ``torch.nn.modules`` the torch frontend refuses, each with its reason: every
# other class is converted and checked against eager (tests/frontend/test_torch_nn_layers.py).
_CONTAINER = "a container or base class: no computation of its own (its layers are converted)"
NN_REFUSED = {
    "Module": _CONTAINER, "Container": _CONTAINER, "ModuleList": _CONTAINER, "ModuleDict": _CONTAINER,
    "ParameterList": _CONTAINER, "ParameterDict": _CONTAINER, "RNNCellBase": _CONTAINER, "RNNBase": _CONTAINER,
    "CTCLoss": "training-only: a training objective summed over all alignments (aten._ctc_loss, "
               "which torch.export neither decomposes nor minic converts)",
    "GaussianNLLLoss": "checks its input's values in Python (any(var < 0) raises), which torch.export "
                       "cannot trace, strict or not",
    "CrossMapLRN2d": "a legacy autograd Function torch.export cannot trace (LocalResponseNorm computes the same)",
    "FractionalMaxPool2d": "random: its windows are drawn afresh at every call, in eval mode too",
    "FractionalMaxPool3d": "random: its windows are drawn afresh at every call, in eval mode too",
}
