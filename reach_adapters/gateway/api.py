"""The gateway's small HTTP API: catalog, route, send, explain, health and metrics.

A routed call answers 200 with the `ReachResult` whatever its status (the outcome is data),
except when no agent had capacity for it: then 503 with ``Retry-After`` and the result, so
clients and proxies back off; and when the caller's request is refused: 403 (security.yaml does
not allow it), 409 (its task id is held for another request), 429 with ``Retry-After`` (over its
quota), with the result as body. 4xx means the request itself was wrong, and the body says what
to fix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Coroutine
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from middleware import ReachResult, ResultStatus
from reach_adapters.errors import InvalidMessageError, UnknownTaskError, describe_validation_error
from reach_adapters.gateway.gateway import Gateway
from reach_adapters.gateway.hangup import while_connected
from reach_adapters.gateway.limits import ServerLimits, nested_deeper
from reach_adapters.gateway.responses import JSONResponse
from reach_adapters.gateway.views import catalog_view, health_view
from reach_adapters.mcp import request_principal
from reach_adapters.router import CallOptions, ErrorKind, ExclusionKind
from reach_adapters.router.options import CALL_OPTIONS

__all__ = [
    "API_OPTIONS",
    "API_PREFIX",
    "REQUEST_FIELDS",
    "RESERVED_OPTIONS",
    "GatewayAPI",
    "RouteRequest",
    "SendRequest",
    "SubmitRequest",
    "error_response",
    "option_problem",
]

API_PREFIX = "/api"
_MAX_DECISIONS = 1000
_NO_METRICS = (
    "metrics need the 'metrics' extra: pip install 'agent-reach[metrics]', then restart reach serve\n"
)

Handler = Callable[[Request], Coroutine[Any, Any, Response]]

# Named by the request's own fields, so never an option.
REQUEST_FIELDS = frozenset({"capability", "agent_id", "payload"})
# Who calls is whom the request authenticates as, never what its body says; hop tokens come from
# other gateways, over MCP.
_IDENTITY = frozenset({"principal", "caller_token"})
RESERVED_OPTIONS = REQUEST_FIELDS | _IDENTITY
# What a request's `options` may set: the call options of the Python API, but who calls.
API_OPTIONS = CALL_OPTIONS - RESERVED_OPTIONS
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# A call that waited for capacity until its deadline times out; one that could not wait has none.
_UNDELIVERED_BY_LOAD = frozenset({ResultStatus.NO_CANDIDATE, ResultStatus.TIMEOUT})
# Refusals of the caller's request, as HTTP says them.
_REFUSED = {
    ErrorKind.PERMISSION_DENIED.value: 403,
    ErrorKind.IDEMPOTENCY_CONFLICT.value: 409,
    ErrorKind.QUOTA_EXCEEDED.value: 429,
}


def option_problem(names: AbstractSet[str]) -> str | None:
    """Why option `names` cannot go to the API (who calls, or a name it does not take), else None.

    The request's own fields (`REQUEST_FIELDS`) are each caller's to point to: a body's fields,
    the CLI's arguments.
    """
    identity = sorted(_IDENTITY & names)
    if identity:
        return (
            f"options may not set {identity}: who calls is whom the request authenticates as (its "
            "bearer token; see docs/security.md), never an option"
        )
    unknown = sorted(names - API_OPTIONS)
    if unknown:
        return f"unknown option(s) {unknown}; the options are {', '.join(sorted(API_OPTIONS))}"
    return None


def _no_reserved(options: dict[str, JsonValue]) -> dict[str, JsonValue]:
    clash = sorted(REQUEST_FIELDS & set(options))
    if clash:
        msg = f"options may not set {clash}: give them as the request's own fields"
        raise ValueError(msg)
    problem = option_problem(options.keys())
    if problem is not None:
        raise ValueError(problem)
    return options


class RouteRequest(BaseModel):
    """``POST /api/route``: deliver to the best agent declaring `capability`."""

    model_config = ConfigDict(extra="forbid")

    capability: str = Field(min_length=1)
    payload: JsonValue = None
    options: dict[str, JsonValue] = Field(
        default_factory=dict, description="MetaInfo fields (timeout_ms, priority, ...), fallback, strategy."
    )

    _options = field_validator("options")(_no_reserved)


class SendRequest(BaseModel):
    """``POST /api/send``: deliver to the agent `agent_id`, bypassing selection; `capability`
    says which one when the agent declares several."""

    model_config = ConfigDict(extra="forbid")

    agent_id: str = Field(min_length=1)
    capability: str | None = Field(None, min_length=1)
    payload: JsonValue = None
    options: dict[str, JsonValue] = Field(default_factory=dict)

    _options = field_validator("options")(_no_reserved)


class SubmitRequest(RouteRequest):
    """``POST /api/tasks``: the body of ``/api/route``, and where to POST the finished task."""

    callback_url: str | None = Field(None, min_length=1, max_length=2048)


B = TypeVar("B", RouteRequest, SendRequest, SubmitRequest)


class GatewayAPI:
    """Starlette routes over a `Gateway`; mount them beside the MCP endpoint."""

    def __init__(
        self, gateway: Gateway, *, loopback_only: bool = False, limits: ServerLimits | None = None
    ) -> None:
        """`loopback_only`: the server listens on a loopback address, so only loopback Host
        names are answered (no DNS rebinding from a web page)."""
        self.gateway = gateway
        self.loopback_only = loopback_only
        self.limits = ServerLimits() if limits is None else limits
        try:
            from reach_adapters.gateway.metrics import GatewayMetrics
        except ImportError:
            self.metrics: GatewayMetrics | None = None
        else:
            self.metrics = GatewayMetrics(gateway)

    def routes(self) -> list[Route]:
        # Imported here: the task routes build on this module's request models.
        from reach_adapters.gateway.chains_api import ChainsAPI
        from reach_adapters.gateway.consensus_api import ConsensusAPI
        from reach_adapters.gateway.tasks_api import TasksAPI

        guard = self.guarded
        return [
            Route(f"{API_PREFIX}/health", guard(self.health), methods=["GET"]),
            Route(f"{API_PREFIX}/catalog", guard(self.catalog), methods=["GET"]),
            Route(f"{API_PREFIX}/route", guard(self.route), methods=["POST"]),
            Route(f"{API_PREFIX}/send", guard(self.send), methods=["POST"]),
            Route(f"{API_PREFIX}/explain/{{task_id}}", guard(self.explain), methods=["GET"]),
            Route(f"{API_PREFIX}/decisions", guard(self.decisions), methods=["GET"]),
            Route("/metrics", guard(self.prometheus), methods=["GET"]),
            *TasksAPI(self).routes(guard),
            *ChainsAPI(self).routes(guard),
            *ConsensusAPI(self).routes(guard),
        ]

    def guarded(self, handler: Handler) -> Handler:
        """`handler` behind `foreign`: what a web page could send is refused before it runs."""

        async def guarded(request: Request) -> Response:
            refused = foreign(request, self.loopback_only)
            return refused if refused is not None else await handler(request)

        return guarded

    async def health(self, request: Request) -> Response:
        status = self.gateway.status()
        return JSONResponse(health_view(status), 503 if status.status == "unavailable" else 200)

    async def catalog(self, request: Request) -> Response:
        return JSONResponse(
            catalog_view(
                self.gateway.router.catalog(principal=request_principal(request.scope)), self.gateway.node_id
            )
        )

    async def route(self, request: Request) -> Response:
        body = await self._body(request, RouteRequest)
        if isinstance(body, Response):
            return body
        router = self.gateway.router
        options = cast(CallOptions, {**body.options, "principal": request_principal(request.scope)})
        return await self._routed(request, lambda: router.route(body.capability, body.payload, **options))

    async def send(self, request: Request) -> Response:
        body = await self._body(request, SendRequest)
        if isinstance(body, Response):
            return body
        router = self.gateway.router
        options = cast(CallOptions, {**body.options, "principal": request_principal(request.scope)})
        return await self._routed(
            request, lambda: router.send(body.agent_id, body.payload, capability=body.capability, **options)
        )

    async def explain(self, request: Request) -> Response:
        task_id = request.path_params["task_id"]
        try:
            record = self.gateway.router.explain(task_id, principal=request_principal(request.scope))
        except UnknownTaskError as exc:
            return error_response(404, exc)
        out = record.to_dict()
        why_not = request.query_params.get("why_not")
        if why_not:
            out["why_not"] = record.why_not(why_not)
        return JSONResponse(out)

    async def decisions(self, request: Request) -> Response:
        raw = request.query_params.get("limit", "20")
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= _MAX_DECISIONS:
            problem = (
                f"query parameter 'limit' must be a whole number from 1 to {_MAX_DECISIONS}, got {raw!r}"
            )
            return error_response(400, InvalidMessageError(problem))
        records = self.gateway.router.recent_decisions(
            int(raw), request.query_params.get("capability"), principal=request_principal(request.scope)
        )
        return JSONResponse([record.to_dict() for record in records])

    async def prometheus(self, request: Request) -> Response:
        if self.metrics is None:
            return PlainTextResponse(_NO_METRICS, status_code=404)
        return Response(self.metrics.render(), media_type=self.metrics.content_type)

    async def _body(self, request: Request, model: type[B]) -> B | Response:
        media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            got = media or "none"
            problem = f"send the request body as JSON with 'Content-Type: application/json', got {got!r}"
            return error_response(415, InvalidMessageError(problem))
        # Already read, within the size and time limits, by `BodyLimit`.
        raw = await request.body()
        limit = self.limits.max_json_depth
        try:
            body = model.model_validate_json(raw)
        except ValidationError as exc:
            errors = exc.errors()
            like = f"send an object like {_example(model)}"
            if any(error["type"] == "json_invalid" for error in errors):
                # The parser's own depth limit, above ours: the same answer as ours.
                if any("recursion limit" in error["msg"] for error in errors):
                    return error_response(400, self.limits.too_deep())
                problem = f"the request body is not JSON; {like}"
            else:
                problem = f"invalid request: {describe_validation_error(exc)}; {like}"
            return error_response(400, InvalidMessageError(problem))
        # The envelope is one level, its fields two: only payload and options can go deeper. A
        # body with fewer brackets than that cannot be (counting is cheap; walking a big one is not).
        deep = raw.count(b"[") + raw.count(b"{") > limit and (
            nested_deeper(body.payload, limit - 1) or nested_deeper(body.options, limit - 1)
        )
        if deep:
            return error_response(400, self.limits.too_deep())
        return body

    async def _routed(
        self, request: Request, call: Callable[[], Coroutine[Any, Any, ReachResult]]
    ) -> Response:
        """Run one routed call for as long as the client of `request` waits for it; mistakes in
        the call itself are 400s, a call security.yaml refuses a 403 (not allowed) or 429 with
        ``Retry-After`` (over quota), a task id held for another request a 409, a call no agent
        had capacity for a 503 with ``Retry-After``, every other outcome a 200."""
        try:
            result = await while_connected(request, call())
        except InvalidMessageError as exc:
            return error_response(400, exc)
        if result is None:
            # Nobody reads this: the client hung up, and its call was cancelled.
            return Response(status_code=499)
        body = result.model_dump(mode="json")
        refused = _REFUSED.get(result.error_type or "") if result.status is ResultStatus.REJECTED else None
        if refused is not None:
            wait = result.extra.get("retry_after_s")
            headers = {"Retry-After": str(math.ceil(wait))} if isinstance(wait, float | int) else None
            return JSONResponse(body, refused, headers=headers)
        if self._saturated(result):
            return JSONResponse(body, 503, headers={"Retry-After": str(self.limits.retry_after_s)})
        return JSONResponse(body)

    def _saturated(self, result: ReachResult) -> bool:
        """Whether the call went undelivered because every candidate was at max_concurrency, or
        the queue of calls waiting for one was full (the router's own overload)."""
        if result.delivered or result.status not in _UNDELIVERED_BY_LOAD:
            return False
        try:
            record = self.gateway.router.explain(result.task_id)
        except UnknownTaskError:
            return False
        return any(exclusion.kind is ExclusionKind.SATURATED for exclusion in record.exclusions)


def foreign(request: Request, loopback_only: bool) -> Response | None:
    """Refuse what a web page could send: another site's Origin, or a rebound Host name.

    The API has no authentication; served on a loopback address it must answer local programs
    only, not pages in the developer's browser.
    """
    host = request.headers.get("host", "")
    if loopback_only and _hostname(host) not in _LOOPBACK_HOSTS:
        problem = f"Host {host!r} is not this server's loopback address; call it as 127.0.0.1 or localhost"
        return error_response(421, InvalidMessageError(problem))
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != host:
        problem = f"cross-site requests are refused (Origin {origin!r}); call the API from a program"
        return error_response(403, InvalidMessageError(problem))
    return None


def _hostname(host: str) -> str | None:
    """The name in a Host header, without port or IPv6 brackets; None when it cannot be parsed."""
    try:
        return urlsplit(f"//{host}").hostname
    except ValueError:
        return None


def error_response(status: int, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc), "error_type": type(exc).__name__}, status_code=status)


def _example(model: type[BaseModel]) -> str:
    # A body of another shape (feedback, consensus) shows its own example.
    example = getattr(model, "example", None)
    if isinstance(example, dict):
        return json.dumps(example)
    first = "capability" if issubclass(model, RouteRequest) else "agent_id"
    return json.dumps({first: "...", "payload": {}, "options": {}})
