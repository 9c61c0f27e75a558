"""Functions whose annotations name, as nested text, a class of this module that shares its name
with one of the library's."""

from __future__ import annotations

from pydantic import BaseModel


class Capability(BaseModel):
    size: int


def sizes(payload: list["Capability"]) -> int:  # noqa: UP037 - the nested text is the case
    return sum(item.size for item in payload)


def total(items: list["Capability"]) -> int:  # noqa: UP037 - the nested text is the case
    return sum(item.size for item in items)


EVALUATED: list[object] = []


def _noted(kind: type) -> type:
    EVALUATED.append(kind)
    return kind


def noted(payload: _noted(str)) -> str:  # type: ignore[valid-type]
    return str(payload)
