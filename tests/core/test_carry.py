"""The task carried in a request's metadata: a key spelt close to one the router reads is
refused naming the key meant, whatever its case or separators; other keys are left alone."""

from __future__ import annotations

import pytest

from middleware import MetaInfo
from reach_adapters import InvalidMessageError
from reach_adapters.router import meta_from_request, request_meta


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("agent-reach/configurabel", "agent-reach/configurable"),
        ("agent-reach/taskId", "agent-reach/task_id"),
        ("agent-reach/Task_Id", "agent-reach/task_id"),
        ("agent-reach/trace-id", "agent-reach/trace_id"),
    ],
)
def test_a_misspelt_key_is_refused_naming_the_key_meant(key: str, meant: str) -> None:
    with pytest.raises(InvalidMessageError, match=f"did you mean '{meant}'"):
        meta_from_request({key: "x"}, "echo")


def test_keys_far_from_any_are_left_alone() -> None:
    # An A2A task's own keys among them.
    carried = {"agent-reach/task_id": "t-1", "agent-reach/agent_id": "a:b:01", "agent-reach/status": "ok"}
    meta = meta_from_request({**carried, "other": 1}, "echo")
    assert meta.task_id == "t-1"


def test_how_a_streams_chunks_look_is_sent_with_streamed_calls_only() -> None:
    """A unary call answers as it would without them; the far side would shape its answer."""
    meta = MetaInfo(task_id="t-1", stream_mode=["updates", "values"], subgraphs=True)
    assert "agent-reach/stream_mode" not in request_meta(meta)
    assert "agent-reach/subgraphs" not in request_meta(meta)
    streamed = request_meta(meta, stream=True)
    assert (streamed["agent-reach/stream_mode"], streamed["agent-reach/subgraphs"]) == (
        ["updates", "values"],
        True,
    )
    assert "agent-reach/subgraphs" not in request_meta(MetaInfo(stream_mode="values"), stream=True)
    read = meta_from_request(streamed, "steps")
    assert (read.stream_mode, read.subgraphs) == (["updates", "values"], True)


def test_the_runs_context_travels_and_is_read_back() -> None:
    carried = request_meta(MetaInfo(task_id="t-1", context={"user_id": "alice"}))
    assert carried["agent-reach/context"] == {"user_id": "alice"}
    assert meta_from_request(carried, "echo").context == {"user_id": "alice"}


def test_a_message_without_a_context_is_written_without_the_field() -> None:
    """A node of an earlier version forbids fields it does not know: it still reads the message."""
    assert "context" not in MetaInfo(task_id="t-1").model_dump()
    assert MetaInfo(task_id="t-1", context={"a": 1}).model_dump()["context"] == {"a": 1}
