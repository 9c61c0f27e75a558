"""The fifth review: whose fault it is. A resume that `HumanInTheLoopMiddleware`'s batched
interrupt refuses, one message given to an `add_messages` key, a transient failure after a resume."""

from __future__ import annotations

from typing import Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from examples.langchain_demo.agents import scripted
from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import InvalidMessageError, Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)


def interrupt_of(result: ReachResult) -> dict[str, Any]:
    """The one interrupt an input_required result reports."""
    (pending,) = cast(list[dict[str, Any]], result.extra["interrupts"])
    return pending


def failures(router: Router, agent_id: str) -> int:
    return next(entry.failures for entry in router.catalog() if entry.agent_id == agent_id)


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def rename_file(path: str, to: str) -> str:
    """Rename a file."""
    return f"renamed {path} to {to}"


def reviewed_files_agent() -> Any:
    """A create_agent agent whose model calls two tools at once, each reviewed by a human, in
    HumanInTheLoopMiddleware's default (batched) mode: one interrupt for both calls."""
    model = scripted(
        AIMessage(
            "",
            tool_calls=[
                {"name": "delete_file", "args": {"path": "r.txt"}, "id": "d1"},
                {"name": "rename_file", "args": {"path": "a.txt", "to": "b.txt"}, "id": "m1"},
            ],
        ),
        AIMessage("all done"),
    )
    approval = HumanInTheLoopMiddleware(
        interrupt_on={
            "delete_file": {"allowed_decisions": ["approve", "reject"]},
            "rename_file": {"allowed_decisions": ["approve", "edit"]},
        }
    )
    return create_agent(
        model, tools=[delete_file, rename_file], middleware=[approval], checkpointer=InMemorySaver()
    )


EDIT: dict[str, Any] = {
    "type": "edit",
    "edited_action": {"name": "rename_file", "args": {"path": "a.txt", "to": "c.txt"}},
}


@pytest.mark.parametrize(
    "refused",
    [
        {"decisions": [EDIT, {"type": "approve"}]},  # edit is not allowed for delete_file
        {"decisions": [{"type": "approve"}]},  # one decision for two actions
        {"decisions": [{"type": "approve"}, {"type": "approve"}, {"type": "approve"}]},
        {"decisions": [{"type": "approve"}, {"type": "edit"}]},  # an edit without its action
        {"decisions": [{}, {"type": "approve"}]},
        {"type": "approve"},  # the per_call answer, not the batched one
        "approve",
    ],
)
async def test_a_resume_the_batched_review_refuses_is_the_callers_mistake_and_can_be_answered_again(
    router: Router, refused: Any
) -> None:
    router.register(LangChainAgent(reviewed_files_agent(), agent_id="ops:files:01"))
    thread = {"thread_id": "t"}
    asked = await router.route(
        "files", {"messages": [{"role": "user", "content": "tidy up"}]}, configurable=thread
    )
    assert asked.status == ResultStatus.INPUT_REQUIRED, asked.error
    # The middleware gives its interrupt no response_schema; the one the adapter derives is shown.
    pending = interrupt_of(asked)
    decisions = pending["response_schema"]["properties"]["decisions"]
    assert (decisions["minItems"], decisions["maxItems"]) == (2, 2)

    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        answer = await router.route("files", None, resume=refused, configurable=thread)
        assert (answer.status, answer.fault) == (ResultStatus.INVALID, Fault.CALLER), answer.error
        assert "response_schema" in (answer.error or "")
    with pytest.raises(InvalidMessageError, match="decisions"):
        _ = [chunk async for chunk in router.stream("files", None, resume=refused, configurable=thread)]
    assert failures(router, "ops:files:01") == 0
    # Nothing reached the graph, so the interrupt takes a good answer still.
    done = await router.route(
        "files", None, resume={"decisions": [{"type": "reject"}, EDIT]}, configurable=thread
    )
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error
    output = cast(dict[str, Any], done.extra["output"])
    said = [message["content"] for message in output["messages"] if message["role"] == "tool"]
    assert said[1].endswith("renamed a.txt to c.txt")


async def test_a_review_answer_keyed_by_the_interrupt_id_is_checked_as_well(router: Router) -> None:
    router.register(LangChainAgent(reviewed_files_agent(), agent_id="ops:files:01"))
    thread = {"thread_id": "t"}
    asked = await router.route(
        "files", {"messages": [{"role": "user", "content": "tidy up"}]}, configurable=thread
    )
    pending = interrupt_of(asked)
    wrong: dict[str, Any] = {pending["id"]: {"decisions": [{"type": "approve"}]}}
    refused = await router.route("files", None, resume=wrong, configurable=thread)
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert "each of its 2 actions" in (refused.error or "")
    right: dict[str, Any] = {pending["id"]: {"decisions": [{"type": "approve"}, {"type": "approve"}]}}
    done = await router.route("files", None, resume=right, configurable=thread)
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error
