"""A tiny pass manager: run named passes in order, repeat until nothing changes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import onnx

from minic.errors import UserError


@dataclass(frozen=True)
class PassStep:
    round: int
    name: str
    nodes_before: int
    nodes_after: int
    changed: bool


@dataclass
class PassLog:
    """What each pass did: one step per pass run, and how many rounds ran."""

    steps: list[PassStep] = field(default_factory=list)
    rounds: int = 0

    def changed(self) -> list[PassStep]:
        """The steps that rewrote something (a rewrite may keep the node count)."""
        return [s for s in self.steps if s.changed]


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
        round_changed = False
        for name in names:
            before, n_before = _bytes(model), len(model.graph.node)
            model = PASSES[name](model)
            changed = _bytes(model) != before
            round_changed |= changed
            log.steps.append(PassStep(round_no, name, n_before, len(model.graph.node), changed))
            if check is not None:
                check(model, name)
        log.rounds = round_no
        if not round_changed:
            break
    return model, log


def _bytes(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString(deterministic=True)
