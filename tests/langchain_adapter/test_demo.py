"""The offline demo runs and shows every routed call with its decision record."""

from __future__ import annotations

import re

import pytest

from examples.langchain_demo.__main__ import main
from tests.demos import assert_it_names_the_install


async def test_the_demo_routes_the_ticket_through_the_supervisor(capsys: pytest.CaptureFixture[str]) -> None:
    await main()

    out = capsys.readouterr().out
    assert "reach tools for the supervisor: reach_agent, refund, summarize" in out
    routed = re.findall(r"routed '(\w+)' -> (\S+) \[ok\] .* trace (\w+)\)", out)
    assert [(name, agent) for name, agent, _ in routed] == [
        ("triage", "support:supervisor:01"),
        ("summarize", "support:summary:01"),
        ("refund", "support:refund:01"),
    ]
    assert len({trace for _, _, trace in routed}) == 1  # the nested calls continue the supervisor's trace
    assert out.count("chosen support:") == 3
    assert "supervisor answered: Done" in out


def test_the_demo_says_what_to_install() -> None:
    assert_it_names_the_install("examples.langchain_demo", "langgraph")
