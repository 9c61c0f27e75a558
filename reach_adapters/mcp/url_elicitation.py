"""URL-mode elicitation (MCP 2025-11-25) across the router.

A server whose tool needs its user to open a URL first (to authorize, to pay) refuses the call
with JSON-RPC error -32042, the URLs in its data. Only the caller can act on it: the router
neither retries it nor holds it against the server, and a gateway raises it to its MCP client as
the server sent it. The server's later word that the user is done
(``notifications/elicitation/complete``) goes to the caller that was handed that elicitation, found
by its id, never guessed.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp.types import URL_ELICITATION_REQUIRED, ElicitCompleteNotification, ElicitCompleteNotificationParams

from middleware import Fault, ReachMessage, ReachResult, ResultStatus, ensure_json
from middleware.fast import amend
from reach_adapters.router import error_result

if TYPE_CHECKING:
    from reach_adapters.mcp.upstream import Call

__all__ = ["ERROR_TYPE", "URL_ELICITATION", "Completions", "url_error", "url_required"]

logger = logging.getLogger(__name__)

# Where a result keeps the server's error: {"message": ..., "data": ...} as the server sent them.
URL_ELICITATION = "url_elicitation"
ERROR_TYPE = "UrlElicitationRequiredError"
# How many handed-out elicitations a session remembers; the oldest are forgotten first.
_REMEMBERED = 256


def url_required(message: ReachMessage, agent_id: str, tool: str, exc: MCPError) -> ReachResult:
    """The result of a call the server refused until its user opens a URL (error -32042)."""
    error = f"MCP server {agent_id} needs {tool!r}'s caller to open a URL first: {exc.message}"
    # The caller's fault (DESIGN §6, as a permission refused): only its user can act, every replica
    # would ask the same, and the server is healthy. Rejected: not retried, the breaker untouched.
    result = error_result(
        message,
        ResultStatus.REJECTED,
        ERROR_TYPE,
        error,
        fault=Fault.CALLER,
        agent_id=agent_id,
        delivered=True,
    )
    kept = {"message": exc.message, "data": ensure_json(exc.error.data, where="error.data")}
    amend(result, {"extra": {URL_ELICITATION: kept}})
    return result


def url_error(result: ReachResult) -> MCPError | None:
    """The -32042 error that `result` (made by `url_required`) stands for, for a gateway to raise
    to its MCP client: MCP says it only as that error, which clients know to act on."""
    kept = result.extra.get(URL_ELICITATION)
    if not isinstance(kept, dict):
        return None
    said = kept.get("message")
    return MCPError(URL_ELICITATION_REQUIRED, said if isinstance(said, str) else ERROR_TYPE, kept.get("data"))


def elicitation_ids(data: Any) -> list[str]:
    """The ids of the elicitations a -32042 error's data lists."""
    listed = data.get("elicitations") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return []
    ids = (each.get("elicitationId") for each in listed if isinstance(each, dict))
    return [each for each in ids if isinstance(each, str)]


class Completions:
    """Which call each URL elicitation of one upstream session was handed to, by its id, so that
    the server's ``notifications/elicitation/complete`` reaches that caller and no other."""

    def __init__(self, agent_id: str, in_flight: set[Call]) -> None:
        self._agent_id = agent_id
        self._in_flight = in_flight
        self._handed: OrderedDict[str, Call] = OrderedDict()

    def expect(self, elicitation_ids: Iterable[str | None], call: Call) -> None:
        """`call`'s caller was handed these elicitations (asked mid-call, or in a -32042 error);
        one without an id cannot be completed."""
        relay = call.relay
        if relay is None or relay.rounds:
            # Nobody to tell, or a 2026-07-28 caller: that version has no such notification.
            return
        for elicitation_id in elicitation_ids:
            if elicitation_id is None:
                continue
            self._handed[elicitation_id] = call
            self._handed.move_to_end(elicitation_id)
        while len(self._handed) > _REMEMBERED:
            self._handed.popitem(last=False)

    async def complete(self, params: ElicitCompleteNotificationParams) -> None:
        """Tell the caller that was handed `params.elicitation_id` that its user is done."""
        call = self._handed.pop(params.elicitation_id, None)
        if call is None or call.relay is None:
            logger.debug(
                "MCP server %s completed elicitation %r, handed to no caller of the router",
                self._agent_id,
                params.elicitation_id,
            )
            return
        try:
            # On the call's own stream while it runs; after it (the -32042 case), on the caller's
            # session's, as the server itself would send it.
            await call.relay.notify(
                ElicitCompleteNotification(params=params), related=call in self._in_flight
            )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("the caller handed elicitation %r has gone", params.elicitation_id)
