"""One reach delivered to an A2A agent: the request sent, its events followed to a final state,
and every way the exchange can fail turned into what the router expects.

Invoke and stream share `Exchange.events`: it sends the message (streamed when the agent
streams, so the task's id is known from the first event), follows a task still running when the
send ends (subscribe, or poll GetTask) until it is final, and sends CancelTask for a task it
leaves behind, whether the caller cancelled, the deadline passed or the connection broke.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any, cast
from uuid import uuid4

import httpx
from a2a.client import ClientCallContext
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.types.a2a_pb2 import (
    Artifact,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
)
from a2a.utils.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    InvalidRequestError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from middleware import ReachMessage
from reach_adapters.a2a.client import Link
from reach_adapters.a2a.errors import (
    A2ABusyError,
    A2ACallTimeoutError,
    A2AClosedError,
    A2AConnectionError,
    A2ADeniedError,
    A2ANotTakenError,
    A2AOfflineError,
    A2AProtocolError,
)
from reach_adapters.a2a.hop import pack
from reach_adapters.a2a.parts import fill_part
from reach_adapters.a2a.states import FINAL, RUNNING
from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import UNKNOWN_OUTCOME, refused
from reach_adapters.security import redact_text

__all__ = ["Exchange", "Turn", "request_for"]

logger = logging.getLogger(__name__)

# Read once: a protobuf enum's value looked up by name costs a Python call each time.
_USER = Role.ROLE_USER
# HTTP statuses by which the agent refuses the router's credentials.
_DENIED = frozenset({401, 403})
# Errors by which the agent says the request was wrong: the caller's to fix, not retried.
_CALLERS = (
    InvalidParamsError,
    InvalidRequestError,
    ContentTypeNotSupportedError,
    TaskNotFoundError,
    TaskNotCancelableError,
)


class Turn:
    """Where a message goes in a conversation: the remote context, and the task it answers."""

    __slots__ = ("context_id", "task_id")

    def __init__(self, context_id: str = "", task_id: str = "") -> None:
        self.context_id = context_id
        self.task_id = task_id


def request_for(
    message: ReachMessage, skill: str, carried: dict[str, Any], turn: Turn, return_immediately: bool
) -> SendMessageRequest:
    """The A2A request for `message`: its payload (or its answer to a question) as parts, the
    task's hop metadata (`request_meta`'s, packed by `hop.pack`) and the skill it asks for, in
    the conversation `turn` names."""
    info = message.meta_info
    resuming = "resume" in info.__pydantic_fields_set__
    # Filled in place: a message passed to a constructor is copied, and this is on every call.
    request = SendMessageRequest()
    if return_immediately:
        request.configuration.return_immediately = True
    outgoing = request.message
    outgoing.message_id = uuid4().hex
    outgoing.role = _USER
    fill_part(outgoing.parts.add(), info.resume if resuming else message.raw_payload)
    fields = outgoing.metadata.fields
    pack(carried, fields)
    fields["skill"].string_value = skill
    outgoing.context_id = turn.context_id
    outgoing.task_id = turn.task_id
    return request


class Exchange:
    """One call's events, gathered into the task (or the reply message) they describe."""

    __slots__ = (
        "_detached",
        "_link",
        "_lost",
        "_request",
        "_stated",
        "_subscribing",
        "_timeout_s",
        "reply",
        "task",
    )

    def __init__(
        self, link: Link, request: SendMessageRequest, timeout_s: float, lost: Callable[[str], None]
    ) -> None:
        self._link = link
        self._request = request
        self._timeout_s = timeout_s
        self._lost = lost
        # Whether a task left running is followed by subscribing; polled once the agent cannot.
        self._subscribing = link.streaming
        # Whether the send's first event may name a task still running (see `_first`).
        self._detached = link.streaming or request.configuration.return_immediately
        self.task: Task | None = None
        self.reply: Message | None = None
        # Whether the agent said the task's state (a task made up from an artifact chunk has none).
        self._stated = False

    @property
    def done(self) -> bool:
        """Answered: a reply, a task in a final state, or one in a state no follow-up would
        change (an unknown one, which `task_result` reports instead of waiting out the deadline)."""
        if self.reply is not None:
            return True
        task = self.task
        return task is not None and (
            task.status.state in FINAL or (self._stated and task.status.state not in RUNNING)
        )

    async def events(self) -> AsyncIterator[Sequence[Part]]:
        """Run the call to its end, yielding each artifact chunk's parts as they come."""
        client = self._link.client
        if client is None:
            msg = f"A2A agent at {self._link.shown} is closed"
            raise A2AOfflineError(msg)
        context = ClientCallContext(timeout=self._timeout_s)
        link = self._link
        link.calls += 1
        link.quiet.clear()
        # Typed as an iterator; the SDK's client is an async generator, which has aclose().
        stream = cast(
            "AsyncGenerator[StreamResponse, None]", client.send_message(self._request, context=context)
        )
        try:
            try:
                event = await self._first(stream)
                while event is not None:
                    chunk = self._take(event)
                    if chunk:
                        yield chunk
                    # Read to the stream's end even once the task is final: a response read whole
                    # leaves its connection to the next call, one closed early takes it along.
                    event = await anext(stream, None)
                rounds = 0
                while not self.done:
                    if rounds:
                        # A stream cut short again, or a task still working: not in a tight loop.
                        await asyncio.sleep(self._link.options.poll_interval_s)
                    rounds += 1
                    async for chunk in self._follow(context):
                        yield chunk
            except (A2AError, httpx.HTTPError) as exc:
                raise self._failed(exc) from None
        except BaseException:
            # Cancelled, past the deadline, closed by the caller, or failed: a task left running
            # on the agent is told to stop, in the background so nothing here waits on it.
            task = self.task
            if task is not None and not self.done and not self._link.closing:
                self._link.cancel_soon(task.id)
            raise
        finally:
            if self.task is not None:
                link.live.discard(self.task.id)
            link.calls -= 1
            if not link.calls:
                link.quiet.set()

    async def _first(self, stream: AsyncGenerator[StreamResponse, None]) -> StreamResponse | None:
        """The send's first event, which names the task. When that task may still be running
        (a stream's first event, or an answer asked for at once), it is read apart from the
        caller's task: a call cancelled before it arrives leaves it to be read, and the task it
        names cancelled. A blocking send is answered once its task is final or waits for the
        caller, with nothing left to cancel: read in place, it spares every call a task."""
        if not self._detached:
            return await anext(stream, None)
        # The reader hands the event over through a plain future: a cancelled caller cancels
        # only that, and the reader learns so. (A shielded task costs a loop turn more per call.)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[StreamResponse | None] = loop.create_future()
        reader = loop.create_task(self._read_first(stream, answer))
        try:
            return await answer
        except asyncio.CancelledError:
            # The event came after all, but the call was cancelled before it could take it.
            if answer.done() and not answer.cancelled() and answer.exception() is None:
                self._orphaned(answer.result(), stream)
            else:
                self._link.hold(reader)
            raise

    async def _read_first(
        self, stream: AsyncGenerator[StreamResponse, None], answer: asyncio.Future[StreamResponse | None]
    ) -> None:
        """Read the first event into `answer`; if the call gave up meanwhile, deal with it here."""
        try:
            event = await anext(stream, None)
        except asyncio.CancelledError:
            answer.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the caller, which judges it
            if answer.cancelled():
                self._link.close_soon(stream)
            else:
                answer.set_exception(exc)
            return
        if answer.cancelled():
            self._orphaned(event, stream)
        else:
            answer.set_result(event)

    def _orphaned(self, event: StreamResponse | None, stream: AsyncGenerator[StreamResponse, None]) -> None:
        """The first event of a call already abandoned: cancel the task it names, if running."""
        if event is not None:
            self._take(event)
            if self.task is not None and not self.done:
                self._link.cancel_soon(self.task.id)
        self._link.close_soon(stream)

    async def _follow(self, context: ClientCallContext) -> AsyncIterator[Sequence[Part]]:
        """A task the send left running: its events (subscribe), or its state polled."""
        client = self._link.client
        task = self.task
        if task is None or client is None:
            msg = f"A2A agent at {self._link.shown} ended the send with neither a task nor a message"
            raise A2AProtocolError(msg)
        if self._subscribing:
            try:
                async for event in client.subscribe(SubscribeToTaskRequest(id=task.id), context=context):
                    chunk = self._take(event)
                    if chunk:
                        yield chunk
                    if self.done:
                        return
            except UnsupportedOperationError:
                # The task ended between the send and the subscribe, or the agent cannot
                # resubscribe: GetTask says which, and polling follows it from now on.
                self._subscribing = False
        self._take_task(await client.get_task(GetTaskRequest(id=task.id), context=context))

    def _take(self, event: StreamResponse) -> Sequence[Part] | None:
        """Lay `event` into the task (or the reply); an artifact chunk's parts are returned."""
        chunk = None
        kind = event.WhichOneof("payload")
        if kind == "task":
            self._take_task(event.task)
        elif kind == "message":
            self.reply = event.message
        elif kind == "status_update":
            stated = event.status_update
            known = self._task(stated.task_id, stated.context_id)
            known.status.CopyFrom(stated.status)
            if stated.HasField("metadata"):
                # A reach server's own word on its result (status, fault, error type) comes here.
                known.metadata.MergeFrom(stated.metadata)
            self._stated = True
        elif kind == "artifact_update":
            update = event.artifact_update
            _merge(self._task(update.task_id, update.context_id), update.artifact, append=update.append)
            chunk = update.artifact.parts
        task = self.task
        # The id first: once the task is followed, every later event stops there.
        if task is not None and task.id not in self._link.live and not self.done:
            self._link.live.add(task.id)
            if self._link.closing:
                self._link.cancel_soon(task.id)  # its id came after `aclose` cancelled the others
        return chunk

    def _take_task(self, task: Task) -> None:
        self._stated = True
        if self.task is None or not task.artifacts:
            self.task = task
            return
        # A snapshot after streamed chunks: its status is newer, and its artifacts at least as whole;
        # its metadata holds a reach server's word on that status.
        self.task.status.CopyFrom(task.status)
        self.task.metadata.CopyFrom(task.metadata)
        del self.task.artifacts[:]
        self.task.artifacts.extend(task.artifacts)

    def _task(self, task_id: str, context_id: str) -> Task:
        if self.task is None:
            self.task = Task(id=task_id, context_id=context_id)
        return self.task

    def _failed(self, exc: A2AError | httpx.HTTPError) -> Exception:
        """`_failure`, said of the exchange as far as it went: once the agent took the task, a
        refusal of a later request (following the task: a 429, a refused connection) comes after
        work it may have done, so no replica is sent the task unless it is safe to repeat."""
        failure = self._failure(exc)
        if self.task is None or getattr(failure, "delivered", None) is not False:
            return failure
        msg = f"{failure}, after it took the call as task {self.task.id}; {UNKNOWN_OUTCOME}"
        return A2AConnectionError(msg)

    def _failure(self, exc: A2AError | httpx.HTTPError) -> Exception:
        """What a failed exchange means for the router, as the exception to raise."""
        shown = self._link.shown
        if self._link.closing:
            msg = f"A2A agent at {shown} was closed during the call; its task was told to stop"
            return A2AClosedError(msg)
        if isinstance(exc, _CALLERS):
            msg = f"A2A agent at {shown} refused the request: {exc.message}"
            return InvalidMessageError(msg)
        if isinstance(exc, UnsupportedOperationError):
            # A message its task does not take now (a second answer at once, say): the caller's.
            msg = f"A2A agent at {shown} did not take the message: {exc.message}"
            return A2ANotTakenError(msg)
        # The SDK wraps httpx's errors; what went wrong is told by the one it wraps.
        cause = exc.__cause__ if isinstance(exc, A2AClientError) else exc
        if isinstance(cause, httpx.ConnectError | httpx.ConnectTimeout):
            reason = f"cannot connect: {_said(cause)}"
            self._lost(reason)
            msg = f"A2A agent at {shown} {reason}; the call was not sent"
            return A2AOfflineError(msg)
        if isinstance(cause, httpx.PoolTimeout):
            msg = (
                f"A2A agent at {shown}: no HTTP connection to it came free in time, so the call was "
                "not sent; raise the agent's max_connections"
            )
            return A2ABusyError(msg)
        if isinstance(cause, httpx.TimeoutException) or isinstance(exc, A2AClientTimeoutError):
            msg = f"A2A agent at {shown} stopped answering ({_said(cause)}); {UNKNOWN_OUTCOME}"
            return A2ACallTimeoutError(msg)
        if isinstance(cause, httpx.TransportError):
            reason = f"the connection broke: {_said(cause)}"
            self._lost(reason)
            msg = f"A2A agent at {shown}: {reason}; {UNKNOWN_OUTCOME}"
            return A2AConnectionError(msg)
        if isinstance(cause, httpx.HTTPStatusError):
            code = cause.response.status_code
            if code in _DENIED:
                msg = (
                    f"A2A agent at {shown} refused the router's credentials (HTTP {code}); check the "
                    "agent's headers, auth or bearer_token_env"
                )
                return A2ADeniedError(msg)
            return _HTTPStatusError(shown, code, str(exc))
        msg = f"A2A agent at {shown} failed the call: {redact_text(str(exc))}"
        return A2AProtocolError(msg)


class _HTTPStatusError(A2AProtocolError):
    """An HTTP error status; it carries ``status_code`` so the core judges it (429, 502, 503 and
    504 are transient). 429 and 503 answer the request itself, before the agent took it: never
    delivered, so another replica may take even work unsafe to repeat."""

    def __init__(self, shown: str, status_code: int, said: str) -> None:
        msg = f"A2A agent at {shown} answered HTTP {status_code}: {redact_text(said)}"
        super().__init__(msg)
        self.status_code = status_code
        if refused(self):
            self.delivered = False


def _said(exc: BaseException | None) -> str:
    """An exception's text for a message, secrets masked."""
    return redact_text(str(exc) or repr(exc))


def _merge(task: Task, artifact: Artifact, *, append: bool) -> None:
    """Lay an artifact chunk into the task: appended to the artifact of its id (text continuing
    text), or replacing it."""
    for held in task.artifacts:
        if held.artifact_id == artifact.artifact_id:
            if not append:
                held.CopyFrom(artifact)
                return
            parts = list(artifact.parts)
            if parts and held.parts and _is_text(held.parts[-1]) and _is_text(parts[0]):
                held.parts[-1].text += parts.pop(0).text
            held.parts.extend(parts)
            return
    task.artifacts.append(artifact)


def _is_text(part: Part) -> bool:
    kind: str | None = part.WhichOneof("content")
    return kind == "text"
