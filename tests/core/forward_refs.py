"""Functions whose annotations name, as nested text, a class of this module that shares its name
with one of the library's or of `forward_refs_other`'s."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel


class Capability(BaseModel):
    size: int


class Order(BaseModel):
    qty: int


def sizes(payload: list["Capability"]) -> int:  # noqa: UP037 - the nested text is the case
    return sum(item.size for item in payload)


def total(items: list["Capability"]) -> int:  # noqa: UP037 - the nested text is the case
    return sum(item.size for item in items)


def ordered(payload: Optional["Order"]) -> str:  # noqa: UP037, UP045 - typing caches this one
    return type(payload).__module__


class Handler:
    """Its ``__call__`` names this module's `Order`, also when a subclass elsewhere inherits it."""

    def __call__(self, payload: Order) -> str:
        return type(payload).__module__


EVALUATED: list[object] = []


def _noted(kind: type) -> type:
    EVALUATED.append(kind)
    return kind


def noted(payload: _noted(str)) -> str:  # type: ignore[valid-type]
    return str(payload)
