"""The API's async tasks: ``POST /api/tasks`` answers 202 with a task id at once, the task runs in
the background; ``GET /api/tasks/{task_id}`` (``?wait=S`` to wait for the end), ``DELETE`` to
cancel, ``GET /api/tasks`` to list. A principal sees and cancels only its own tasks (an admin,
every one): another's task is answered 404, as an unknown one is. ``GET /api/tasks?status=dead_letter``
lists the tasks a cluster's queue gave up after too many deliveries. While a cluster's Redis is out
of reach, every route answers 503 with ``Retry-After``. See docs/tasks.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, cast
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reach_adapters.errors import (
    IdempotencyConflictError,
    InvalidMessageError,
    TaskFinishedError,
    TaskQueueFullError,
    TaskStoreUnavailableError,
    UnknownTaskError,
)
from reach_adapters.gateway.api import API_PREFIX, SubmitRequest, error_response
from reach_adapters.gateway.callbacks import CallbackSender, callback_secret
from reach_adapters.gateway.responses import JSONResponse
from reach_adapters.mcp import request_principal
from reach_adapters.router import CallOptions
from reach_adapters.router.tasks import TaskStatus
from reach_adapters.security.spec import CallbackSpec

if TYPE_CHECKING:
    from reach_adapters.gateway.api import GatewayAPI, Handler

__all__ = ["TasksAPI"]

_MAX_LIST = 1000
_MAX_WAIT_S = 60.0
# Not a task status: the tasks a cluster's queue gave up, listed from its dead-letter stream.
_DEAD_LETTER = "dead_letter"
_STATUSES = frozenset(TaskStatus) | {_DEAD_LETTER}


class TasksAPI:
    """The task routes of a `GatewayAPI`; sets the router's callback sender."""

    def __init__(self, api: GatewayAPI) -> None:
        self.api = api
        self.router = api.gateway.router
        self.router.async_tasks.notifier = CallbackSender(self._callbacks)

    def routes(self, guard: Callable[[Handler], Handler]) -> list[Route]:
        tasks = f"{API_PREFIX}/tasks"
        return [
            Route(tasks, guard(_unavailable(self.submit)), methods=["POST"]),
            Route(tasks, guard(_unavailable(self.list)), methods=["GET"]),
            # Task ids are the caller's own strings: one with '/' must still name one task.
            Route(f"{tasks}/{{task_id:path}}", guard(_unavailable(self.get)), methods=["GET"]),
            Route(f"{tasks}/{{task_id:path}}", guard(_unavailable(self.cancel)), methods=["DELETE"]),
        ]

    def _callbacks(self) -> CallbackSpec:
        security = self.api.gateway.security
        return CallbackSpec() if security is None else security.spec.callbacks

    async def submit(self, request: Request) -> Response:
        body = await self.api._body(request, SubmitRequest)
        if isinstance(body, Response):
            return body
        if body.callback_url is not None:
            secret = callback_secret(self._callbacks())
            if isinstance(secret, str):
                return error_response(400, InvalidMessageError(secret))
        options = cast(CallOptions, {**body.options, "principal": request_principal(request.scope)})
        try:
            task = await self.router.submit(
                body.capability, body.payload, callback_url=body.callback_url, **options
            )
        except InvalidMessageError as exc:
            return error_response(400, exc)
        except IdempotencyConflictError as exc:
            return error_response(409, exc)
        except TaskQueueFullError as exc:
            wait = str(math.ceil(exc.retry_after_s))
            response = error_response(503, exc)
            response.headers["Retry-After"] = wait
            return response
        location = f"{API_PREFIX}/tasks/{quote(task.task_id, safe='')}"
        return JSONResponse(task.to_dict(), 202, headers={"Location": location})

    async def get(self, request: Request) -> Response:
        raw = request.query_params.get("wait")
        wait = _seconds(raw) if raw is not None else 0.0
        if wait is None:
            problem = f"query parameter 'wait' must be seconds from 0 to {_MAX_WAIT_S:g}, got {raw!r}"
            return error_response(400, InvalidMessageError(problem))
        task_id = request.path_params["task_id"]
        principal = request_principal(request.scope)
        try:
            if wait:
                task = await self.router.wait(task_id, timeout=wait, principal=principal)
            else:
                task = await self.router.task(task_id, principal=principal)
        except UnknownTaskError as exc:
            return error_response(404, exc)
        return JSONResponse(task.to_dict())

    async def cancel(self, request: Request) -> Response:
        try:
            task = await self.router.cancel(
                request.path_params["task_id"], principal=request_principal(request.scope)
            )
        except UnknownTaskError as exc:
            return error_response(404, exc)
        except TaskFinishedError as exc:
            return error_response(409, exc)
        return JSONResponse(task.to_dict())

    async def list(self, request: Request) -> Response:
        query = request.query_params
        raw = query.get("limit", "100")
        if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= _MAX_LIST:
            problem = f"query parameter 'limit' must be a whole number from 1 to {_MAX_LIST}, got {raw!r}"
            return error_response(400, InvalidMessageError(problem))
        status = query.get("status")
        if status is not None and status not in _STATUSES:
            choices = ", ".join([*TaskStatus, _DEAD_LETTER])
            problem = f"query parameter 'status' must be one of {choices}, got {status!r}"
            return error_response(400, InvalidMessageError(problem))
        principal = request_principal(request.scope)
        if status == _DEAD_LETTER:
            return JSONResponse(await self.router.dead_letters(limit=int(raw), principal=principal))
        tasks = await self.router.list_tasks(
            status=None if status is None else TaskStatus(status),
            limit=int(raw),
            principal=principal,
        )
        return JSONResponse([task.to_dict() for task in tasks])


def _unavailable(handler: Handler) -> Handler:
    """`handler`, answering 503 with ``Retry-After`` while the shared task store is out of reach."""

    async def handle(request: Request) -> Response:
        try:
            return await handler(request)
        except TaskStoreUnavailableError as exc:
            response = error_response(503, exc)
            response.headers["Retry-After"] = str(math.ceil(exc.retry_after_s))
            return response

    return handle


def _seconds(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0 <= value <= _MAX_WAIT_S else None
