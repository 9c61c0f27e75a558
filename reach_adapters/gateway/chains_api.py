"""``POST /api/compensate/{task_id}``: undo a finished task (a succeeded reach of a capability
that declares ``compensate_with``, or a finished chain), answering what was undone, what could not
be, and what had been undone already. A principal compensates only its own tasks (an admin, any):
another's task is answered 404, as an unknown one is. See docs/chains.md."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reach_adapters.errors import UnknownTaskError
from reach_adapters.gateway.api import API_PREFIX, error_response
from reach_adapters.gateway.responses import JSONResponse
from reach_adapters.mcp import request_principal

if TYPE_CHECKING:
    from reach_adapters.gateway.api import GatewayAPI, Handler

__all__ = ["ChainsAPI"]


class ChainsAPI:
    """The compensation route of a `GatewayAPI`."""

    def __init__(self, api: GatewayAPI) -> None:
        self.router = api.gateway.router

    def routes(self, guard: Callable[[Handler], Handler]) -> list[Route]:
        # Task ids are the caller's own strings, and a chain's steps' ids hold '/'.
        path = f"{API_PREFIX}/compensate/{{task_id:path}}"
        return [Route(path, guard(self.compensate), methods=["POST"])]

    async def compensate(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            report = await self.router.compensate(task_id, principal=request_principal(request.scope))
        except UnknownTaskError as exc:
            return error_response(404, exc)
        return JSONResponse(report)
