"""The offline demo runs and shows every routed call with its decision record; its scripted model
serves a thread of many turns."""

from __future__ import annotations

import re

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver

from examples.langchain_demo.__main__ import main
from examples.langchain_demo.agents import scripted
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


def test_a_repeating_scripted_model_answers_each_turn_of_a_thread_anew() -> None:
    graph = create_agent(scripted(AIMessage("hello"), repeat=True), tools=[], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    for turn in range(3):
        graph.invoke({"messages": [{"role": "user", "content": f"hi {turn}"}]}, config)
    said = [message.content for message in graph.get_state(config).values["messages"]]
    assert said == ["hi 0", "hello", "hi 1", "hello", "hi 2", "hello"]
