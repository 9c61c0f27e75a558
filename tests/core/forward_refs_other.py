"""Another module's `Order`, annotated the same way as `forward_refs`' one, and a handler that
inherits its ``__call__`` from there."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel

from tests.core.forward_refs import Handler


class Order(BaseModel):
    sku: str


def ordered(payload: Optional["Order"]) -> str:  # noqa: UP037, UP045 - typing caches this one
    return type(payload).__module__


class ShopHandler(Handler):
    pass
