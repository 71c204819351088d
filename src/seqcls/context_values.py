"""A context variable set for the length of a ``with`` block, and put back after it.

transformers calls attention functions and layer hooks deep inside a model's forward pass,
where no argument reaches them. What one packed batch needs there (its segments, the tokens
its head reads) is set in a ``ContextVar`` around the forward pass instead: visible to that
pass alone, thread- and task-safe, and reset however the block ends.

``TracedContextVar`` is such a variable that ``torch.compile`` can read too: dynamo cannot
trace ``ContextVar.get`` and breaks the graph there, so a compiled step reads a plain copy of
the value instead, set and put back with it (compiled steps run in the training thread only).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Generic, Protocol, TypeVar

import torch

Value = TypeVar("Value")


class Settable(Protocol[Value]):
    def set(self, value: Value, /) -> "Token[Value]": ...

    def reset(self, token: "Token[Value]", /) -> None: ...


class TracedContextVar(Generic[Value]):
    """A ``ContextVar`` whose value a graph that ``torch.compile`` traces reads as well."""

    def __init__(self, name: str, default: Value) -> None:
        self._variable: ContextVar[Value] = ContextVar(name, default=default)
        self._traced = default  # what a compiled graph reads: the value last set or put back

    def get(self) -> Value:
        if torch.compiler.is_compiling():
            return self._traced
        return self._variable.get()

    def set(self, value: Value, /) -> "Token[Value]":
        self._traced = value
        return self._variable.set(value)

    def reset(self, token: "Token[Value]", /) -> None:
        self._variable.reset(token)
        self._traced = self._variable.get()

    @contextmanager
    def traced(self, value: Value) -> Iterator[None]:
        """``holding`` inside a compiled graph: the plain copy alone, which dynamo traces."""
        before, self._traced = self._traced, value
        try:
            yield
        finally:
            self._traced = before


@contextmanager
def holding(variable: Settable[Value], value: Value) -> Iterator[None]:
    """While in this block, ``variable`` holds ``value``; after it, what it held before."""
    if isinstance(variable, TracedContextVar) and torch.compiler.is_compiling():
        with variable.traced(value):
            yield
        return
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)
