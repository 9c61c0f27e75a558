"""The A2A executor of the router: each A2A message becomes one routed reach, its result a task.

A message whose metadata names a skill (``{"skill": id}``, or ``capability``) is routed to that
capability with the message's parts as input (`input_payload`); any other is matched from its
text, like ``route(None, text=...)``. The caller's hop metadata (task id, trace, deadline, depth,
lineage: one ``agent-reach`` key, or flat ``agent-reach/...`` keys) continues in the reach, so a
chain of routers keeps one task.
The result becomes the task's end state as the wire contract of docs/a2a-serve.md says; a
result that asks for input leaves the task ``input-required``, and the next message on the same
task resumes the same agent on the same thread; an answer refused as the caller's mistake leaves
it ``input-required``, the question unanswered. Only that: a message for a task in any other state
is refused, and ``agent-reach/resume`` in a message's metadata is ignored (resuming another's
interrupt must not be a metadata key away). Threads are the caller's: the router scopes every
thread id to the call's principal, so one principal cannot enter another's conversation by naming
its contextId; the task's metadata keeps the thread as the caller named it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from a2a.helpers.proto_helpers import new_task
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types.a2a_pb2 import Message, Part, Task, TaskState
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf import struct_pb2
from pydantic import JsonValue, ValidationError

from middleware import MetaInfo, RoutingHint
from reach_adapters.a2a.hop import NO_THREAD, UNARY, unpack
from reach_adapters.a2a.parts import data_value, input_payload, payload_parts, result_payload
from reach_adapters.a2a.router_card import MATCH_SKILL
from reach_adapters.a2a.states import CARRIED_EXTRA, TERMINAL
from reach_adapters.errors import InvalidMessageError, ReachError
from reach_adapters.router import (
    META_PREFIX,
    DecisionRecord,
    Fault,
    ReachMessage,
    ReachResult,
    ResultStatus,
    Router,
    error_result,
    meta_from_request,
    newest_turn,
    ok_result,
)

__all__ = ["CALLER_TOKEN", "SKILL_KEYS", "STATES", "RouterExecutor", "result_metadata"]

logger = logging.getLogger(__name__)

# Metadata keys naming the skill a message is for; `capability` is a synonym.
SKILL_KEYS = ("skill", "capability")
# Each result status as the task state it ends in (the wire contract).
STATES: dict[ResultStatus, TaskState] = {
    ResultStatus.OK: TaskState.TASK_STATE_COMPLETED,
    ResultStatus.INPUT_REQUIRED: TaskState.TASK_STATE_INPUT_REQUIRED,
    ResultStatus.CANCELLED: TaskState.TASK_STATE_CANCELED,
    ResultStatus.INVALID: TaskState.TASK_STATE_REJECTED,
    ResultStatus.REJECTED: TaskState.TASK_STATE_REJECTED,
    ResultStatus.NO_CANDIDATE: TaskState.TASK_STATE_REJECTED,
    ResultStatus.ERROR: TaskState.TASK_STATE_FAILED,
    ResultStatus.TIMEOUT: TaskState.TASK_STATE_FAILED,
    ResultStatus.PARTIAL: TaskState.TASK_STATE_FAILED,
    ResultStatus.NO_CONSENSUS: TaskState.TASK_STATE_FAILED,
}
_STREAMING_METHODS = frozenset({"SendStreamingMessage", "message/stream"})
# Where an input-required task keeps what its resume needs: the agent holding the thread.
_AGENT = META_PREFIX + "agent_id"
_CAPABILITY = META_PREFIX + "capability"
# ... and the run's settings, its thread among them: the answer goes on the thread that asked.
_CONFIGURABLE = META_PREFIX + "configurable"
_CONTEXT = META_PREFIX + "context"
_STREAMED = "stream"
# Keys an answer's result sets only when it has them: cleared when it does not (see `_finish`).
_CLEARED = (
    META_PREFIX + "delivered",
    META_PREFIX + "retryable",
    *(META_PREFIX + key for key in CARRIED_EXTRA),
)
# Ignored in a message's metadata: an interrupt is resumed by answering its task, nothing else.
_RESUME = META_PREFIX + "resume"
# A hop token is a credential: the request handler moves it out of the message (which the task's
# history keeps) into the call's state, under this key, before anything is stored.
CALLER_TOKEN = META_PREFIX + "caller_token"

Principal = Callable[[ServerCallContext], str | None]


def result_metadata(result: ReachResult) -> dict[str, Any]:
    """What a reach client needs to rebuild `result`'s status and fault after the hop."""
    carried: dict[str, Any] = {
        META_PREFIX + "task_id": result.task_id,
        META_PREFIX + "trace_id": result.trace_id,
        _AGENT: result.agent_id,
        _CAPABILITY: result.capability,
        META_PREFIX + "status": result.status.value,
        META_PREFIX + "fault": None if result.fault is None else result.fault.value,
        META_PREFIX + "error_type": result.error_type,
    }
    if not result.ok:
        if not result.delivered:
            carried[META_PREFIX + "delivered"] = False
        if result.retryable:
            carried[META_PREFIX + "retryable"] = True
        extra = result.extra
        for key in CARRIED_EXTRA:
            value = extra.get(key)
            if value is not None:
                carried[META_PREFIX + key] = value
    return carried


def _still_asks(result: ReachResult) -> bool:
    """Whether an answer's `result` refused it as the caller's mistake, before it reached the
    agent's thread: the question it answered still waits (DESIGN §6: invalid, rejected)."""
    return result.fault is Fault.CALLER and result.status in (ResultStatus.INVALID, ResultStatus.REJECTED)


def _mark(metadata: dict[str, Any], key: str) -> bool:
    """A reach client's mark, taken out: whether it wants one answer of a call it streams
    (`UNARY`), or its caller named no thread (`NO_THREAD`)."""
    value = metadata.pop(key, False)
    if not isinstance(value, bool):
        msg = f"metadata {key!r} must be true or false, got {value!r}"
        raise InvalidMessageError(msg)
    return value


class RouterExecutor(AgentExecutor):
    """Runs each A2A message as a reach on `router`, as the principal `principal_of` names."""

    def __init__(self, router: Router, principal_of: Principal) -> None:
        self.router = router
        self.principal_of = principal_of

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task_id, context_id = str(context.task_id), str(context.context_id)
        task = context.current_task
        if task is not None and task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            # Raised before any event, so the task keeps its state and the caller gets the error.
            raise UnsupportedOperationError(message=busy_task(task))
        updater = TaskUpdater(event_queue, task_id, context_id)
        message = context.message
        if task is None:
            history = [] if message is None else [message]
            await event_queue.enqueue_event(
                new_task(task_id, context_id, TaskState.TASK_STATE_SUBMITTED, history=history)
            )
        metadata: dict[str, Any] = {}
        try:
            if message is not None:
                metadata = self._metadata(context, message)
            unary = _mark(metadata, UNARY)
            threaded = not _mark(metadata, NO_THREAD)
            reach = self._reach(context, message, metadata, threaded=threaded)
        except InvalidMessageError as exc:
            await self._finish(updater, _refused(exc, metadata), answer=task is not None)
            return
        await updater.start_work()
        method = context.call_context.state.get("method")
        if (
            method in _STREAMING_METHODS
            and not unary
            and reach.meta_info.capability is not None
            and not _resumes(reach)
        ):
            await self._stream(updater, reach)
            return
        try:
            result = await self.router.dispatch(reach)
        except InvalidMessageError as exc:
            # Refused by the router's own checks of the message (its sizes): the caller's.
            await self._finish(updater, _refused(exc, metadata), answer=task is not None)
            return
        await self._finish(updater, result, reach, answer=task is not None)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Mark the task canceled; the SDK then cancels `execute`, and with it the routed call
        (the router records it as cancelled by the caller, and compensates if it may)."""
        task = context.current_task
        if task is not None and task.status.state in TERMINAL:
            return
        updater = TaskUpdater(event_queue, str(context.task_id), str(context.context_id))
        text = "the task was cancelled by its caller"
        await updater.cancel(updater.new_agent_message([Part(text=text)]))

    # -- the reach ---------------------------------------------------------------------------

    @staticmethod
    def _metadata(context: RequestContext, message: Message) -> dict[str, Any]:
        """The request's and the message's metadata, as the reach may read them."""
        metadata = {**context.metadata, **_struct(message.metadata)}
        unpack(metadata)
        metadata.pop(_RESUME, None)
        token = context.call_context.state.get(CALLER_TOKEN)
        if token is not None:
            metadata[CALLER_TOKEN] = token
        return metadata

    def _reach(
        self, context: RequestContext, message: Message | None, metadata: dict[str, Any], *, threaded: bool
    ) -> ReachMessage:
        if message is None:
            msg = "the request has no message: send one with text parts or one data part"
            raise InvalidMessageError(msg)
        named = next((metadata[key] for key in SKILL_KEYS if key in metadata), None)
        if named == MATCH_SKILL:
            named = None
        if named is not None and (not isinstance(named, str) or not named):
            msg = f"metadata 'skill' must name a skill id (a string) of the agent card, got {named!r}"
            raise InvalidMessageError(msg)
        task = context.current_task
        if task is not None:
            return self._resume(context, metadata, message, task)
        meta = self._meta(context, metadata, named, threaded=threaded)
        payload = input_payload(message.parts)
        if named is None:
            text = payload.get("text")
            if not isinstance(text, str):
                msg = (
                    "the message names no skill and carries no text to match: add text parts, "
                    "or name a skill of the agent card in its metadata ({'skill': id})"
                )
                raise InvalidMessageError(msg)
            meta.text = text
        return ReachMessage(raw_payload=payload, meta_info=meta)

    def _resume(
        self, context: RequestContext, metadata: dict[str, Any], message: Message, task: Task
    ) -> ReachMessage:
        """The answer to an input-required task, to the agent that asked, on the same thread."""
        stopped = _struct(task.metadata)
        agent_id, capability = stopped.get(_AGENT), stopped.get(_CAPABILITY)
        if not isinstance(agent_id, str) or not isinstance(capability, str):
            msg = f"task {task.id} waits for input, but not from an agent of this router: start a new task"
            raise InvalidMessageError(msg)
        meta = self._meta(context, metadata, capability)
        configurable = stopped.get(_CONFIGURABLE)
        if isinstance(configurable, dict):
            # The thread the agent asked on, whatever thread the answer names (or names none).
            meta.configurable = configurable
        asked_with = stopped.get(_CONTEXT)
        if isinstance(asked_with, dict) and meta.context is None:
            # The run's context the question was asked in, unless the answer gives its own.
            meta.context = asked_with
        meta.resume = result_payload(message.parts)
        return ReachMessage(
            raw_payload=None, meta_info=meta, routing_hint=RoutingHint(mode="directed", target=agent_id)
        )

    def _meta(
        self,
        context: RequestContext,
        metadata: dict[str, Any],
        capability: str | None,
        *,
        threaded: bool = True,
    ) -> MetaInfo:
        """The reach's `MetaInfo`; `threaded`: the contextId is its thread unless it names one."""
        meta = meta_from_request(metadata, capability)
        meta.principal = self.principal_of(context.call_context)
        if threaded:
            _thread(meta, str(context.context_id))
        return meta

    async def _finish(
        self,
        updater: TaskUpdater,
        result: ReachResult,
        reach: ReachMessage | None = None,
        *,
        answer: bool = False,
    ) -> None:
        """End the task as `result` says; an input-required one keeps `reach`'s run settings for
        the answer. `answer`: the message answered the task's question."""
        state = STATES[result.status]
        metadata = result_metadata(result)
        if result.status is ResultStatus.INPUT_REQUIRED and reach is not None:
            # What the run asks waits at its thread's newest turn, not at a checkpoint it replayed
            # from, where an answer would meet the old question there, answered, and its old answer.
            metadata[_CONFIGURABLE] = newest_turn(reach.meta_info.configurable)
            metadata[_CONTEXT] = reach.meta_info.context
        if answer:
            # The task's metadata merges each update's: what an earlier answer's result carried
            # must not stand for this one's.
            for key in _CLEARED:
                metadata.setdefault(key, None)
            if _still_asks(result):
                # Refused as the caller's mistake (a resume its interrupt does not take, a quota):
                # nothing reached the thread, whose question still waits, so the task waits for
                # the next answer, kept for the agent and thread that asked (not overwritten).
                state = TaskState.TASK_STATE_INPUT_REQUIRED
                del metadata[_AGENT], metadata[_CAPABILITY]
        if result.ok:
            await updater.add_artifact(payload_parts(result.payload), name="result")
            await updater.update_status(state, metadata=metadata)
            return
        if result.status is ResultStatus.INPUT_REQUIRED:
            parts = payload_parts(result.payload)
        else:
            parts = [Part(text=result.error or f"the reach ended {result.status.value}")]
        await updater.update_status(state, updater.new_agent_message(parts), metadata=metadata)

    async def _stream(self, updater: TaskUpdater, reach: ReachMessage) -> None:
        """Each chunk of the chosen agent's stream as one more part of the result artifact."""
        meta = reach.meta_info
        capability = str(meta.capability)
        # No closing chunk: an artifact update must carry a part, and the completed status that
        # follows ends the stream. The reach keeps its ids, and counts them as the caller's only
        # when the caller carried them: a stream without one is not kept for repeats.
        first = True
        try:
            async for chunk in self.router.dispatch_stream(reach):
                await updater.add_artifact(
                    payload_parts(chunk), artifact_id=_STREAMED, name="result", append=not first
                )
                first = False
        except ReachError as exc:
            await self._finish(updater, self._stream_failure(reach, exc), reach)
            return
        record = self._record(meta.task_id)
        chosen = (
            None
            if record is None
            else record.chosen or next((attempt.agent_id for attempt in reversed(record.attempts)), None)
        )
        done = ok_result(reach, chosen, None)
        if record is not None:
            done = done.model_copy(update={"trace_id": record.trace_id, "capability": capability})
        await updater.update_status(TaskState.TASK_STATE_COMPLETED, metadata=result_metadata(done))

    def _record(self, task_id: str) -> DecisionRecord | None:
        try:
            return self.router.explain(task_id)
        except ReachError:
            return None

    def _stream_failure(self, reach: ReachMessage, exc: ReachError) -> ReachResult:
        """The result a failed stream stands for: the router's own, when the error carries it."""
        if exc.result is not None:
            return exc.result
        if isinstance(exc, InvalidMessageError):
            return error_result(reach, ResultStatus.INVALID, type(exc).__name__, str(exc), fault=Fault.CALLER)
        return error_result(reach, ResultStatus.ERROR, type(exc).__name__, str(exc), fault=Fault.ROUTER)


def busy_task(task: Task) -> str:
    """Why a message for `task` is refused: only an input-required task takes another."""
    state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
    return (
        f"task {task.id} is {state}: only an input-required task takes another message; "
        "send a new message without taskId to start a new task"
    )


def _refused(exc: InvalidMessageError, metadata: dict[str, Any]) -> ReachResult:
    """A message no reach can be made of: the caller's to fix, nothing was delivered. The caller's
    task and trace ids are kept when they are valid, so its hop still names the same task."""
    ids: dict[str, Any] = {}
    for key in ("task_id", "trace_id"):
        value = metadata.get(META_PREFIX + key)
        try:
            MetaInfo(**{key: value})
        except ValidationError:
            continue
        ids[key] = value
    meta = MetaInfo(**ids)
    reach = ReachMessage(raw_payload=None, meta_info=meta)
    return error_result(reach, ResultStatus.INVALID, type(exc).__name__, str(exc), fault=Fault.CALLER)


def _resumes(reach: ReachMessage) -> bool:
    return reach.routing_hint.mode == "directed"


def _thread(meta: MetaInfo, context_id: str) -> None:
    """One A2A context is one conversation: the agent's thread, unless the caller named one (or,
    through a reach client, said its caller named none: `NO_THREAD`).

    The contextId (or thread id) is the caller's choice: the router makes it the principal's own
    thread (`reach_adapters.router.thread_scope`), as for every surface, so it is left as named here.
    """
    configurable = dict(meta.configurable or {})
    meta.configurable = {**configurable, "thread_id": configurable.get("thread_id", context_id)}


def _struct(struct: struct_pb2.Struct) -> dict[str, JsonValue]:
    # Its fields walked in place: a Struct given to a Value's constructor is copied first, and this
    # runs on every message served.
    return {key: data_value(item) for key, item in struct.fields.items()}
