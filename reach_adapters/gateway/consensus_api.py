"""The API's consensus and feedback: ``POST /api/consensus`` asks several agents and decides
(answered like ``/api/route``: the result, whose ``extra.votes`` has every vote);
``POST /api/feedback`` scores a finished task, moving the serving agents' ratings. A principal
rates only its own tasks: another's is answered 404, as an unknown one is. See docs/consensus.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from middleware.models import MAX_VOTERS
from reach_adapters.errors import (
    InvalidFeedbackError,
    TaskAlreadyRatedError,
    UnknownAgentError,
    UnknownTaskError,
)
from reach_adapters.gateway.api import API_PREFIX, RouteRequest, error_response
from reach_adapters.gateway.responses import JSONResponse
from reach_adapters.mcp import request_principal
from reach_adapters.router import CallOptions
from reach_adapters.router.consensus.feedback import MAX_REASON

if TYPE_CHECKING:
    from reach_adapters.gateway.api import GatewayAPI, Handler

__all__ = ["ConsensusAPI", "ConsensusRequest", "FeedbackRequest"]


class ConsensusRequest(RouteRequest):
    """The body of ``/api/route``, and how the consensus decides: `n` agents asked, `quorum`
    agreeing needed, ``vote`` by ``majority`` or by the capability `judge`. Strict: a count is a
    JSON integer, never ``true``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    example: ClassVar[dict[str, JsonValue]] = {"capability": "...", "payload": {}, "n": 3, "quorum": 2}

    n: int = Field(3, ge=1, le=MAX_VOTERS)
    quorum: int = Field(2, ge=1, le=MAX_VOTERS)
    vote: Literal["majority", "judge"] = "majority"
    judge: str | None = Field(None, min_length=1)


class FeedbackRequest(BaseModel):
    """``POST /api/feedback``: `score` from 0 (bad) to 1 (good) for a finished task."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(min_length=1, max_length=128)
    # Any JSON: the router says what is wrong with a score, the same way for every caller.
    score: JsonValue
    reason: str | None = Field(None, max_length=MAX_REASON)

    # What `GatewayAPI._body` checks for nesting depth: the score is, through its checks, flat.
    payload: ClassVar[None] = None
    options: ClassVar[dict[str, JsonValue]] = {}
    example: ClassVar[dict[str, JsonValue]] = {"task_id": "...", "score": 1.0, "reason": "..."}


class ConsensusAPI:
    """The consensus and feedback routes of a `GatewayAPI`."""

    def __init__(self, api: GatewayAPI) -> None:
        self.api = api
        self.router = api.gateway.router

    def routes(self, guard: Callable[[Handler], Handler]) -> list[Route]:
        return [
            Route(f"{API_PREFIX}/consensus", guard(self.consensus), methods=["POST"]),
            Route(f"{API_PREFIX}/feedback", guard(self.feedback), methods=["POST"]),
        ]

    async def consensus(self, request: Request) -> Response:
        read = await self.api._body(request, ConsensusRequest)
        if isinstance(read, Response):
            return read
        body = cast(ConsensusRequest, read)
        router = self.router
        options = cast(CallOptions, {**body.options, "principal": request_principal(request.scope)})
        return await self.api._routed(
            request,
            lambda: router.consensus(
                body.capability,
                body.payload,
                n=body.n,
                quorum=body.quorum,
                vote=body.vote,
                judge=body.judge,
                **options,
            ),
        )

    async def feedback(self, request: Request) -> Response:
        # Read, like every body, within the limits and with the same answers to a malformed one.
        read = await self.api._body(request, cast("type[RouteRequest]", FeedbackRequest))
        if isinstance(read, Response):
            return read
        body = cast(FeedbackRequest, read)
        try:
            done = await self.router.feedback(
                body.task_id,
                cast(float, body.score),
                reason=body.reason,
                principal=request_principal(request.scope),
            )
        except (UnknownTaskError, UnknownAgentError) as exc:
            return error_response(404, exc)
        except TaskAlreadyRatedError as exc:
            return error_response(409, exc)
        except InvalidFeedbackError as exc:
            return error_response(400, exc)
        return JSONResponse(done.model_dump(mode="json"))
