"""What an A2A task's final state means as a `ReachResult` (the contract in the design note).

A reach server (``reach serve``) says in the task's metadata which status and fault its own
result had, and that word is kept, so fault attribution survives the hop as it does over MCP: an
agent's failure over there is that router's to judge, so here it is the router's, not this agent's.
Any other agent's states map by what they mean for the router: ``failed`` and ``rejected`` are
the task's outcome, ``auth-required`` the caller's credentials, an unknown state the agent's fault.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Task, TaskState
from google.protobuf import json_format, struct_pb2
from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.a2a.errors import A2AProtocolError
from reach_adapters.a2a.parts import JSON_MEDIA_TYPE, data_value, result_payload
from reach_adapters.router import (
    FIX_OPTIONS,
    META_PREFIX,
    ErrorKind,
    error_result,
    input_required_result,
    ok_result,
)

__all__ = [
    "CARRIED_EXTRA",
    "FINAL",
    "RUNNING",
    "TERMINAL",
    "WAITING",
    "checked_payload",
    "message_result",
    "task_result",
]

# What a reach server's failed or asking result holds in `extra` that its caller needs, carried in
# the task's metadata under `agent-reach/`: the pending interrupts (each one's id, to answer
# several at once, and `response_schema`) and the call options that fix a refused call.
CARRIED_EXTRA = ("interrupts", FIX_OPTIONS)
# Set in `extra["a2a"]` of a refused answer whose task still waits for input: the thread's
# question stands, and the next ``resume=`` on the thread goes to that task.
WAITING = "waiting"
_STATUS = META_PREFIX + "status"

# A task in one of these states is over: no message goes on with it.
TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
# The task waits for the caller: the call is over, the conversation is not.
INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
FINAL = TERMINAL | INTERRUPTED
RUNNING = frozenset({TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING})
# Read once: a protobuf enum's value looked up by name costs a Python call each time.
_COMPLETED = TaskState.TASK_STATE_COMPLETED
_INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED

# Non-reach agents: state -> (status, error_type, fault).
_FAILED: dict[int, tuple[ResultStatus, str, Fault | None]] = {
    TaskState.TASK_STATE_AUTH_REQUIRED: (ResultStatus.REJECTED, ErrorKind.PERMISSION_DENIED, Fault.CALLER),
    TaskState.TASK_STATE_REJECTED: (ResultStatus.REJECTED, "A2ATaskRejected", Fault.TASK),
    TaskState.TASK_STATE_FAILED: (ResultStatus.ERROR, "A2ATaskFailed", Fault.TASK),
    TaskState.TASK_STATE_CANCELED: (ResultStatus.CANCELLED, ErrorKind.CANCELLED, None),
}
_SAID = {
    TaskState.TASK_STATE_AUTH_REQUIRED: "needs other credentials (auth-required)",
    TaskState.TASK_STATE_REJECTED: "rejected the task",
    TaskState.TASK_STATE_FAILED: "reports the task failed",
    TaskState.TASK_STATE_CANCELED: "cancelled the task",
}


def state_name(state: int) -> str:
    """``TASK_STATE_WORKING`` -> ``working``; a number no state has stays a number."""
    try:
        return TaskState.Name(state).removeprefix("TASK_STATE_").lower().replace("_", "-")
    except ValueError:
        return str(state)


def checked_payload(parts: Sequence[Part], where: str) -> JsonValue:
    """`parts` as a payload (`result_payload`), after checking each is what it claims: a part
    with no content, or a text part typed JSON that is not JSON, is an `A2AProtocolError`."""
    if len(parts) == 1:
        # The common answer, one data part or one untyped text part, needs no checking.
        part = parts[0]
        kind = part.WhichOneof("content")
        if kind == "data":
            return data_value(part.data)
        if kind == "text" and not part.media_type:
            return part.text
    checked: list[Part] = []
    for index, part in enumerate(parts):
        kind = part.WhichOneof("content")
        if kind is None:
            msg = f"{where}.parts[{index}] has no content (text, data, raw or url)"
            raise A2AProtocolError(msg)
        if kind == "text" and part.media_type.split(";")[0].strip().lower() == JSON_MEDIA_TYPE:
            try:
                value = json.loads(part.text)
            except ValueError as exc:
                msg = f"{where}.parts[{index}] is typed {JSON_MEDIA_TYPE} but is not JSON: {exc}"
                raise A2AProtocolError(msg) from None
            part = Part(data=json_format.ParseDict(value, struct_pb2.Value()), media_type=JSON_MEDIA_TYPE)
        checked.append(part)
    return result_payload(checked)


def message_result(message: ReachMessage, agent_id: str, url: str, reply: Message) -> ReachResult:
    """A reply without a task (the agent answered at once): its parts are the payload."""
    payload = checked_payload(reply.parts, f"A2A agent at {url}: the reply message")
    return ok_result(message, agent_id, payload, extra=_ids(reply.context_id, ""))


def task_result(message: ReachMessage, agent_id: str, url: str, task: Task) -> ReachResult:
    """The result a task in a final state stands for; a task in an unknown state, or one still
    running, is the agent's failure (`A2AProtocolError` naming the URL and the field)."""
    state = task.status.state
    extra = _ids(task.context_id, task.id)
    where = f"A2A agent at {url}: task {task.id}"
    if state not in FINAL:
        said = "still running" if state in RUNNING else "in an unknown state"
        msg = f"{where}: field 'status.state' is {state_name(state)!r} ({said}); expected a final state"
        raise A2AProtocolError(msg)
    if state == _COMPLETED:
        artifacts = task.artifacts
        parts: Sequence[Part] = (
            artifacts[0].parts
            if len(artifacts) == 1
            else [part for artifact in artifacts for part in artifact.parts]
        )
        source = "artifacts" if parts else "status.message"
        payload = checked_payload(parts or task.status.message.parts, f"{where}: {source}")
        result = ok_result(message, agent_id, payload, extra=extra)
    elif state == _INPUT_REQUIRED:
        asked = checked_payload(task.status.message.parts, f"{where}: status.message")
        if _reported(task) in (None, ResultStatus.INPUT_REQUIRED.value):
            result = input_required_result(message, agent_id, asked, extra=extra)
        else:
            result = _answer_refused(message, agent_id, asked, task)
    else:
        status, kind, fault = _FAILED[state]
        error = f"A2A agent {agent_id} {_SAID[state]}"
        said = _text(task.status.message.parts)
        if said:
            error = f"{error}: {said}"
        result = error_result(message, status, kind, error, fault=fault, agent_id=agent_id)
        amend(result, {"extra": extra})
    if _reported(task) is not None:
        _as_reported(result, json_format.MessageToDict(task.metadata))
        _restore_extra(result, task.metadata.fields)
    return result


def _reported(task: Task) -> str | None:
    """The status a reach server reported for its result in the task's metadata, if any."""
    if not task.HasField("metadata"):
        return None
    fields = task.metadata.fields
    return fields[_STATUS].string_value if _STATUS in fields else None


def _answer_refused(message: ReachMessage, agent_id: str, said: JsonValue, task: Task) -> ReachResult:
    """A reach server refused an answer as the caller's mistake (a ``resume`` its interrupt does
    not take) and kept the task input-required: nothing reached the thread, whose question still
    waits, so the next answer on the thread goes to the same task. The status, fault and error
    type are the server's (`_as_reported`)."""
    text = said if isinstance(said, str) else json.dumps(said, ensure_ascii=False)
    error = f"A2A agent {agent_id} refused the answer (its question still waits: answer again): {text}"
    result = error_result(message, ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, agent_id=agent_id)
    amend(result, {"extra": {"a2a": {"context_id": task.context_id, "task_id": task.id, WAITING: True}}})
    return result


def _restore_extra(result: ReachResult, fields: Mapping[str, struct_pb2.Value]) -> None:
    """Put back what a reach server's result carried in `extra` (`CARRIED_EXTRA`), as it was: the
    interrupts a caller answers by id, the options that fix its call."""
    restored: dict[str, JsonValue] = {}
    for key in CARRIED_EXTRA:
        carried = META_PREFIX + key
        if carried in fields:
            value = data_value(fields[carried])
            if isinstance(value, list | dict):
                restored[key] = value
    if restored:
        amend(result, {"extra": {**result.extra, **restored}})


def _as_reported(result: ReachResult, meta: dict[str, Any]) -> None:
    """Take a reach server's own word on its result's status, fault, error type, delivery and
    whether another agent might succeed (as the MCP hop reads a reach server's `_meta`)."""
    values: dict[str, Any] = {}
    status = meta.get(META_PREFIX + "status")
    if isinstance(status, str) and status in ResultStatus.__members__.values():
        values["status"] = ResultStatus(status)
    fault = meta.get(META_PREFIX + "fault")
    if isinstance(fault, str) and fault in Fault.__members__.values():
        # An agent behind that router failed, and that router judged it already (its breaker, its
        # replicas): the router itself answered, so one broken agent there does not quarantine
        # the whole gateway here.
        values["fault"] = Fault.ROUTER if fault == Fault.AGENT else Fault(fault)
    error_type = meta.get(META_PREFIX + "error_type")
    if isinstance(error_type, str) and error_type:
        values["error_type"] = error_type
    if meta.get(META_PREFIX + "delivered") is False:
        values["delivered"] = False
    if meta.get(META_PREFIX + "retryable") is True:
        # Delivered work is re-sent only when safe to repeat: the core reads `delivered` for that.
        values["retryable"] = True
    if values:
        amend(result, values)


def _ids(context_id: str, task_id: str) -> dict[str, JsonValue]:
    return {"a2a": {"context_id": context_id, "task_id": task_id}}


def _text(parts: Sequence[Part]) -> str:
    return " ".join(part.text for part in parts if part.WhichOneof("content") == "text").strip()
