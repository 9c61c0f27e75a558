"""The gateway's small HTTP API: catalog, route, send, explain, health and metrics.

A routed call answers 200 with the `ReachResult` whatever its status (the outcome is data);
4xx means the request itself was wrong, and the body says what to fix.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from middleware import ReachResult
from reach_adapters.errors import InvalidMessageError, UnknownTaskError, describe_validation_error
from reach_adapters.gateway.gateway import Gateway

__all__ = ["API_PREFIX", "GatewayAPI", "RouteRequest", "SendRequest"]

API_PREFIX = "/api"
_MAX_DECISIONS = 1000
_NO_METRICS = (
    "metrics need the 'metrics' extra: pip install 'agent-reach[metrics]', then restart reach serve\n"
)

B = TypeVar("B", bound=BaseModel)


class RouteRequest(BaseModel):
    """``POST /api/route``: deliver to the best agent declaring `capability`."""

    model_config = ConfigDict(extra="forbid")

    capability: str = Field(min_length=1)
    payload: JsonValue = None
    options: dict[str, JsonValue] = Field(
        default_factory=dict, description="MetaInfo fields (timeout_ms, priority, ...), fallback, strategy."
    )


class SendRequest(BaseModel):
    """``POST /api/send``: deliver to the agent `agent_id`, bypassing selection."""

    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(min_length=1)
    payload: JsonValue = None
    options: dict[str, JsonValue] = Field(default_factory=dict)


class GatewayAPI:
    """Starlette routes over a `Gateway`; mount them beside the MCP endpoint."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        try:
            from reach_adapters.gateway.metrics import GatewayMetrics
        except ImportError:
            self.metrics: GatewayMetrics | None = None
        else:
            self.metrics = GatewayMetrics(gateway)

    def routes(self) -> list[Route]:
        return [
            Route(f"{API_PREFIX}/health", self.health, methods=["GET"]),
            Route(f"{API_PREFIX}/catalog", self.catalog, methods=["GET"]),
            Route(f"{API_PREFIX}/route", self.route, methods=["POST"]),
            Route(f"{API_PREFIX}/send", self.send, methods=["POST"]),
            Route(f"{API_PREFIX}/explain/{{task_id}}", self.explain, methods=["GET"]),
            Route(f"{API_PREFIX}/decisions", self.decisions, methods=["GET"]),
            Route("/metrics", self.prometheus, methods=["GET"]),
        ]

    async def health(self, request: Request) -> Response:
        return JSONResponse(self.gateway.status().model_dump(mode="json"))

    async def catalog(self, request: Request) -> Response:
        return JSONResponse([info.model_dump(mode="json") for info in self.gateway.router.catalog()])

    async def route(self, request: Request) -> Response:
        body = await _body(request, RouteRequest)
        if isinstance(body, Response):
            return body
        router = self.gateway.router
        return await _routed(lambda: router.route(body.capability, body.payload, **body.options))

    async def send(self, request: Request) -> Response:
        body = await _body(request, SendRequest)
        if isinstance(body, Response):
            return body
        router = self.gateway.router
        return await _routed(lambda: router.send(body.agent_id, body.payload, **body.options))

    async def explain(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            record = self.gateway.router.explain(task_id)
        except UnknownTaskError as exc:
            return _error(404, exc)
        out = record.to_dict()
        why_not = request.query_params.get("why_not")
        if why_not:
            out["why_not"] = record.why_not(why_not)
        return JSONResponse(out)

    async def decisions(self, request: Request) -> Response:
        raw = request.query_params.get("limit", "20")
        if not raw.isdigit() or not 1 <= int(raw) <= _MAX_DECISIONS:
            problem = (
                f"query parameter 'limit' must be a whole number from 1 to {_MAX_DECISIONS}, got {raw!r}"
            )
            return _error(400, InvalidMessageError(problem))
        records = self.gateway.recent(int(raw), request.query_params.get("capability"))
        return JSONResponse([record.to_dict() for record in records])

    async def prometheus(self, request: Request) -> Response:
        if self.metrics is None:
            return PlainTextResponse(_NO_METRICS, status_code=404)
        return Response(self.metrics.render(), media_type=self.metrics.content_type)


async def _body(request: Request, model: type[B]) -> B | Response:
    raw = await request.body()
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(error["type"] == "json_invalid" for error in exc.errors()):
            problem = f"the request body is not JSON; send an object like {_example(model)}"
        else:
            problem = (
                f"invalid request: {describe_validation_error(exc)}; send an object like {_example(model)}"
            )
        return _error(400, InvalidMessageError(problem))


async def _routed(call: Callable[[], Coroutine[Any, Any, ReachResult]]) -> Response:
    """Run one routed call; mistakes in the call itself are 400s, every outcome is a 200."""
    try:
        result = await call()
    except InvalidMessageError as exc:
        return _error(400, exc)
    return JSONResponse(result.model_dump(mode="json"))


def _error(status: int, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc), "error_type": type(exc).__name__}, status_code=status)


def _example(model: type[BaseModel]) -> str:
    first = "capability" if model is RouteRequest else "agent_id"
    return json.dumps({first: "...", "payload": {}, "options": {}})
