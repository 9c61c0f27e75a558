"""Listings gathered from several servers, served a page at a time: one huge answer may be more
than a client's transport takes (the SDK's HTTP client refuses a server-sent event over 1 MiB).

The first request gathers the whole listing; the pages after it are read from that listing,
kept under an unguessable token for the client that asked (its principal), a bounded number of
listings at a time.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, PaginatedRequestParams

__all__ = ["PAGE_SIZE", "Pages"]

T = TypeVar("T")

# Items per page: a few hundred kilobytes at most for resources or prompts.
PAGE_SIZE = 500
# Listings kept for their next pages; the oldest goes first, its cursors then refused.
_KEPT = 64


class Pages:
    """The listings whose next pages clients may still ask for."""

    def __init__(self, page_size: int = PAGE_SIZE) -> None:
        self._size = page_size
        # token -> (what was listed, for whom, the listing)
        self._kept: OrderedDict[str, tuple[str, str | None, list[Any]]] = OrderedDict()

    async def page(
        self,
        what: str,
        params: PaginatedRequestParams | None,
        principal: str | None,
        listing: Callable[[], Awaitable[list[T]]],
    ) -> tuple[list[T], str | None]:
        """The page `params` asks for, and the cursor of the next one (None after the last):
        the first from a new `listing` of `what`, the others from the one their cursor names."""
        cursor = None if params is None else params.cursor
        if cursor is None:
            items = await listing()
            if len(items) <= self._size:
                return items, None
            token = secrets.token_urlsafe(12)
            self._kept[token] = (what, principal, items)
            if len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
            return self._slice(token, items, 0)
        token, _, offset = cursor.rpartition(":")
        kept = self._kept.get(token)
        if kept is None or kept[:2] != (what, principal) or not offset.isdigit():
            msg = f"Invalid or expired cursor {cursor!r}: list again from the start"
            raise MCPError(INVALID_PARAMS, msg)
        return self._slice(token, kept[2], int(offset))

    def _slice(self, token: str, items: list[T], start: int) -> tuple[list[T], str | None]:
        end = start + self._size
        if end >= len(items):
            self._kept.pop(token, None)
            return items[start:], None
        return items[start:end], f"{token}:{end}"
