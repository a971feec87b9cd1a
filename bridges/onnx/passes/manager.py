"""A tiny pass manager: run named passes in order, repeat until nothing changes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import onnx

from minic.errors import UserError


@dataclass
class PassLog:
    """What each pass did: one (round, pass name, nodes before, nodes after) per run."""

    steps: list[tuple[int, str, int, int]] = field(default_factory=list)
    rounds: int = 0

    def changed(self) -> list[tuple[int, str, int, int]]:
        return [s for s in self.steps if s[2] != s[3]]


def run_passes(model: onnx.ModelProto, names: Sequence[str] | None = None,
               max_rounds: int = 10,
               check: Callable[[onnx.ModelProto, str], None] | None = None,
               ) -> tuple[onnx.ModelProto, PassLog]:
    """Apply ``names`` (default: the whole pipeline) until a round changes nothing.

    ``check(model, pass_name)`` runs after every pass (tests hand in the ONNX
    checker, as minic's verifier runs after every pass).  A round that changes
    the serialized model is followed by another, at most ``max_rounds``.
    """
    from bridges.onnx.passes import DEFAULT_PIPELINE, PASSES

    names = list(DEFAULT_PIPELINE if names is None else names)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise UserError(f"unknown ONNX pass '{unknown[0]}'; available: {', '.join(PASSES)}")
    log = PassLog()
    for round_no in range(1, max_rounds + 1):
        before_round = model.SerializeToString(deterministic=True)
        for name in names:
            n_before = len(model.graph.node)
            model = PASSES[name](model)
            log.steps.append((round_no, name, n_before, len(model.graph.node)))
            if check is not None:
                check(model, name)
        log.rounds = round_no
        if model.SerializeToString(deterministic=True) == before_round:
            break
    return model, log
