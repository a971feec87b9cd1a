"""One registry mechanism for every table of minic and its bridges: the ops,
the passes, the frontends' conversion tables, the bridges' emitters.

    CONVERTERS = Registry("ONNX op", UnsupportedError)

    @CONVERTERS.add("Relu", "Sigmoid")          # one function under several names
    def unary(b, x, a): ...

    CONVERTERS["Relu"]      # -> unary;  CONVERTERS["Foo"] raises UnsupportedError("no ONNX op 'Foo' ...")

A name registered twice is a bug in minic (ValueError at import); looking up a
name the table lacks raises the table's error class, naming what is missing.
``.get(name)`` keeps dict's meaning (None when absent), for callers that check.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable, TypeVar

from minic.errors import UserError

T = TypeVar("T")


class Registry(dict):
    """A dict of names to values that refuses duplicates and explains a missing name."""

    def __init__(self, what: str, error: type[Exception] = UserError):
        super().__init__()
        self.what, self.error = what, error

    @classmethod
    def of(cls, what: str, entries: dict, error: type[Exception] = UserError) -> "Registry":
        """A registry holding ``entries`` (a table written as one dict literal)."""
        table = cls(what, error)
        for name, value in entries.items():
            table.put(name, value)
        return table

    @classmethod
    def merged(cls, what: str, tables, error: type[Exception] = UserError) -> "Registry":
        """One registry of the entries of ``tables`` (a name in two of them is refused, as by ``put``):
        a frontend's op families each export a table, its driver merges them."""
        table = cls(what, error)
        for entries in tables:
            for name, value in entries.items():
                table.put(name, value)
        return table

    def put(self, name: Hashable, value: T) -> T:
        if name in self:
            raise ValueError(f"{self.what} {name!r} registered twice")
        self[name] = value
        return value

    def add(self, *names: Hashable) -> Callable[[T], T]:
        """Decorator: register the function under each of ``names``."""
        def wrap(fn: T) -> T:
            for name in names:
                self.put(name, fn)
            return fn
        return wrap

    def __missing__(self, name: Any):
        raise self.error(f"unknown {self.what} {name!r}" if isinstance(name, str) else
                         f"unknown {self.what}: {name}")
