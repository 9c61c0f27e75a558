"""Names that must not meet one already taken: a tool's, a definition's."""

from __future__ import annotations

from collections.abc import Container

__all__ = ["numbered"]


def numbered(base: str, taken: Container[str], *, limit: int | None = None) -> str:
    """`base`, or with the first number from 2 that makes it none of those `taken`
    (``orders_2``); cut so that it stays within `limit` characters, when given."""
    name, number = base, 1
    while name in taken:
        number += 1
        suffix = f"_{number}"
        name = (base if limit is None else base[: limit - len(suffix)]) + suffix
    return name
