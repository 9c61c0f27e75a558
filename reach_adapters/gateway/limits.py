"""What one HTTP request may cost the server: body size, body read time, JSON depth, connections.

Every limit has a safe default and a ``reach serve`` flag; every refusal names the limit and
the flag, so an operator whose clients need more knows what to raise.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reach_adapters.gateway.errors import GatewayError, LimitExceededError
from reach_adapters.gateway.protocol import gateway_protocol

__all__ = ["JSON_PARSER_MAX_DEPTH", "BodyLimit", "ServerLimits", "nested_deeper"]

# pydantic's JSON parser refuses deeper documents itself, so a limit above it could not apply.
JSON_PARSER_MAX_DEPTH = 200


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """The limits `reach serve` applies; the defaults suit a gateway bound beyond loopback.

    `max_body_bytes` is the MCP SDK's own default request body limit, applied to ``/api`` too.
    """

    max_body_bytes: int = 4 * 1024 * 1024
    max_json_depth: int = 64
    body_timeout_s: float = 30.0
    head_timeout_s: float = 10.0
    limit_concurrency: int = 1000
    keep_alive_s: int = 5
    max_header_bytes: int = 16 * 1024
    retry_after_s: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.max_json_depth <= JSON_PARSER_MAX_DEPTH:
            msg = (
                f"max_json_depth (reach serve --max-json-depth) must be from 1 to {JSON_PARSER_MAX_DEPTH}, "
                f"got {self.max_json_depth}"
            )
            raise GatewayError(msg)
        for name in ("max_body_bytes", "limit_concurrency", "max_header_bytes", "keep_alive_s"):
            if getattr(self, name) < 1:
                msg = f"{name} must be at least 1, got {getattr(self, name)}"
                raise GatewayError(msg)
        for name in ("body_timeout_s", "head_timeout_s"):
            if not getattr(self, name) > 0:
                msg = f"{name} must be above 0 seconds, got {getattr(self, name)}"
                raise GatewayError(msg)

    def wrap(self, app: ASGIApp) -> ASGIApp:
        return BodyLimit(app, self)

    def uvicorn_options(self) -> dict[str, Any]:
        """uvicorn's own limits: connections and tasks at once (then 503), idle keep-alive time,
        the largest request head (400 past it), and the time to send it."""
        return {
            "http": gateway_protocol(self.head_timeout_s, self.max_header_bytes),
            "limit_concurrency": self.limit_concurrency,
            "timeout_keep_alive": self.keep_alive_s,
        }

    def too_deep(self) -> LimitExceededError:
        msg = (
            f"the request body is JSON nested deeper than {self.max_json_depth} levels; flatten it, "
            "or raise the limit with reach serve --max-json-depth"
        )
        return LimitExceededError(msg)


def nested_deeper(value: object, limit: int) -> bool:
    """Whether parsed JSON `value` nests containers more than `limit` levels deep.

    Iterative, and it stops at the first path past the limit.
    """
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


class BodyLimit:
    """Read each request body before the app sees it: at most `max_body_bytes`, within
    `body_timeout_s`, then hand it on as read.

    A declared ``Content-Length`` over the limit is refused at once, unread; a chunked body is
    counted as it comes and refused at the first chunk past the limit (413). A body that does
    not arrive in time (a client sending a byte a second) is cut off with 408. Like the MCP SDK's
    `RequestBodyLimitMiddleware`, but with answers that name the limit and the flag, and the
    read timeout, which the SDK lacks.
    """

    def __init__(self, app: ASGIApp, limits: ServerLimits) -> None:
        self.app = app
        self.limits = limits
        self._reads = _Deadlines(limits.body_timeout_s)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limits = self.limits
        declared = _content_length(scope)
        if declared is not None and declared > limits.max_body_bytes:
            await self._refuse(413, self._too_large(), scope, receive, send)
            return
        # Chunks joined once at the end: a body in one message (the usual case) is never copied.
        chunks: list[bytes] = []
        size = 0
        cached: deque[Message] = deque()
        task = asyncio.current_task()
        assert task is not None  # an ASGI app runs in a task
        cancelling = task.cancelling()
        cut_off = False
        self._reads.start(task)
        try:
            while size <= limits.max_body_bytes:
                message = await receive()
                if message["type"] != "http.request":
                    cached.append(message)
                    break
                chunk = message.get("body", b"")
                chunks.append(chunk)
                size += len(chunk)
                if not message.get("more_body", False):
                    break
        except asyncio.CancelledError:
            # Cut off by the deadline, and by nothing else: answered here, not cancelled.
            cut_off = self._reads.cut_off(task) and task.uncancel() <= cancelling
            if not cut_off:
                raise
        finally:
            self._reads.stop(task)
        if cut_off:
            problem = (
                f"the request body did not arrive within {limits.body_timeout_s:g} s; send it at once, "
                "or raise the limit with reach serve --body-timeout"
            )
            await self._refuse(408, LimitExceededError(problem), scope, receive, send)
            return
        if size > limits.max_body_bytes:
            await self._refuse(413, self._too_large(), scope, receive, send)
            return
        cached.appendleft({"type": "http.request", "body": b"".join(chunks), "more_body": False})

        async def replay() -> Message:
            return cached.popleft() if cached else await receive()

        await self.app(scope, replay, send)

    def _too_large(self) -> LimitExceededError:
        msg = (
            f"the request body is larger than {self.limits.max_body_bytes} bytes; send less, "
            "or raise the limit with reach serve --max-body-bytes"
        )
        return LimitExceededError(msg)

    @staticmethod
    async def _refuse(
        status: int, exc: LimitExceededError, scope: Scope, receive: Receive, send: Send
    ) -> None:
        # The rest of the body is never read: the server closes the connection after answering.
        body = {"error": str(exc), "error_type": type(exc).__name__}
        await JSONResponse(body, status, headers={"Connection": "close"})(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    """The request's declared ``Content-Length``; None without one, or one that is no number."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class _Deadlines:
    """Cancels the tasks still reading a body past their deadline.

    One timer for every read, moved on lazily, where a timer per request (what `anyio.move_on_after`
    arms) cost a gateway's MCP call more than the rest of `BodyLimit`. A `BodyLimit` serves one event
    loop at a time (uvicorn's).
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        # The tasks reading, and when each must be done.
        self._reading: dict[asyncio.Task[Any], float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, task: asyncio.Task[Any]) -> None:
        loop = task.get_loop()
        if loop is not self._loop:
            # Served on another loop now (an app served again after its first loop ended): the
            # old loop's timer will never fire, nor its reads end.
            self._loop, self._timer = loop, None
            self._reading.clear()
        deadline = loop.time() + self.timeout_s
        self._reading[task] = deadline
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expired, loop)

    def stop(self, task: asyncio.Task[Any]) -> None:
        self._reading.pop(task, None)

    def cut_off(self, task: asyncio.Task[Any]) -> bool:
        """Whether `task`, started and not stopped, was cancelled (once) for its deadline."""
        return task not in self._reading

    def _expired(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = loop.time()
        for task, deadline in list(self._reading.items()):
            if deadline <= now:
                # Its only await while reading is the body's: it is cancelled there.
                del self._reading[task]
                task.cancel()
        if self._reading:
            self._timer = loop.call_at(min(self._reading.values()), self._expired, loop)
