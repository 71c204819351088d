"""A context variable set for the length of a ``with`` block, and put back after it.

transformers calls attention functions and layer hooks deep inside a model's forward pass,
where no argument reaches them. What one packed batch needs there (its segments, the tokens
its head reads) is set in a ``ContextVar`` around the forward pass instead: visible to that
pass alone, thread- and task-safe, and reset however the block ends.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

Value = TypeVar("Value")


@contextmanager
def holding(variable: ContextVar[Value], value: Value) -> Iterator[None]:
    """While in this block, ``variable`` holds ``value``; after it, what it held before."""
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)
