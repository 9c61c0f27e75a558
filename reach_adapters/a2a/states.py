"""What an A2A task's final state means as a `ReachResult` (the contract in the design note).

A reach server (``reach serve``) says in the task's metadata which status and fault its own
result had, and that word is kept, so fault attribution survives the hop as it does over MCP.
Any other agent's states map by what they mean for the router: ``failed`` and ``rejected`` are
the task's outcome, ``auth-required`` the caller's credentials, an unknown state the agent's fault.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from a2a.types.a2a_pb2 import Message, Part, Task, TaskState
from google.protobuf import json_format, struct_pb2
from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.a2a.errors import A2AProtocolError
from reach_adapters.a2a.parts import JSON_MEDIA_TYPE, data_value, result_payload
from reach_adapters.router import META_PREFIX, ErrorKind, error_result, input_required_result, ok_result

__all__ = ["FINAL", "RUNNING", "TERMINAL", "checked_payload", "message_result", "task_result"]

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
        result = input_required_result(message, agent_id, asked, extra=extra)
    else:
        status, kind, fault = _FAILED[state]
        error = f"A2A agent {agent_id} {_SAID[state]}"
        said = _text(task.status.message.parts)
        if said:
            error = f"{error}: {said}"
        result = error_result(message, status, kind, error, fault=fault, agent_id=agent_id)
        amend(result, {"extra": extra})
    if task.HasField("metadata") and META_PREFIX + "status" in task.metadata.fields:
        _as_reported(result, json_format.MessageToDict(task.metadata))
    return result


def _as_reported(result: ReachResult, meta: dict[str, Any]) -> None:
    """Take a reach server's own word on its result's status, fault and error type."""
    values: dict[str, Any] = {}
    status = meta.get(META_PREFIX + "status")
    if isinstance(status, str) and status in ResultStatus.__members__.values():
        values["status"] = ResultStatus(status)
    fault = meta.get(META_PREFIX + "fault")
    if isinstance(fault, str) and fault in Fault.__members__.values():
        values["fault"] = Fault(fault)
    error_type = meta.get(META_PREFIX + "error_type")
    if isinstance(error_type, str) and error_type:
        values["error_type"] = error_type
    if meta.get(META_PREFIX + "delivered") is False:
        values["delivered"] = False
    if values:
        amend(result, values)


def _ids(context_id: str, task_id: str) -> dict[str, JsonValue]:
    return {"a2a": {"context_id": context_id, "task_id": task_id}}


def _text(parts: Sequence[Part]) -> str:
    return " ".join(part.text for part in parts if part.WhichOneof("content") == "text").strip()
