"""Chat messages to and from JSON: role/content dicts that any language can read and write.

A `BaseMessage` becomes ``{"role": "user" | "assistant" | "system" | "tool" | "function",
"content": ..., ...}`` with only its non-empty fields, which LangChain reads back losslessly;
role/content dicts written by other clients (OpenAI style included) are read as well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from pydantic import JsonValue, ValidationError

from reach_adapters.errors import InvalidMessageError

__all__ = [
    "DUMP_TYPES",
    "ROLES",
    "final_text",
    "is_message_dict",
    "is_message_list",
    "message_from_dict",
    "message_from_item",
    "message_to_dict",
    "messages_input",
    "run_messages",
]

# Chunks subclass their message class, so they take its role.
_ROLES: tuple[tuple[type[BaseMessage], str], ...] = (
    (AIMessage, "assistant"),
    (HumanMessage, "user"),
    (SystemMessage, "system"),
    (ToolMessage, "tool"),
    (FunctionMessage, "function"),
)
_CLASSES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
    "function": FunctionMessage,
}
# Every role a message dict may have; "developer" is read by LangChain's own coercion, which
# knows its quirks.
ROLES: tuple[str, ...] = (*_CLASSES, "developer")
# The types of LangChain's own dump of a message (`message.model_dump()`) read in place of a role.
DUMP_TYPES: tuple[str, ...] = ("human", "ai", "system", "tool", "function")
_KNOWN = frozenset(ROLES)
# Streaming-only fields that mean nothing once a message is whole.
_CHUNK_FIELDS: set[str] = {"type", "tool_call_chunks", "chunk_position"}
# A streamed chunk keeps its partial tool calls: they are how a tool call streams.
_STREAMED_FIELDS: set[str] = {"type", "chunk_position"}


def message_to_dict(message: BaseMessage, *, streamed: bool = False) -> dict[str, Any]:
    """The role/content form of `message`, keeping every field that is set (and, for a `streamed`
    chunk, its ``tool_call_chunks``)."""
    fields = message.model_dump(exclude=_STREAMED_FIELDS if streamed else _CHUNK_FIELDS)
    role = next((name for cls, name in _ROLES if isinstance(message, cls)), None)
    # ChatMessage carries its own free-form role; other kinds keep LangChain's type name.
    out: dict[str, Any] = {"type": message.type} if role is None else {"role": role}
    out["content"] = fields.pop("content")
    for key, value in fields.items():
        if value is not None and value != {} and value != []:
            out[key] = value
    return out


def is_message_dict(value: object) -> TypeGuard[Mapping[str, Any]]:
    """True for a dict that reads as one chat message: a known role (or type) and content."""
    if not isinstance(value, Mapping) or "content" not in value:
        return False
    if value.get("type") == "chat":
        return True
    kind = value.get("role", value.get("type"))
    return isinstance(kind, str) and kind in _KNOWN


def is_message_list(value: object, *, pairs: bool = False) -> TypeGuard[list[Any]]:
    """True for a non-empty list in which every item is a message dict; with `pairs`, or a
    [role, content] pair, which LangGraph's ``add_messages`` reads too. The converter leaves pairs
    as they are, for ``add_messages`` to read: elsewhere a list of pairs is most often plain data."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(is_message_dict(item) or (pairs and _is_pair(item)) for item in value)
    )


def _is_pair(value: object) -> TypeGuard[list[Any]]:
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str) and value[0] in _KNOWN


def message_from_item(item: Any, *, where: str = "payload") -> BaseMessage:
    """Rebuild a message from an item of a message list: a message dict or a [role, content] pair."""
    if isinstance(item, list) and len(item) == 2:
        role, content = item
        return message_from_dict({"role": role, "content": content}, where=where)
    return message_from_dict(item, where=where)


def messages_input(value: Any, *, where: str) -> Any:
    """What LangGraph's ``add_messages`` reads, with its messages made: a string (a user message)
    as it is, one message dict, or a list of message dicts, [role, content] pairs and strings.

    ``add_messages`` would raise inside the graph on anything it cannot read, which would count
    against the agent; here it is an `InvalidMessageError` naming the field (`where`).
    """
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return message_from_dict(value, where=where)
    if not isinstance(value, list):
        kind = type(value).__name__
        msg = f"{where} takes chat messages: a list of them, one message or a string, got {kind}"
        raise InvalidMessageError(msg)
    made: list[Any] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            made.append(item)
        elif isinstance(item, Mapping) or (
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
        ):
            made.append(message_from_item(item, where=f"{where}[{i}]"))
        else:
            msg = f"{where}[{i}] is not a chat message: send a role/content object or a [role, content] pair"
            raise InvalidMessageError(msg)
    return made


def message_from_dict(data: Mapping[str, Any], *, where: str = "payload") -> BaseMessage:
    """Rebuild a message from its role/content form, or from any dict LangChain can coerce."""
    calls = data.get("tool_calls")
    if calls is not None and not (isinstance(calls, list) and all(isinstance(c, Mapping) for c in calls)):
        msg = f"{where}.tool_calls is a {type(calls).__name__}; send a list of tool call objects"
        raise InvalidMessageError(msg)
    # LangChain reads message dicts by indexing them, so a missing field or a field of the wrong
    # shape surfaces as KeyError, AttributeError or TypeError: the caller's mistake, not the agent's.
    try:
        return _message_from_dict(data, where)
    except KeyError as exc:
        msg = (
            f"{where} is not a chat message LangChain can read: it lacks {exc} (a tool "
            "message needs 'tool_call_id'; an OpenAI tool call needs 'id' and a 'function' with "
            "'name' and 'arguments')"
        )
        raise InvalidMessageError(msg) from None
    except (AttributeError, TypeError) as exc:
        msg = f"{where} is not a chat message LangChain can read: a field has the wrong type ({exc})"
        raise InvalidMessageError(msg) from None


def _message_from_dict(data: Mapping[str, Any], where: str) -> BaseMessage:
    if data.get("type") == "chat":
        fields = {k: v for k, v in data.items() if k != "type"}
        try:
            return ChatMessage.model_validate(fields)
        except ValidationError as exc:
            msg = f"{where} is not a chat message: {exc.errors(include_url=False)[0]['msg']}"
            raise InvalidMessageError(msg) from None
    cls = _CLASSES.get(data.get("role", data.get("type")))
    if cls is not None:
        fields = {k: v for k, v in data.items() if k not in ("role", "type")}
        if fields.keys() <= cls.model_fields.keys():
            try:
                return cls.model_validate(fields)
            except (ValueError, TypeError):
                # Not our own form (OpenAI-style tool calls, say): LangChain's coercion reads those.
                pass
    try:
        return convert_to_messages([dict(data)])[0]
    except (ValueError, NotImplementedError) as exc:
        msg = f"{where} is not a chat message LangChain can read: {exc}"
        raise InvalidMessageError(msg) from None


def run_messages(messages: list[BaseMessage], sent: JsonValue) -> list[BaseMessage]:
    """The messages a run added to its output `messages`, given the payload it was `sent`.

    A chat state comes back with the caller's history in it (after a checkpointed thread's
    earlier turns, if any), so the run's own messages are those after the last message sent.
    An output that does not hold that message (a chat model's reply, say) is all the run's own.
    """
    history: object = sent.get("messages") if isinstance(sent, dict) else sent
    # LangGraph's add_messages takes one message as well: a dict, or a string (a user message).
    if isinstance(history, str):
        history = [{"role": "user", "content": history}]
    elif is_message_dict(history):
        history = [history]
    if not is_message_list(history, pairs=True):
        return messages
    try:
        last = message_from_item(history[-1])
    except InvalidMessageError:
        # A custom converter may send these dicts some other way; nothing to anchor on then.
        return messages
    # From the end: a thread's earlier turns may hold the same message, and only the latest
    # copy is this run's input.
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].type == last.type and messages[i].content == last.content:
            return messages[i + 1 :]
    return messages


def final_text(messages: Sequence[BaseMessage]) -> str | None:
    """The text of the last AI message, else of the last message; None for no messages."""
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return str(message.text)
    return str(messages[-1].text) if messages else None
