"""Rewrite rules: the one mechanism of minic's two rewriters, the graph passes'
driver (``minic/passes/rewrite.py``) and the Loop IR simplifier (``loops_simplify.py``).

A rule is a function rooted at nodes of some ops (at every node when it names
none), its docstring stating its identity; given what it sees at a node, it
returns the replacement, or None where the identity does not apply.  A table of
rules is tried in order, and the first that applies wins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable


@dataclass(frozen=True)
class Rule:
    """``fn`` tried at every node whose op is one of ``ops`` (every node when ``ops`` is empty)."""
    ops: tuple[str, ...]
    fn: Callable[[Any], Any]

    @property
    def identity(self) -> str:
        return (self.fn.__doc__ or "").strip().splitlines()[0]


def rule(*ops: str) -> Callable[[Callable[[Any], Any]], Rule]:
    """Decorator: the function is a rewrite rule rooted at nodes of ``ops`` (of any op if none)."""
    return lambda fn: Rule(tuple(ops), fn)


class Rules:
    """A table of rules, looked up by the op of the node at hand."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.rules = list(rules)
        self._at: dict[str, list[Rule]] = {}

    def apply(self, op: str, match: Any) -> Any:
        """The first replacement a rule for ``op`` gives at ``match``, or None."""
        if op not in self._at:
            self._at[op] = [r for r in self.rules if not r.ops or op in r.ops]
        for r in self._at[op]:
            result = r.fn(match)
            if result is not None:
                return result
        return None
