"""LangChainConverter: native inputs and outputs to and from the intermediate format."""

from __future__ import annotations

import dataclasses
import json

import pytest
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import BaseModel

from middleware import MetaInfo, NotJsonSafeError, ReachMessage, ResultStatus
from reach_adapters import InvalidMessageError
from reach_adapters.langchain import LangChainConverter

CONVERT = LangChainConverter()


def message(payload: object) -> ReachMessage:
    return ReachMessage.model_validate({"raw_payload": payload})


class Order(BaseModel):
    order_id: str
    total: float


@dataclasses.dataclass
class Parcel:
    weight_kg: float
    tags: tuple[str, ...]


CHAT = [
    SystemMessage("be brief"),
    HumanMessage("refund order 42", id="h1"),
    AIMessage("", tool_calls=[{"name": "lookup", "args": {"order_id": "42"}, "id": "c1"}]),
    ToolMessage('{"state": "damaged"}', tool_call_id="c1"),
    AIMessage("approved", response_metadata={"model": "fake"}),
]


@pytest.mark.parametrize(
    "native",
    [
        "plain text",
        {"question": "why", "n": 3, "nested": {"ok": True, "items": [1, 2.5, None]}},
        CHAT,
        {"messages": CHAT, "thread": "t-1"},
    ],
    ids=["str", "dict", "messages", "state"],
)
def test_input_round_trip(native: object) -> None:
    reach = CONVERT.to_middleware(native)

    json.dumps(reach.raw_payload)
    assert CONVERT.from_middleware(reach) == native


def test_messages_travel_as_role_content_dicts() -> None:
    payload = CONVERT.to_middleware(CHAT).raw_payload

    assert isinstance(payload, list)
    assert [m["role"] for m in payload] == ["system", "user", "assistant", "tool", "assistant"]  # type: ignore[index,call-overload]
    assert payload[2] == {  # only the fields that are set
        "role": "assistant",
        "content": "",
        "tool_calls": [{"name": "lookup", "args": {"order_id": "42"}, "id": "c1", "type": "tool_call"}],
    }


def test_role_content_dicts_from_other_clients_become_messages() -> None:
    native = CONVERT.from_middleware(
        message(
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": "",
                        "tool_calls": [
                            {
                                "id": "c9",
                                "type": "function",
                                "function": {"name": "f", "arguments": '{"a": 1}'},
                            }
                        ],
                    },
                    {"type": "human", "content": "LangChain's own dump form"},
                    {"role": "developer", "content": "rules"},
                ]
            }
        )
    )

    user, assistant, human, developer = native["messages"]
    assert user == HumanMessage("hi")
    assert assistant.tool_calls == [{"name": "f", "args": {"a": 1}, "id": "c9", "type": "tool_call"}]
    assert human == HumanMessage("LangChain's own dump form")
    assert isinstance(developer, SystemMessage)


def test_chat_message_keeps_its_free_role() -> None:
    native = [ChatMessage(role="critic", content="too long")]

    assert CONVERT.from_middleware(CONVERT.to_middleware(native)) == native


def test_lists_that_are_not_all_messages_stay_data() -> None:
    data = {"rows": [{"role": "user", "content": "x"}, {"id": 1}], "tags": ["a"]}

    assert CONVERT.from_middleware(message(data)) == data


def test_a_bad_message_dict_is_an_invalid_message() -> None:
    with pytest.raises(InvalidMessageError, match=r"payload\[0\] is not a chat message"):
        CONVERT.from_middleware(message([{"type": "chat", "content": "no role"}]))


def test_input_without_json_form_is_an_invalid_message_naming_the_type() -> None:
    with pytest.raises(InvalidMessageError, match=r"input\.when is a builtins\.object"):
        CONVERT.to_middleware({"when": object()})


def test_to_middleware_keeps_the_given_meta() -> None:
    meta = MetaInfo(capability="refund", priority=7)

    assert CONVERT.to_middleware("x", meta).meta_info is meta


@pytest.mark.parametrize(
    ("output", "payload"),
    [
        ("text", "text"),
        ({"a": [1, 2]}, {"a": [1, 2]}),
        (Order(order_id="42", total=9.5), {"order_id": "42", "total": 9.5}),
        (Parcel(1.5, ("fragile",)), {"weight_kg": 1.5, "tags": ["fragile"]}),
        ({"when": (1, 2)}, {"when": [1, 2]}),
    ],
    ids=["str", "dict", "pydantic", "dataclass", "tuple"],
)
def test_outputs_become_json_payloads(output: object, payload: object) -> None:
    result = CONVERT.result_to_middleware(output, message(None))

    assert result.status is ResultStatus.OK
    assert result.payload == payload
    assert result.extra == {}


def test_chat_output_pays_out_the_final_ai_text_and_keeps_the_whole_output() -> None:
    state = {"messages": CHAT, "step": 3}

    result = CONVERT.result_to_middleware(state, message(None))

    assert result.payload == "approved"
    json.dumps(result.extra)
    assert CONVERT.result_from_middleware(result) == state


@pytest.mark.parametrize(
    "output", [AIMessage("hello"), [HumanMessage("q"), AIMessage("hello")]], ids=["message", "list"]
)
def test_chat_model_outputs_round_trip(output: object) -> None:
    result = CONVERT.result_to_middleware(output, message(None))

    assert result.payload == "hello"
    assert CONVERT.result_from_middleware(result) == output


def test_content_blocks_pay_out_their_text() -> None:
    reply = AIMessage([{"type": "text", "text": "part one "}, {"type": "text", "text": "part two"}])

    assert CONVERT.result_to_middleware(reply, message(None)).payload == "part one part two"


def test_structured_response_is_the_payload_when_present() -> None:
    state = {"messages": CHAT, "structured_response": Order(order_id="42", total=1.0)}

    result = CONVERT.result_to_middleware(state, message(None))

    assert result.payload == {"order_id": "42", "total": 1.0}


def test_output_without_json_form_names_the_type_and_where() -> None:
    with pytest.raises(NotJsonSafeError, match=r"output\.handle is a builtins\.object"):
        CONVERT.result_to_middleware({"handle": object()}, message(None))


def test_chunks_are_text_for_messages_and_json_otherwise() -> None:
    reach = message(None)

    assert CONVERT.chunk_to_middleware(AIMessageChunk(content="tok"), reach) == "tok"
    assert CONVERT.chunk_to_middleware({"node": {"messages": [AIMessage("x")]}}, reach) == {
        "node": {"messages": [{"role": "assistant", "content": "x"}]}
    }
