"""A payload no option of an ``anyOf``/``oneOf`` takes is refused with what would be taken: the
kinds of value the options take, or the error inside the one option that takes its kind."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import ResultStatus
from reach_adapters import Capability, FunctionAgent, Router

pytestmark = pytest.mark.timeout(30)

MESSAGE = {
    "type": "object",
    "properties": {"role": {"enum": ["user", "assistant"]}, "content": {"type": "string"}},
    "required": ["role", "content"],
}
# What a chat model takes: a text, or a conversation.
TEXT_OR_CHAT = {"anyOf": [{"type": "string"}, {"type": "array", "items": MESSAGE}]}


async def echo(payload: Any) -> Any:
    return payload


@pytest.fixture
def chat(router: Router) -> Router:
    cap = Capability(name="chat", input_schema=TEXT_OR_CHAT)
    router.register(FunctionAgent(echo, agent_id="llm:chat:01", capabilities=[cap]))
    return router


@pytest.mark.parametrize("payload", [{"words": "hi"}, {"text": 3}, 42, None])
async def test_a_payload_of_no_kind_a_union_takes_is_told_the_kinds_it_takes(
    chat: Router, payload: Any
) -> None:
    result = await chat.route("chat", payload)

    assert result.status is ResultStatus.INVALID
    assert "field '(payload)'" in (result.error or "")
    assert "expected a string or an array" in (result.error or "")


async def test_a_text_tasks_object_is_its_text_for_a_schema_that_takes_text(chat: Router) -> None:
    # What an A2A message of text parts becomes.
    assert (await chat.route("chat", {"text": "hi"})).payload == "hi"


async def test_a_payload_of_the_kind_one_option_takes_is_told_what_is_wrong_inside(chat: Router) -> None:
    result = await chat.route(
        "chat", [{"role": "user", "content": "hi"}, {"role": "critic", "content": "no"}]
    )

    assert result.status is ResultStatus.INVALID
    assert "field '1.role': \"critic\" is not one of" in (result.error or "")


async def test_a_payload_a_union_takes_still_passes(chat: Router) -> None:
    for payload in ("hi", [{"role": "user", "content": "hi"}]):
        result = await chat.route("chat", payload)
        assert (result.status, result.payload) == (ResultStatus.OK, payload), result.error


@pytest.mark.parametrize(
    ("schema", "payload", "said"),
    [
        # A nested union's kinds count with the outer one's.
        (
            {"anyOf": [{"type": "string"}, {"anyOf": [{"type": "integer"}, {"type": "array"}]}]},
            {"id": 1},
            "expected a string, an integer or an array",
        ),
        # An option refusing the value as a whole (a const) is no option that took it: nothing is
        # said of one option alone, and no kinds are claimed.
        ({"anyOf": [{"const": None}, {"type": "string"}]}, 5, "listed in the 'anyOf' keyword"),
        # An object option missing a key took the object: its own error says what is missing.
        (
            {"anyOf": [{"type": "object", "required": ["a"]}, {"type": "string"}]},
            {},
            "field 'a': \"a\" is a required property",
        ),
    ],
    ids=["nested", "const", "required"],
)
async def test_what_a_union_is_said_to_take_is_what_it_takes(
    router: Router, schema: dict[str, Any], payload: Any, said: str
) -> None:
    cap = Capability(name="pick", input_schema=schema)
    router.register(FunctionAgent(echo, agent_id="x:pick:01", capabilities=[cap]))
    result = await router.route("pick", payload)
    assert result.status is ResultStatus.INVALID
    error = result.error or ""
    assert said in error
    assert error.endswith(said) or "expected" not in error
