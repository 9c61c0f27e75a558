"""What a reach tool tells the model: an answer as text, and for an agent that stopped to ask for
input, what it asks, the shape its answer must take, and which tool (if any) can answer it; for
one paused at a static breakpoint, that it waits on a go-ahead."""

from __future__ import annotations

import json

from pydantic import JsonValue

from middleware import ReachResult
from reach_adapters.langchain.stops import PAUSED_KEY

__all__ = ["asking_text", "tool_text"]


def tool_text(value: JsonValue) -> str:
    """A string as it is, anything else as JSON: what a model reads."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def asking_text(result: ReachResult, resume_with: str | None) -> str:
    """What to tell the model of an agent that needs input: what it asks and how to answer; for
    several interrupts, each one's id and question, since the answer is keyed by those ids.

    `resume_with` is the tool among the model's that can answer (it takes ``resume``); None: the
    model has none, so it is told to pass the question on to whoever runs it.
    """
    agent = result.agent_id
    paused = result.extra.get(PAUSED_KEY)
    if isinstance(paused, list):
        return _go_ahead_text(result, paused, resume_with)
    asked = result.extra.get("interrupts")
    pending = [item for item in asked if isinstance(item, dict)] if isinstance(asked, list) else []
    if len(pending) > 1:
        questions = "; ".join(
            f"{item.get('id')}: {tool_text(item.get('value'))}{_shape(item)}" for item in pending
        )
        what = (
            f"{agent} needs {len(pending)} answers before it can go on (question id: question): {questions}."
        )
        answer = "them together as resume, an object that maps each question id to its answer"
    else:
        shape = _shape(pending[0]) if pending else ""
        what = f"{agent} needs input before it can go on: {tool_text(result.payload)}.{shape}"
        answer = "it as resume"
    if resume_with is None:
        return (
            f"{what} None of your tools can answer it: say in your reply what {agent} asks; whoever "
            "runs you answers it."
        )
    called = f", capability {result.capability!r}" if result.capability else ""
    return f"{what} Get the answer, then send {answer} (with {resume_with}: target {agent!r}{called})."


def _go_ahead_text(result: ReachResult, steps: list[JsonValue], resume_with: str | None) -> str:
    """What to tell the model of an agent paused at a static breakpoint: it waits on a go-ahead
    before those steps (a tool call, say), which whoever may give it gives with any resume."""
    agent = result.agent_id
    what = (
        f"{agent} needs input before it can go on: it paused before its steps "
        f"{', '.join(tool_text(step) for step in steps)}, for a go-ahead."
    )
    if resume_with is None:
        return (
            f"{what} None of your tools can give it: say in your reply that {agent} waits on a "
            "go-ahead; whoever runs you gives it."
        )
    called = f", capability {result.capability!r}" if result.capability else ""
    return (
        f"{what} Get the go-ahead, then send resume true (with {resume_with}: target {agent!r}"
        f"{called}); the pause asks nothing else, so its value is not used."
    )


def _shape(interrupt: dict[str, JsonValue]) -> str:
    """The JSON Schema an answer must match, when the agent gave one."""
    schema = interrupt.get("response_schema")
    if schema is None:
        return ""
    return f" The answer must match this JSON Schema: {tool_text(schema)}."
