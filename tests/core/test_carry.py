"""The task carried in a request's metadata: a key spelt close to one the router reads is
refused naming the key meant, whatever its case or separators; other keys are left alone."""

from __future__ import annotations

import pytest

from reach_adapters import InvalidMessageError
from reach_adapters.router import meta_from_request


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
