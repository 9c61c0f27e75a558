"""The reads, prompts and completions the router's MCP server asks of its upstream servers for a
client, admitted and accounted as routed calls are.

Each reaches an upstream server on the client's behalf, so the router's guard admits it as a call
(the principal declared and allowed to reach something, one call off its quota) and the router's
observers hear how it went (the audit log writes a line of it).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND

from middleware import Fault, MetaInfo
from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.router import Access, ReachMessage, Router

__all__ = ["Accesses", "Answered"]

Request = Literal["resources/read", "prompts/get", "completion/complete"]
# The errors of a request that was wrong (an unknown URI or prompt, bad arguments), whoever said so;
# any other is the server's, or that of its connection. A client that withdrew its request did so.
_CALLERS = frozenset({INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND})


@dataclass(slots=True)
class Answered:
    """Which server answered, set by the request once it has."""

    agent: MCPServerAgent | None = None


class Accesses:
    """Admits each request of a client and tells the router's observers of its outcome."""

    def __init__(
        self, router: Router, principal_of: Callable[[ServerRequestContext[Any, Any]], str | None]
    ) -> None:
        self._router = router
        self._principal_of = principal_of

    @asynccontextmanager
    async def access(
        self, ctx: ServerRequestContext[Any, Any], request: Request, target: str
    ) -> AsyncIterator[Answered]:
        """Admit the request, or raise `MCPError` (invalid request) saying the guard's rule; then
        note its outcome: ``ok``, or ``error`` with whose fault it was when the body raised."""
        started = time.time()
        clock = time.perf_counter()
        guard = self._router.guard
        principal = None if guard is None else self._principal_of(ctx)
        answered = Answered()
        status: Literal["ok", "error", "rejected"] = "rejected"
        fault: Fault | None = Fault.CALLER
        try:
            if guard is not None and principal is not None:
                message = ReachMessage(meta_info=MetaInfo(principal=principal))
                refusal = await guard.admit(message, None)
                if refusal is not None:
                    data = {"error_type": refusal.kind.value, "retry_after_s": refusal.retry_after_s}
                    raise MCPError(INVALID_REQUEST, refusal.error, data)
            status = "error"
            yield answered
            status, fault = "ok", None
        except MCPError as exc:
            if status == "error" and exc.code not in _CALLERS:
                fault = Fault.AGENT
            raise
        except Exception:
            status, fault = "error", Fault.ROUTER
            raise
        finally:
            agent_id = None if answered.agent is None else answered.agent.agent_id
            duration_ms = (time.perf_counter() - clock) * 1000
            self._router.note_access(
                Access(request, target, principal, agent_id, status, fault, started, duration_ms)
            )
