"""A data-only skill declares ``{"type": "object"}`` from its card: a text sent to it is the
caller's mistake, refused `invalid` before anything is sent, not a task the agent rejects."""

from __future__ import annotations

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from tests.a2a.agents import Served

pytestmark = pytest.mark.timeout(30)


async def test_a_data_only_skill_takes_objects_only(agent: A2AAgent) -> None:
    caps = {cap.name: cap for cap in agent.capabilities}
    assert caps["sum"].object_only
    assert not caps["echo"].object_only  # a text skill takes {"text": ...} or a text


async def test_a_text_sent_to_a_data_only_skill_is_refused_before_sending(
    served: Served, routed: Router
) -> None:
    result = await routed.route("sum", "PX-7")
    assert (result.status, result.fault, result.delivered) == (ResultStatus.INVALID, Fault.CALLER, False)
    assert "takes a JSON object, got a string" in (result.error or "")
    assert served.executor.record.started == []
    answered = await routed.route("sum", {"a": 2, "b": 3})
    assert (answered.ok, answered.payload) == (True, {"sum": 5})
