"""Routed calls to a real A2A agent: payloads both ways, hop metadata, and each task state."""

from __future__ import annotations

import json

import pytest
from a2a.types.a2a_pb2 import Artifact, Message, Part, Task, TaskState, TaskStatus
from google.protobuf import struct_pb2

from middleware import Fault, MetaInfo, ReachMessage, ResultStatus
from reach_adapters import Router
from reach_adapters.a2a import A2AProtocolError
from reach_adapters.a2a.states import task_result
from reach_adapters.errors import AgentCallError


async def test_text_payloads_travel_as_text(routed: Router) -> None:
    result = await routed.route("echo", {"text": "hi there"})
    assert (result.status, result.payload) == (ResultStatus.OK, "hi there")
    assert result.agent_id == "a2a:test-agent:0"
    ids = result.extra["a2a"]
    assert isinstance(ids, dict)
    assert ids["task_id"]
    assert ids["context_id"]
    # A plain string for a text skill is its text.
    assert (await routed.route("echo", "plain")).payload == "plain"


async def test_json_payloads_travel_as_data(routed: Router) -> None:
    result = await routed.route("sum", {"a": 2, "b": 40})
    assert result.payload == {"sum": 42}


async def test_a_reply_without_a_task(routed: Router) -> None:
    result = await routed.route("hello", "bob")
    assert result.payload == "hello, bob"
    ids = result.extra["a2a"]
    assert isinstance(ids, dict)
    assert ids["task_id"] == ""
    assert ids["context_id"]


async def test_the_task_travels_in_the_message_metadata(routed: Router) -> None:
    result = await routed.route("meta", "x", task_id="t-carried", trace_id="trace-carried")
    meta = result.payload
    assert isinstance(meta, dict)
    assert meta["skill"] == "meta"
    # The whole hop in one string: each metadata value costs the a2a-sdk server a check.
    hop = json.loads(str(meta["agent-reach"]))
    assert hop["task_id"] == "t-carried"
    assert hop["trace_id"] == "trace-carried"
    assert hop["lineage"] == ["a2a:test-agent:0"]
    assert hop["depth"] == 1
    assert isinstance(hop["deadline"], float)
    assert set(meta) == {"skill", "agent-reach"}


@pytest.mark.parametrize(
    ("skill", "status", "fault", "error_type", "said"),
    [
        ("fail", ResultStatus.ERROR, Fault.TASK, "A2ATaskFailed", "boom"),
        ("reject", ResultStatus.REJECTED, Fault.TASK, "A2ATaskRejected", "not my job"),
        ("auth", ResultStatus.REJECTED, Fault.CALLER, "PermissionDeniedError", "token please"),
        ("badjson", ResultStatus.ERROR, Fault.AGENT, "A2AProtocolError",
         "artifacts.parts[0] is typed application/json but is not JSON"),
    ],
)  # fmt: skip
async def test_states_map_to_statuses_and_faults(
    routed: Router, skill: str, status: ResultStatus, fault: Fault, error_type: str, said: str
) -> None:
    result = await routed.route(skill, "x")
    assert (result.status, result.fault, result.error_type) == (status, fault, error_type)
    assert said in (result.error or "")


async def test_input_required_is_not_a_failure(routed: Router) -> None:
    result = await routed.route("ask", "hi", configurable={"thread_id": "t1"})
    assert result.status is ResultStatus.INPUT_REQUIRED
    assert result.payload == "what is your name?"
    assert routed.catalog()[0].state.value == "online"


def _message() -> ReachMessage:
    return ReachMessage(raw_payload="x", meta_info=MetaInfo(capability="echo"))


def test_an_unknown_state_is_the_agents_fault() -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=42))  # type: ignore[arg-type]
    with pytest.raises(A2AProtocolError, match=r"at http://h: task t: field 'status.state' is '42'"):
        task_result(_message(), "a2a:x:0", "http://h", task)
    running = Task(id="t", status=TaskStatus(state=TaskState.TASK_STATE_WORKING))
    with pytest.raises(A2AProtocolError, match="'working' \\(still running\\)"):
        task_result(_message(), "a2a:x:0", "http://h", running)
    assert issubclass(A2AProtocolError, AgentCallError)


def test_a_part_without_content_is_named() -> None:
    task = Task(
        id="t",
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
        artifacts=[Artifact(artifact_id="a", parts=[Part(text="ok"), Part()])],
    )
    with pytest.raises(A2AProtocolError, match=r"artifacts.parts\[1\] has no content"):
        task_result(_message(), "a2a:x:0", "http://h", task)


def test_a_reach_servers_own_status_and_fault_are_kept() -> None:
    metadata = struct_pb2.Struct()
    metadata.update(
        {
            "agent-reach/status": "timeout",
            "agent-reach/fault": "agent",
            "agent-reach/error_type": "ReachTimeoutError",
        }
    )
    task = Task(
        id="t",
        status=TaskStatus(
            state=TaskState.TASK_STATE_FAILED, message=Message(parts=[Part(text="did not answer in time")])
        ),
        metadata=metadata,
    )
    result = task_result(_message(), "a2a:x:0", "http://h", task)
    # Its agent's failure is that router's to judge: here the router answered (as over MCP).
    assert (result.status, result.fault, result.error_type) == (
        ResultStatus.TIMEOUT,
        Fault.ROUTER,
        "ReachTimeoutError",
    )
    assert "did not answer in time" in (result.error or "")
